"""Writing and reading run records: one JSON object per line.

The one reader: a line that is not a whole JSON object (cut by a crash, or by a copy in
progress; nested past archbench.common.jsonl's bound) is skipped and reported, a record of an older
schema version is migrated, and one of a newer version stops the read with one line naming it.
The one rule for a study's record files: a file is itself; a folder is its `results.jsonl`
(the sweep's), else every `.jsonl` below it except those in `report/` and the sweep's per-run
`runs/` folders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, append_line, loads
from archbench.record.schema import NewerSchema, migrate

RESULTS_NAME = "results.jsonl"
_NOT_RECORDS = frozenset({"report", "runs"})


def append_record(path: str, record: dict) -> None:
    """Appends the record as one line, all or nothing (archbench.common.jsonl.append_line).

    Raises OSError naming the file when it could not be written; the file is then unchanged.
    """
    append_line(path, (json.dumps(record, sort_keys=False, default=_json_default) + "\n").encode())


def _json_default(value):
    import numpy as np

    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


@dataclass
class Lines:
    """The records of some files, each with where it came from, and the lines that were not."""

    records: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # "file.jsonl:12" per record
    files: list[str] = field(default_factory=list)  # the file of each record
    bad: list[str] = field(default_factory=list)  # "file.jsonl:13" per skipped line


def read_lines(paths: list[Path] | Path | str, complete_only: bool = False) -> Lines:
    """Every record of the files, migrated to this schema; with `complete_only`, a last line
    without its newline is not a record yet (a writer may still be at it)."""
    out = Lines()
    for path in [paths] if isinstance(paths, str | Path) else paths:
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
        if complete_only:
            data = data[: data.rfind(b"\n") + 1]
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                # NaN stays readable: a diverged run's loss is one, and the report names it
                record = loads(line, allow_nan=True)
            except JsonProblem:
                record = None
            if not isinstance(record, dict):
                out.bad.append(f"{path.name}:{number}")
                continue
            try:
                out.records.append(migrate(record))
            except NewerSchema as exc:
                raise NewerSchema(f"{path}:{number}: {exc}") from None
            out.sources.append(f"{path.name}:{number}")
            out.files.append(str(path))
    return out


def read_records(path: str | Path) -> list[dict]:
    """Every complete record of a JSON-lines file; a cut or corrupt line is skipped."""
    return read_lines(path).records


def study_files(path: Path | str) -> list[Path]:
    """The record files of a study (see the module's docstring); UsageError when there are none."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"no such file or folder: {path}")
    preferred = path / RESULTS_NAME
    if preferred.is_file():
        return [preferred]
    files = [
        p
        for p in sorted(path.rglob("*.jsonl"))
        if p.is_file() and not _NOT_RECORDS & set(p.relative_to(path).parts[:-1])
    ]
    if not files:
        raise UsageError(f"no run records (*.jsonl) in {path}")
    return files


def latest_per_run(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per run id, the last one read (a record without an id is kept as it is)."""
    by_run: dict[Any, dict[str, Any]] = {}
    for index, record in enumerate(records):
        by_run[record.get("run_id", ("anonymous", index))] = record
    return list(by_run.values())
