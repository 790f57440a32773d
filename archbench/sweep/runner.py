"""Runs one command as a process tree that cannot outlive its timeout, or the driver.

The command runs as one process group that dies with the driver (archbench.common.process_group). On
timeout the group gets SIGTERM (mpirun and horovodrun then tear their ranks down, and each rank
writes a record saying so), then SIGKILL after a grace period. Ranks that live outside the group
(started through ssh on an emulated node, or re-parented after their launcher died) are found by a
marker that only this run has in its command line: the absolute path of its run folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from archbench.common.process_group import GRACE_S, GroupProcess


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int  # negative: killed by that signal (as subprocess reports it)
    timed_out: bool
    wall_s: float
    stragglers_killed: int  # processes of this run still alive after it ended, killed by us


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


class RunningProcess:
    """A started run: `wait()` returns its outcome; `stop()` tears it down (driver interrupted)."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: str, log_path: Path, marker: str
    ):
        self.marker = marker
        self.started = time.monotonic()
        with open(log_path, "ab") as log:
            self.group = GroupProcess(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)

    def wait(self, timeout_s: float, grace_s: float = GRACE_S) -> ProcessOutcome:
        timed_out = False
        try:
            self.group.communicate(timeout_s, grace_s)  # output goes to the log: nothing returned
        except subprocess.TimeoutExpired:
            timed_out = True  # the group is stopped already
        wall_s = time.monotonic() - self.started
        stragglers = self._sweep(grace_s)
        returncode = self.group.returncode
        assert returncode is not None
        return ProcessOutcome(returncode, timed_out, wall_s, stragglers)

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM to the group, SIGKILL after the grace period, then what is left of the run."""
        self.group.stop(grace_s)
        self._sweep(grace_s)

    def _sweep(self, grace_s: float) -> int:
        """Kills what of this run outlived its launcher: the rest of its group, then marked processes."""
        return int(self.group.kill_rest()) + kill_marked(self.marker, grace_s)
