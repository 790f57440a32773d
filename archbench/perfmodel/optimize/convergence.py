"""Steps to a target accuracy, as measured, for the optimizer's `time_to_target` objective.

The performance model predicts a step, not how many steps training needs. Steps to a target
depend on the sequence of updates, which synchronous data parallelism fixes by the model, the
data, the global batch and the optimizer's settings, not by the architecture that moves the
gradients (the equivalence oracle of the README). So a configuration's time to target is
predicted as the steps any run of the same *convergence group* took to reach the target, times
the configuration's predicted step. Asynchronous updates, compression and local SGD change the
updates: they are part of the group, so their steps are never borrowed from synchronous runs.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from archbench.common.archs import is_baseline
from archbench.record.schema import first_point_at
from archbench.runtime.settings import SETTINGS, parse_shape

# Settings that change which updates are applied (besides the global batch); the others of a
# method or a data set only where that method or data set is the one used.
BASE_FIELDS = ("model", "dataset", "data_dir", "lr", "momentum", "optimizer", "sync")
DATASET_FIELDS = {
    "synthetic": ("synthetic_shape", "synthetic_classes", "synthetic_samples"),
    "text": ("text_file", "seq_len"),
}
COMPRESSION_FIELDS = {
    "topk": ("compression_ratio", "compression_warmup_steps", "error_feedback"),
    "powersgd": ("powersgd_rank", "compression_warmup_steps", "error_feedback"),
}
LOCAL_SGD_FIELDS = ("sync_every_warmup_steps",)


def _level(config: dict[str, Any], name: str) -> Any:
    """The setting's value, the registry's default where the config leaves it out (a sweep's
    configuration) or writes None (a record, where it does not apply), in one spelling."""
    value = config.get(name)
    if value is None:
        value = SETTINGS[name].default
    if name == "sync":  # a record writes sync/async, a spec may say true/false
        return value if isinstance(value, str) else ("sync" if value else "async")
    if SETTINGS[name].kind == "shape" and value is not None:
        return list(parse_shape(value) if isinstance(value, str) else value)
    return value


def convergence_key(config: dict[str, Any], workers: int) -> str:
    """The group of configurations that apply the same sequence of updates."""
    names = list(BASE_FIELDS) + list(DATASET_FIELDS.get(_level(config, "dataset"), ()))
    compression = _level(config, "compression")
    if is_baseline(config.get("arch")):
        compression = "none"  # not carried by single: no record of it says otherwise
    names += COMPRESSION_FIELDS.get(compression, ())
    sync_every = (
        int(_level(config, "sync_every") or 1) if not is_baseline(config.get("arch")) else 1
    )
    if sync_every > 1:
        names += LOCAL_SGD_FIELDS
    levels = {name: _level(config, name) for name in names}
    global_batch = int(_level(config, "batch_size")) * max(1, int(workers))
    return json.dumps(
        {**levels, "global_batch": global_batch, "compression": compression,
         "sync_every": sync_every},
        sort_keys=True, default=str,
    )  # fmt: skip


def first_reach(record: dict[str, Any], target: float) -> tuple[int, float] | None:
    """(step, training seconds) of a run's first evaluation at or above `target`, or None."""
    return first_point_at(list((record.get("timing") or {}).get("epochs") or []), target)


@dataclass(frozen=True)
class GroupConvergence:
    steps_to_target: float | None  # median over the runs that reached it; None when under half did
    runs: int
    reached: int


def record_workers(record: dict[str, Any]) -> int:
    cluster = record.get("cluster") or {}
    return int(cluster.get("num_workers") or (record.get("config") or {}).get("workers") or 1)


def measured_convergence(
    records: Iterable[dict[str, Any]], target: float
) -> dict[str, GroupConvergence]:
    """Per convergence group, the steps its ok runs took to reach `target`. A group where fewer
    than half of the runs reached it has no steps: its median would be the lucky runs'."""
    reached: dict[str, list[int]] = {}
    runs: dict[str, int] = {}
    for record in records:
        if record.get("status") != "ok":
            continue
        key = convergence_key(record.get("config") or {}, record_workers(record))
        runs[key] = runs.get(key, 0) + 1
        point = first_reach(record, target)
        if point is not None:
            reached.setdefault(key, []).append(point[0])
    groups = {}
    for key, count in runs.items():
        steps = reached.get(key, [])
        enough = len(steps) * 2 >= count and steps
        groups[key] = GroupConvergence(
            float(statistics.median(steps)) if enough else None, count, len(steps)
        )
    return groups


def measured_time_to_target(records: Iterable[dict[str, Any]], target: float) -> float | None:
    """Median over a configuration's ok runs of the training time at which each first reached
    `target` (a run that never did counts as infinitely slow); None without ok runs."""
    times = [
        (point[1] if point is not None else math.inf)
        for point in (first_reach(r, target) for r in records if r.get("status") == "ok")
    ]
    if not times:
        return None
    return float(statistics.median(times))
