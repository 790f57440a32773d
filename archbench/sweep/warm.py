"""One launch of a warm group, driver side: start it, and tell when each of its runs ended.

The ranks run the group's runs in order (archbench.runtime.warmgroup). A run has ended when its chief's
record is in its run folder with status ok; the next run's timeout starts then. A run ends
otherwise when the launch exits (a crash, a failed run: its own record says why) or when its
timeout passes (the launch is stopped, as a cold run's is). Either way the launch is over and the
runs after that one are left to a fresh launch. Each run's log is the part of the launch's log
written while it ran.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from archbench.common.process_group import GRACE_S
from archbench.runtime.environment import now_iso
from archbench.sweep.records import train_record
from archbench.sweep.runner import ProcessOutcome, RunningProcess

POLL_S = 0.05  # how often the driver looks for the running run's record
# After a group's last record, how long its ranks may take to leave (finalize MPI, exit).
EXIT_GRACE_S = 30.0


@dataclass(frozen=True)
class GroupMember:
    run_id: str
    run_dir: Path
    record_path: Path
    timeout_s: float
    train_args: list[str]  # the flags of `python -m archbench.train` for this run


@dataclass(frozen=True)
class MemberEnded:
    member: GroupMember
    outcome: ProcessOutcome
    started_at: str
    finished_at: str


def write_runs_file(path: Path, group: str, launched_at: float, members: list[GroupMember]) -> None:
    """The file every rank reads (archbench.runtime.warmgroup.read_runs_file), written whole or not at all."""
    scratch = path.with_name(path.name + ".tmp")
    runs = [{"run_id": m.run_id, "argv": m.train_args} for m in members]
    scratch.write_text(json.dumps({"group": group, "launched_at": launched_at, "runs": runs}))
    scratch.replace(path)


class GroupLaunch:
    """A started launch of a group; `runs()` yields each run as it ends, up to the first that did
    not end ok (the launch is over then); `stop()` tears it down (driver interrupted)."""

    def __init__(
        self,
        argv: list[str],
        members: list[GroupMember],
        *,
        env: dict[str, str],
        cwd: str,
        log_path: Path,
        marker: str,
        grace_s: float = GRACE_S,
    ):
        self.members = members
        self.log_path = log_path
        self.grace_s = grace_s
        self.process = RunningProcess(argv, env=env, cwd=cwd, log_path=log_path, marker=marker)

    def stop(self, grace_s: float | None = None) -> None:
        self.process.stop(self.grace_s if grace_s is None else grace_s)

    def runs(self) -> Iterator[MemberEnded]:
        started = time.monotonic()
        started_at = now_iso()
        log_from = 0
        for index, member in enumerate(self.members):
            ended = self._wait_for(member, started)
            log_from = self._cut_log(member, log_from)
            finished_at = now_iso()
            last = index == len(self.members) - 1
            if ended is None:  # its record says ok: the launch goes on to the next run
                outcome = ProcessOutcome(0, False, time.monotonic() - started, 0)
                if last:
                    outcome = self._leave(outcome)
                yield MemberEnded(member, outcome, started_at, finished_at)
                started, started_at = time.monotonic(), finished_at
                continue
            yield MemberEnded(member, ended, started_at, finished_at)
            return

    def _wait_for(self, member: GroupMember, started: float) -> ProcessOutcome | None:
        """None once the run's ok record is there; else how the launch ended during the run."""
        deadline = started + member.timeout_s
        group = self.process.group
        while True:
            if _ok(member):
                return None
            if group.process.poll() is not None:
                outcome = self.process.wait(0, self.grace_s)  # it has exited: collect the rest
                if _ok(member):  # written just before the launch ended
                    return None if outcome.returncode == 0 else _as_run(outcome, started)
                return _as_run(outcome, started)
            if time.monotonic() >= deadline:
                outcome = self.process.wait(0, self.grace_s)  # stops the launch (timed out)
                return _as_run(outcome, started)
            time.sleep(POLL_S)

    def _leave(self, outcome: ProcessOutcome) -> ProcessOutcome:
        """After the group's last run: the launch exits on its own, or is stopped."""
        ended = self.process.wait(EXIT_GRACE_S, self.grace_s)
        return ProcessOutcome(ended.returncode, False, outcome.wall_s, ended.stragglers_killed)

    def _cut_log(self, member: GroupMember, start: int) -> int:
        """Copies the launch's log written since `start` to the run's own log; the new offset."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(start)
                text = log.read()
        except OSError:
            return start
        with open(member.run_dir / "log.txt", "ab") as own:
            own.write(text)
        return start + len(text)


def _ok(member: GroupMember) -> bool:
    own = train_record(member.record_path, member.run_id)
    return own is not None and own.get("status") == "ok"


def _as_run(outcome: ProcessOutcome, started: float) -> ProcessOutcome:
    """The launch's outcome, timed from this run's start."""
    wall = time.monotonic() - started
    return ProcessOutcome(outcome.returncode, outcome.timed_out, wall, outcome.stragglers_killed)


def group_id() -> str:
    """A name for one launch of a group, unique within the study."""
    return f"g{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6:06d}"
