"""Warm groups: a study's pending runs grouped by process layout, so one launch runs several.

Runs share a launch when nothing a rank fixes at start-up differs between them: the launcher and
its controller, the architecture (its roles per rank), the ranks per host and their placement,
the emulated link, the threads per process (TensorFlow fixes them at its first operation), and
for `ring` what Horovod and MPI read when they initialise (fusion threshold, cycle time, the
allreduce algorithm): Horovod is initialised once per launch. A traced run (`timeline:`) joins
its layout's launch, except for the Horovod architectures: Horovod records its own timeline only
when `HOROVOD_TIMELINE` is set at its initialisation, and that makes its coordinator work harder
every cycle, so traced Horovod runs share launches with traced ones only. Gloo runs (their
rendezvous is set up once per launch) run alone.
"""

from __future__ import annotations

import json
from typing import Any

from archbench.common.archs import uses_horovod
from archbench.sweep.plan import PlannedRun

# Settings read once per process (or per Horovod or MPI initialisation) by the ranks.
_FIXED_AT_START = ("launcher", "controller", "placement", "bandwidth", "threads", "companions")
_FIXED_AT_HOROVOD_INIT = ("fusion_threshold_mb", "cycle_time_ms", "allreduce_algorithm")


def layout_key(run: PlannedRun) -> str | None:
    """What a run's launch fixes, as a key; None for a run that needs a launch of its own."""
    config = run.config
    if config.get("controller") == "gloo":
        return None
    fixed: dict[str, Any] = {
        "launched": run.launched,
        "arch": run.arch,
        "world_size": run.world_size,
        "num_ps": run.num_ps,
        "layout": [list(block) for block in run.layout],
    }
    fixed.update({name: config.get(name) for name in _FIXED_AT_START})
    if uses_horovod(run.arch):
        fixed.update({name: config.get(name) for name in _FIXED_AT_HOROVOD_INIT})
        fixed["horovod_timeline"] = run.traced  # read at hvd.init (archbench.timeline.horovod)
    return json.dumps(fixed, sort_keys=True, default=str)


def warm_groups(runs: list[PlannedRun], by_repetition: bool = False) -> list[list[PlannedRun]]:
    """The runs in groups that can share a launch: groups in the order of their first run in
    `runs`, runs in their order in `runs` (so a shuffled study stays shuffled: its groups come in
    random order, and so do the runs inside each). `by_repetition` (`order: blocked`): a launch
    holds runs of one repetition only, so the repetitions of a configuration run at different
    times of the study instead of one after another in one launch."""
    groups: dict[str, list[PlannedRun]] = {}
    alone: list[list[PlannedRun]] = []
    ordered: list[list[PlannedRun]] = []
    for run in runs:
        key = layout_key(run)
        if key is not None and by_repetition:
            key = f"{run.repetition}:{key}"
        if key is None:
            alone.append([run])
            ordered.append(alone[-1])
        elif key in groups:
            groups[key].append(run)
        else:
            groups[key] = [run]
            ordered.append(groups[key])
    return ordered


def cold_groups(runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """One launch per run (`--cold`, `warm: false`)."""
    return [[run] for run in runs]
