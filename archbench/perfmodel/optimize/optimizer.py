"""Ranking a study's configurations by predicted training time, and judging the pick.

The configurations come from the sweep's own plan (the same run ids the sweep measures), so a
prediction and a measurement of one configuration always meet.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from archbench.common.archs import arch as architecture
from archbench.common.archs import has_servers
from archbench.common.bandwidth import parse_bandwidth
from archbench.perfmodel.measure.calibration import Calibration, is_finite_positive
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.modelinfo import (
    input_spec,
    ps_plan,
    shapes_only,
    steps_per_epoch,
    variable_bytes,
    vocab_of,
)
from archbench.perfmodel.model.predictor import ModelParams, StepConfig, predict_step
from archbench.perfmodel.model.units import emulated_burst_bytes
from archbench.perfmodel.optimize.convergence import (
    GroupConvergence,
    convergence_key,
    measured_convergence,
    measured_time_to_target,
)
from archbench.runtime.settings import applies

# epoch_time: seconds to train one epoch of the data set (median step x steps per epoch at
# this configuration's global batch) - comparable across worker counts and batch sizes;
# run_time: median step x the steps the run is configured for; time_to_target: the steps the
# configuration's convergence group took to reach a target accuracy x its step (predicted), or
# its runs' training time to the target (measured), see `convergence`.
OBJECTIVES = ("epoch_time", "run_time", "time_to_target")


@dataclass
class Candidate:
    """One configuration of the study: its runs, prediction and (once measured) measurement."""

    key: str
    config: dict[str, Any]  # the sweep's configuration (seed of the first repetition)
    run_ids: list[str]
    step_config: StepConfig
    steps: int  # as configured
    epoch_samples: int  # training samples in one epoch of its data set
    predicted_step_s: float = math.nan
    predicted: float = math.nan  # the objective, seconds
    measured: float | None = None  # the objective from the records, seconds
    measured_step_s: float | None = None
    predicted_rank: int = 0
    measured_runs: int = 0
    steps_to_target: float | None = None  # time_to_target: measured for its convergence group
    notes: list[str] = field(default_factory=list)

    def label(self) -> str:
        c = self.config
        parts = [c["arch"], str(c.get("model", "mlp")), f"W={c.get('workers', 1)}",
                 f"b={c.get('batch_size', '?')}"]  # fmt: skip
        if has_servers(c["arch"]):
            parts.append(f"ps={c.get('num_ps', 1)} {c.get('placement', '')}".strip())
            parts.append("sync" if c.get("sync", True) else "async")
        if applies("p2p_schedule", c["arch"]) and c.get("p2p_schedule"):
            parts.append(c["p2p_schedule"])
        if c.get("bandwidth"):
            parts.append(str(c["bandwidth"]))
        return " ".join(parts)


def config_key(config: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True, default=str)


def step_config_for(
    config: dict[str, Any], layout: Sequence[tuple[str, int]], shared_machine: bool
) -> StepConfig:
    """The model's view of a sweep configuration and its rank layout."""
    arch = config["arch"]
    hosts = [host for host, ranks in layout for _ in range(ranks)]
    num_ps = architecture(arch).servers(config.get("num_ps"))
    roles = [F.PS] * num_ps + [F.WORKER] * (len(hosts) - num_ps)
    shape, classes = input_spec(config)
    vocab = vocab_of(config)
    sizes = variable_bytes(str(config.get("model", "mlp")), shape, classes, vocab)
    placement = F.Placement(hosts=tuple(hosts), roles=tuple(roles))
    bandwidth = config.get("bandwidth")
    sharing = len(hosts) if shared_machine else max(hosts.count(h) for h in set(hosts))
    model = str(config.get("model", "mlp"))
    sharding = str(config.get("ps_sharding", "round-robin"))
    plan = ps_plan(model, shape, classes, num_ps, sharding, vocab) if num_ps else None
    return StepConfig(
        arch=arch,
        model=str(config.get("model", "mlp")),
        batch_size=int(config.get("batch_size", 32)),
        param_bytes=float(sum(sizes)),
        placement=placement,
        bandwidth_bits=parse_bandwidth(bandwidth) if bandwidth else None,
        sync=config.get("sync", True) is not False,
        ps_sharding=sharding,
        variable_bytes=sizes,
        ps_plan=plan,
        fusion_threshold_mb=config.get("fusion_threshold_mb"),
        compression=str(config.get("compression", "none")),
        compression_ratio=float(config.get("compression_ratio", 0.01)),
        powersgd_rank=int(config.get("powersgd_rank", 2)),
        variable_shapes=shapes_only(model, shape, classes, vocab)
        if config.get("compression") == "powersgd"
        else None,
        p2p_schedule=str(config.get("p2p_schedule", "staggered")),
        cpu_sharing_ranks=sharing,
        link_burst_bytes=emulated_burst_bytes(bandwidth) if shared_machine else 0.0,
        sync_every=int(config.get("sync_every") or 1),
    )


