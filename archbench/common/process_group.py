"""A command run as one process group that cannot outlive its timeout, or its caller.

The command starts in a session of its own, so it and everything it starts (mpirun's daemons and
ranks, the ssh clients that reach other hosts) form one process group, and with PR_SET_PDEATHSIG,
so it is told to stop when the process that started it dies. Stopping it sends SIGTERM to the
whole group (mpirun and horovodrun then tear their ranks down), then SIGKILL after a grace period.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import IO, Any

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    # Looked up here, before fork: the child should only make system calls, not load libraries.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def setup() -> None:  # runs in the child between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GroupProcess:
    """A started command, leader of its own process group. stdin is /dev/null; stdout and
    stderr are as for subprocess.Popen (a file, PIPE, STDOUT)."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        text: bool = False,
    ):
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=text,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
        self.pgid = self.process.pid  # session leader: its pid is the group id

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def communicate(self, timeout_s: float, grace_s: float = GRACE_S) -> tuple[Any, Any]:
        """Waits for the command and returns its piped (stdout, stderr). On timeout
        (subprocess.TimeoutExpired) or an interrupt, the whole group is stopped before the
        exception goes on."""
        try:
            return self.process.communicate(timeout=timeout_s)
        except BaseException:
            self.stop(grace_s)
            raise

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM to the group, SIGKILL to what is left after the grace period, then reap."""
        _signal_group(self.pgid, signal.SIGTERM)
        try:
            # communicate, not wait: a launcher tearing down may fill a pipe nobody reads.
            self.process.communicate(timeout=grace_s)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass
        deadline = time.monotonic() + grace_s
        while _group_alive(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(self.pgid, signal.SIGKILL)
        self.process.wait()

    def kill_rest(self) -> bool:
        """SIGKILLs what is left of the group after its leader ended; True if anything was."""
        if not _group_alive(self.pgid):
            return False
        _signal_group(self.pgid, signal.SIGKILL)
        return True


def run_in_group(
    argv: list[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    merge_stderr: bool = False,
    grace_s: float = GRACE_S,
) -> subprocess.CompletedProcess[str]:
    """Like subprocess.run(capture_output=True, text=True), for a command that starts a process
    tree: on timeout (subprocess.TimeoutExpired is raised) or an interrupt the whole tree is
    stopped first. With `merge_stderr`, stderr goes into stdout."""
    group = GroupProcess(
        argv,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
    )
    stdout, stderr = group.communicate(timeout_s, grace_s)
    return subprocess.CompletedProcess(argv, group.process.returncode, stdout, stderr)
