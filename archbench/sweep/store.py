"""`runs/<study>/results.jsonl`: one record per run id, safe against a driver killed at any moment.

Only the sweep driver writes this file, and only after a run has ended, through
archbench.common.jsonl.append_line: a whole line or nothing. A line cut short (the file does not end in a
newline) is ignored on load and cut off under the lock, so the next append starts on a fresh line. A retried run replaces
its earlier record through a temporary file, fsync and rename, so the file always holds either the
old record or the new one, never both and never neither.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, append_line, cut_partial_tail, fsync_dir, loads
from archbench.common.study_state import RESULTS_LOCK_NAME, SWEEP_LOCK_NAME
from archbench.record.io import RESULTS_NAME, read_lines


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=False, default=str, allow_nan=True)


class ResultStore:
    """The records of one study, indexed by run id."""

    def __init__(self, results_dir: Path):
        self.dir = Path(results_dir)
        self.path = self.dir / RESULTS_NAME
        self._lock_path = self.dir / RESULTS_LOCK_NAME  # readers wait on it too (study_state)
        self.records: dict[str, dict[str, Any]] = {}
        self.skipped_lines = 0
        self._said: set[str] = set()  # the lines that are not records, said once per driver

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def load(self, repair: bool = True) -> dict[str, dict[str, Any]]:
        """Reads every complete record; with `repair`, cuts a half-written last line off the file."""
        if not self.path.exists():
            self.records = {}
            return self.records
        if repair:
            with self._locked():
                self._cut_partial_tail()
                return self._read()
        return self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        lines = read_lines(
            self.path, complete_only=True
        )  # a tail without newline is not a record yet
        self.skipped_lines = len(lines.bad)
        for where in lines.bad:
            if where in self._said:
                continue  # the file is read again before every write
            self._said.add(where)
            print(
                f"archbench sweep: {self.dir / where}: not a JSON record; left in place and "
                "ignored (delete that line to clear this message)",
                file=sys.stderr,
            )
        self.records = {
            r["run_id"]: r for r in lines.records if isinstance(r.get("run_id"), str)
        }  # a later line for the same id wins
        return self.records

    def _cut_partial_tail(self) -> None:
        if not self.path.exists():
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            cut = cut_partial_tail(fd)
        finally:
            os.close(fd)
        self._say_cut(cut)

    def _say_cut(self, cut: int) -> None:
        if cut:
            print(
                f"archbench sweep: {self.path}: ignoring a half-written last line ({cut} bytes)",
                file=sys.stderr,
            )

    def status_of(self, run_id: str) -> str | None:
        record = self.records.get(run_id)
        return record.get("status") if record else None

    def add(self, record: dict[str, Any]) -> bool:
        """Appends the record of a finished run, or replaces a failed one of the same id.

        Returns False (and writes nothing) when an ok record for this id is already in the file.
        """
        run_id = record["run_id"]
        line = (_dumps(record) + "\n").encode()
        with self._locked():
            self._cut_partial_tail()
            current = self._read()
            previous = current.get(run_id)
            if previous is not None and previous.get("status") == "ok":
                return False
            if previous is None:
                self._append_line(line)
            else:
                self._replace(run_id, line)
            current[run_id] = record
            self.records = current
        return True

    def _append_line(self, line: bytes) -> None:
        self._say_cut(append_line(self.path, line, lock=False))  # self._locked() is held
        fsync_dir(self.dir)

    def _replace(self, run_id: str, line: bytes) -> None:
        kept = []
        for raw in self.path.read_bytes().splitlines(keepends=True):
            try:
                if loads(raw, allow_nan=True).get("run_id") == run_id:
                    continue
            except (JsonProblem, AttributeError):
                pass  # a line that is not a record is kept as it is
            kept.append(raw)
        temporary = self.path.with_name(f".{RESULTS_NAME}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.writelines(kept)
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)  # the old file stands, untouched
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        fsync_dir(self.dir)


class StudyLock:
    """Held for the whole sweep, so two drivers never run the same study at once."""

    def __init__(self, results_dir: Path):
        self.path = Path(results_dir) / SWEEP_LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> StudyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise UsageError(
                f"study {self.path.parent.name} is already being run (driver pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