def planned_steps(config: dict[str, Any], workers: int) -> int:
    """Training steps of the configuration: --steps, else epochs x steps per epoch."""
    if config.get("steps"):
        return int(config["steps"])
    per_epoch = steps_per_epoch(config, workers) or 1
    return int(config.get("epochs") or 1) * per_epoch


def objective(step_s: float, cand: Candidate, name: str) -> float:
    """The candidate's objective, seconds, had every step taken `step_s`."""
    if name == "run_time":
        return step_s * cand.steps
    if name == "time_to_target":  # unknown steps rank last: nothing says how long they take
        return step_s * cand.steps_to_target if cand.steps_to_target else math.inf
    config = cand.step_config
    return step_s * cand.epoch_samples / (config.num_workers * config.batch_size)


def predict_candidates(
    candidates: list[Candidate], params: ModelParams, calib: Calibration, objective_name: str
) -> list[Candidate]:
    """Fills in predictions and ranks the candidates, best (smallest objective) first."""
    for cand in candidates:
        cand.predicted_step_s = predict_step(cand.step_config, params, calib).step_s
        cand.predicted = objective(cand.predicted_step_s, cand, objective_name)
    ranked = sorted(candidates, key=lambda c: (c.predicted, c.key))
    for rank, cand in enumerate(ranked, start=1):
        cand.predicted_rank = rank
    return ranked


def measured_step_s(record: dict[str, Any]) -> Any:
    """The measured step the model predicts: amortized over local and averaging steps where
    --sync-every mixed them (the median itself otherwise). Records come through the migrating
    reader (archbench.record), whose `migrate_to_3` gives an older record the median here."""
    timing = record.get("timing") or {}
    return timing.get("step_s_amortized")


def attach_convergence(
    candidates: list[Candidate], records: Sequence[dict[str, Any]], target: float
) -> dict[str, GroupConvergence]:
    """Each candidate's steps to `target`, as its convergence group's runs measured them."""
    groups = measured_convergence(records, target)
    for cand in candidates:
        group = groups.get(convergence_key(cand.config, cand.step_config.num_workers))
        cand.steps_to_target = group.steps_to_target if group else None
    return groups


def attach_measurements(
    candidates: list[Candidate],
    records: Sequence[dict[str, Any]],
    objective_name: str,
    target: float | None = None,
) -> None:
    """Median measured step over the ok runs of each candidate, as the same objective (for
    time_to_target: the median training time its runs took to reach `target`)."""
    by_run = {r.get("run_id"): r for r in records if r.get("status") == "ok"}
    for cand in candidates:
        steps = [
            measured_step_s(by_run[run_id])
            for run_id in cand.run_ids
            if run_id in by_run and is_finite_positive(measured_step_s(by_run[run_id]))
        ]
        cand.measured_runs = len(steps)
        if steps:
            cand.measured_step_s = float(statistics.median(steps))
            cand.measured = objective(cand.measured_step_s, cand, objective_name)
        if objective_name == "time_to_target" and target is not None:
            cand.measured = measured_time_to_target(
                [by_run[run_id] for run_id in cand.run_ids if run_id in by_run], target
            )


def random_search_odds(values: Sequence[float], budget: int, tolerance: float) -> dict[str, float]:
    """Best of `budget` configurations drawn at random without replacement from `values`:
    its expected gap to the best, and the chance it lands within `tolerance` of the best.

    Exact: with values sorted, the best draw is the r-th smallest with probability
    C(N - r, k - 1) / C(N, k).
    """
    ordered = sorted(values)
    n, k = len(ordered), min(budget, len(values))
    if n == 0 or k == 0:
        return {"expected_gap_pct": math.nan, "p_within_tolerance": math.nan}
    best = ordered[0]
    total = math.comb(n, k)
    expected_gap = 0.0
    p_within = 0.0
    for r, value in enumerate(ordered, start=1):
        p = math.comb(n - r, k - 1) / total
        gap = (value - best) / best
        expected_gap += p * gap
        if gap <= tolerance + 1e-12:
            p_within += p
    return {"expected_gap_pct": expected_gap * 100, "p_within_tolerance": p_within}
