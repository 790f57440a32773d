"""Running one command on a host: over ssh in batch mode (no password prompt, as mpirun and
horovodrun reach a host), or directly when the host is this one. Many hosts at once."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from archbench.common.process_group import run_in_group

CONNECT_TIMEOUT_S = 5
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


class Reply(NamedTuple):
    status: int | None  # None: it did not end within its time
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


def is_local(host: str) -> bool:
    """Whether `host` is this machine, which mpirun reaches without ssh."""
    return host in LOCAL_NAMES or host in (socket.gethostname(), socket.getfqdn())


def ssh_argv(host: str, command: Sequence[str], cwd: str | None = None) -> list[str]:
    """ssh running `command` on `host` in batch mode: a password or host-key prompt fails at
    once instead of waiting for an answer nobody gives. Like mpirun's ranks, the command starts
    in `cwd` where the host has that folder (so it imports the same checkout's archbench)."""
    line = shlex.join(command)
    if cwd:
        line = f"cd {shlex.quote(cwd)} 2>/dev/null; {line}"
    return [
        "ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", host, line,
    ]  # fmt: skip


def run_on(host: str, command: Sequence[str], timeout_s: float, cwd: str | None = None) -> Reply:
    """`command` on `host` (ssh, or here for this machine), within `timeout_s`."""
    if is_local(host):
        argv, where = list(command), (cwd if cwd and os.path.isdir(cwd) else None)
    else:
        argv, where = ssh_argv(host, command, cwd), None
    try:
        done = run_in_group(argv, timeout_s=timeout_s, cwd=where)
    except subprocess.TimeoutExpired:
        return Reply(None, "", "")
    except OSError as exc:  # no ssh client, or the program itself is missing here
        return Reply(127, "", f"{argv[0]}: {exc.strerror or exc}")
    return Reply(done.returncode, done.stdout, done.stderr)


def run_on_hosts(
    hosts: Sequence[str],
    command_for: Callable[[str], Sequence[str]],
    timeout_s: float,
    cwd: str | None = None,
) -> dict[str, Reply]:
    """Each host's reply to its command, all hosts at once (a slow host costs its own timeout
    once, not once per host before it)."""
    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=min(len(hosts), 32)) as pool:
        futures = {
            host: pool.submit(run_on, host, command_for(host), timeout_s, cwd) for host in hosts
        }
        return {host: future.result() for host, future in futures.items()}
