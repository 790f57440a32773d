"""Run-record files in the tests: read with archbench's own reader, written a record a line.

`read_records` is archbench.record.read_lines (older schemas migrated, as every reader in the
package sees them) with one check on top: a line that is not a record fails the test, since
archbench's writer never leaves one. `write_records` writes records the way
archbench.record.append_record does, one JSON object a line, then `tail` as it is (a cut line,
say). `built_record` is a record of today's schema made by archbench's own builder
(archbench.record.build_record) from the sections a test gives; `minimal_record` is the smallest
ok run record the report reads, as an older writer (schema 2) left it; `timed_record` is an ok
run of any architecture with only what the report's comparisons read (schema 1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from archbench.record import build_record, read_lines

BUILT_AT = "2026-01-01T00:00:00"  # a built record's start and end, where a test gives none


def read_records(path: Path | str) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, as archbench reads them; none for a missing file."""
    lines = read_lines(path)
    assert lines.bad == [], f"{path}: lines that are not records: {', '.join(lines.bad)}"
    return lines.records


def write_records(path: Path, records: Iterable[dict[str, Any]], tail: str = "") -> Path:
    """Writes the records to `path` (its folder made), one JSON object a line, then `tail`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records) + tail)
    return path


def built_record(
    run_id: str,
    config: dict[str, Any],
    *,
    study: str | None = "tests",
    status: str = "ok",
    cluster: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
    started_at: str = BUILT_AT,
    finished_at: str = BUILT_AT,
    **sections: Any,
) -> dict[str, Any]:
    """A run record of today's schema from archbench's builder: `config` and the sections given
    (timing, comm, result, fidelity, launch, ...), the rest empty."""
    return build_record(
        run_id=run_id, study=study, status=status, started_at=started_at,
        finished_at=finished_at, config=config, cluster=cluster or {}, env=env or {}, **sections,
    )  # fmt: skip


def minimal_record(run_id: str, lr: float, **timing: float) -> dict[str, Any]:
    """A minimal ok run record of `single` with these timings."""
    config = {"arch": "single", "model": "mlp", "dataset": "fashion_mnist", "batch_size": 32}
    config.update(global_batch_size=32, lr=lr)
    times = {"samples_per_s": 1000.0, "step_s_median": 0.032, "epoch_s": 60.0, **timing}
    return {"schema": "archbench.run/2", "run_id": run_id, "status": "ok", "config": config,
            "timing": times}  # fmt: skip


def timed_record(
    run_id: str,
    arch: str,
    workers: int,
    samples_per_s: float,
    *,
    model: str = "mlp",
    hosts: list[str] | None = None,
    timing: dict[str, float] | None = None,
    factors: dict[str, Any] | None = None,
    **config: Any,
) -> dict[str, Any]:
    """An ok run of `arch` with `workers` workers of batch 32 on 1 Gbit/s links at this rate
    (its median step the global batch over it): a PS run has one server, the first process, on
    a host of its own unless `hosts` places it; `config` adds settings, `timing` more times."""
    servers = 1 if arch == "ps" else 0
    world = 1 if arch == "single" else workers + servers
    record = {
        "schema": 1,
        "run_id": run_id,
        "status": "ok",
        "config": {
            "arch": arch,
            "model": model,
            "dataset": "fashion_mnist",
            "batch_size": 32,
            "global_batch_size": 32 * workers,
            "num_ps": servers,
            "sync": "sync" if arch == "ps" else None,
            **config,
        },  # fmt: skip
        "cluster": {
            "num_workers": workers,
            "hosts": hosts or [f"n{k}" for k in range(1, world + 1)],
            "roles": ["ps"] * servers + ["worker"] * (world - servers),
            "link": "1gbit",
        },
        "timing": {
            "samples_per_s": samples_per_s,
            "step_s_median": 32 * workers / samples_per_s,
            **(timing or {}),
        },
        "result": {"test_accuracy": 0.7},
    }
    if factors is not None:
        record["factors"] = factors
    return record
