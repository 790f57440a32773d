"""Where a study stands while its sweep runs: how many runs it plans, whether a driver is at it,
and reading its records without catching one half-written.

The sweep writes `plan.json` (the ids of the runs it plans) beside `results.jsonl` when it starts,
and holds `.sweep.lock` for as long as it runs; `.results.lock` is held while a record is written.
The report reads these to say "12 of 47 runs; the study is still running" and to read only whole
records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PLAN_NAME = "plan.json"
SWEEP_LOCK_NAME = ".sweep.lock"  # held by the driver for the whole sweep
RESULTS_LOCK_NAME = ".results.lock"  # held while results.jsonl is written


@dataclass(frozen=True)
class StudyState:
    """The runs a study's sweep planned, and whether a sweep of it is running now."""

    planned: frozenset[str]
    running: bool

    def landed(self, run_ids: set[str]) -> int:
        """How many of the planned runs have a record among `run_ids`."""
        return len(self.planned & run_ids)


def write_plan(results_dir: Path, study: str, run_ids: list[str]) -> None:
    """The plan's run ids, replaced whole (a reader sees the old file or the new one)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    target = results_dir / PLAN_NAME
    scratch = results_dir / f".{PLAN_NAME}.{os.getpid()}.tmp"
    scratch.write_text(json.dumps({"study": study, "run_ids": run_ids}) + "\n")
    os.replace(scratch, target)


def sweep_running(folder: Path) -> bool:
    """True while a driver holds the study's lock (a killed driver holds nothing)."""
    path = folder / SWEEP_LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        # a shared try fails while the driver holds it exclusively; taken, it is let go at once
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def read_state(folder: Path) -> StudyState | None:
    """The study's state, or None where no sweep wrote a plan (a folder of loose records, a file)."""
    if not folder.is_dir():
        return None
    try:
        data = json.loads((folder / PLAN_NAME).read_text())
        ids = frozenset(str(i) for i in data["run_ids"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no plan, or not one a sweep wrote: say nothing rather than guess
    return StudyState(ids, sweep_running(folder))


@contextlib.contextmanager
def records_settled(folder: Path) -> Iterator[None]:
    """Held while reading a study's records: no record is being written meanwhile, so every line
    read is whole (a sweep waits the few moments this takes before it appends)."""
    path = folder / RESULTS_LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no sweep ever wrote here: nothing to wait for
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing lets it go
