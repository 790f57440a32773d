"""Runs one command as a process tree that cannot outlive its timeout, or the driver.

The command starts in a session of its own (so the whole tree is one process group) with
PR_SET_PDEATHSIG, so it is told to stop if the driver dies. On timeout the group gets SIGTERM
(mpirun and horovodrun then tear their ranks down, and each rank writes a record saying so), then
SIGKILL after a grace period. Ranks that live outside the group (started through ssh on an
emulated node, or re-parented after their launcher died) are found by a marker that only this run
has in its command line: the absolute path of its run folder.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int  # negative: killed by that signal (as subprocess reports it)
    timed_out: bool
    wall_s: float
    stragglers_killed: int  # processes of this run still alive after it ended, killed by us


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:  # the driver died before prctl took effect
            os._exit(1)

    return setup


def _own_ancestry() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def pids_with_marker(marker: str) -> list[int]:
    """Processes whose command line contains `marker` (never this process or its ancestors).

    NUL separates the words of a command line; a shell given the command as one string
    (horovodrun starts `sh -c "mpirun ..."`) has spaces there instead, so both forms count.
    """
    needles = {marker.encode(), marker.replace("\0", " ").encode()}
    skip = _own_ancestry()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if any(needle in cmdline for needle in needles):
            found.append(int(entry))
    return found


def kill_marked(marker: str, grace_s: float = GRACE_S) -> int:
    """SIGTERM every process carrying `marker`, then SIGKILL what is left; returns how many."""
    pids = pids_with_marker(marker)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids_with_marker(marker):
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and pids_with_marker(marker):
        time.sleep(0.1)
    return len(pids)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


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


class RunningProcess:
    """A started run: `wait()` returns its outcome; `stop()` tears it down (driver interrupted)."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: str, log_path: Path, marker: str
    ):
        self.marker = marker
        self.started = time.monotonic()
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),
            )
        self.pgid = self.process.pid  # session leader: its pid is the group id

    def wait(self, timeout_s: float, grace_s: float = GRACE_S) -> ProcessOutcome:
        timed_out = False
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.stop(grace_s)
        wall_s = time.monotonic() - self.started
        stragglers = self._sweep(grace_s)
        return ProcessOutcome(self.process.returncode, timed_out, wall_s, stragglers)

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM to the group, SIGKILL after the grace period, then reap."""
        _signal_group(self.pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + grace_s
        while _group_alive(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(self.pgid, signal.SIGKILL)
        self.process.wait()
        self._sweep(grace_s)

    def _sweep(self, grace_s: float) -> int:
        """Kills what of this run outlived its launcher: the rest of its group, then marked processes."""
        count = 0
        if _group_alive(self.pgid):
            count += 1
            _signal_group(self.pgid, signal.SIGKILL)
        return count + kill_marked(self.marker, grace_s)
