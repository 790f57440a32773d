"""Predicted throughput of ring / p2p / ps on clusters larger than the one at hand."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archbench.common.archs import ARCHS, is_baseline, uses_horovod
from archbench.common.bandwidth import parse_bandwidth
from archbench.common.errors import UsageError
from archbench.perfmodel.fit.records import Observation
from archbench.perfmodel.measure.calibration import Calibration
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.modelinfo import (
    embedding_shape,
    input_spec,
    ps_plan,
    variable_bytes,
    variable_flops,
    vocab_of,
)
from archbench.perfmodel.model.predictor import (
    ModelParams,
    StepConfig,
    StepPrediction,
    default_placement,
    predict_step,
)

DEFAULT_BATCH = 64
# scaling efficiency (samples/s over W times one worker alone) whose crossing is reported
WALLS = (0.8, 0.5)
PS_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
# the multi-process architectures without servers (ring, p2p): one curve each
ALLREDUCE_LIKE = tuple(n for n, a in ARCHS.items() if a.multi_process and not a.has_servers)


@dataclass(frozen=True)
class ModelFacts:
    sizes: tuple[float, ...]
    shape: tuple[int, ...]
    classes: int
    batch: int | None  # the study's most common batch for this model
    vocab: int | None = None  # a word model's embedding rows


def _model_facts(
    model: str, observations: Sequence[Observation], inputs: dict[str, Any] | None
) -> ModelFacts:
    """Variable sizes, input shape and usual batch of a model: the input settings given, else
    those of the study's runs of it; the sizes from the builder."""
    mine = [o for o in observations if o.config.model == model]
    batch = Counter(o.config.batch_size for o in mine).most_common(1)[0][0] if mine else None
    if inputs and inputs.get("dataset"):
        config = inputs
    else:
        config = (mine[0].record.get("config") or {}) if mine else {"dataset": "fashion_mnist"}
    shape, classes = input_spec(config)
    vocab = vocab_of(config)
    try:
        sizes = variable_bytes(model, shape, classes, vocab)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - the builder's own message is not ours to show
        raise UsageError(f"cannot build model {model!r} to count its parameters") from None
    return ModelFacts(sizes, shape, classes, batch, vocab)


@dataclass(frozen=True)
class ClusterOptions:
    """What the hosts and the allreduce are like (`model whatif`'s cluster flags); the defaults
    are one worker per host, the ring with fused buffers in turn and no overlap."""

    devices_per_host: int = 1  # workers on one host, in rank order (GPUs sharing its NIC)
    allreduce_algorithm: str = F.RING  # ring through every device, or hierarchical
    overlap_schedule: str = "fraction"  # or "backward": the layer-order schedule (ring)
    pipelined_buffers: bool = False
    fusion_threshold_mb: float | None = None  # Horovod's tensor fusion threshold (64 MB)
    call_s: float = 0.0  # fixed cost per allreduce call (devices_per_host > 1)
    backward_share: float = 2.0 / 3.0  # the backward pass's share of the compute

    def placement(self, arch: str, workers: int, num_ps: int) -> F.Placement:
        """The standard layout with the workers `devices_per_host` to a host (servers on hosts
        of their own)."""
        placed = default_placement(arch, workers, num_ps, "dedicated", None)
        if self.devices_per_host <= 1:
            return placed
        servers = len(placed.ps_hosts)
        hosts = [f"node{k + 1}" for k in range(servers)] + [
            f"node{servers + i // self.devices_per_host + 1}" for i in range(workers)
        ]
        return F.Placement(hosts=tuple(hosts), roles=placed.roles)

    def configure(self, config: StepConfig) -> StepConfig:
        """A configuration with these cluster settings (the GPU-server allreduce for the ring
        only: other architectures see the hosts through their placement)."""
        return replace(
            config,
            devices_per_host=self.devices_per_host if uses_horovod(config.arch) else 1,
            allreduce_algorithm=self.allreduce_algorithm,
            overlap_schedule=self.overlap_schedule if uses_horovod(config.arch) else "fraction",
            pipelined_buffers=self.pipelined_buffers,
            fusion_threshold_mb=self.fusion_threshold_mb,
            call_s=self.call_s,
            backward_share=self.backward_share,
        )


@dataclass
class Curve:
    """One line of a what-if panel: the prediction at each worker count (for ps at its best
    number of servers, named in `notes`)."""

    points: list[tuple[int, StepPrediction]] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)

    def rates(self) -> list[tuple[int, float]]:
        return [(w, p.samples_per_s) for w, p in self.points]


@dataclass(frozen=True)
class Wall:
    """Where a curve's scaling efficiency first falls below `threshold`, and what dominates
    the step there (None: not within the curve's worker counts)."""

    threshold: float
    workers: int | None
    efficiency: float | None = None
    term: str | None = None
    term_share: float | None = None


def efficiency(workers: int, rate: float, single_rate: float) -> float:
    """Samples/s of W workers over W times the samples/s of one worker alone."""
    return rate / (workers * single_rate) if single_rate > 0 else float("nan")


def scaling_walls(
    points: Sequence[tuple[int, float]],
    single_rate: float,
    thresholds: Sequence[float] = WALLS,
    dominant: dict[int, tuple[str, float]] | None = None,
) -> list[Wall]:
    """For each threshold, the smallest worker count of the curve whose efficiency is below it,
    with the dominant term of the step there when `dominant` (W -> (term, share)) is given."""
    walls = []
    for threshold in thresholds:
        found = Wall(threshold, None)
        for w, rate in sorted(points):
            eff = efficiency(w, rate, single_rate)
            if eff < threshold:
                term, share = (dominant or {}).get(w, (None, None))
                found = Wall(threshold, w, eff, term, share)
                break
        walls.append(found)
    return walls


def whatif_curves(
    models: Sequence[str],
    workers: Sequence[int],
    bandwidths: Sequence[str],
    params: ModelParams,
    calib: Calibration,
    observations: Sequence[Observation],
    batch_size: int | None,
    inputs: dict[str, Any] | None = None,
    cluster: ClusterOptions | None = None,
) -> tuple[dict[tuple[str, str], dict[str, Curve]], dict[str, int], dict[str, float]]:
    """Predictions per (model, bandwidth) and line label, over worker counts; the batch of
    each model and the samples/s of one worker alone (the efficiency's reference).

    One worker per host, PS on hosts of their own; ps is drawn with one server and with the
    best number of servers (powers of two up to W) and plan (round-robin or balanced). With
    `touched_rows` (inputs' --sparse-exchange sparse) every architecture moves its model's
    embedding rows sparse (ring: the rows each batch looks up; p2p and ps: `touched_rows` unique
    ones), and a `ring (dense)` line beside them says where sparse rows beat the allreduce.
    `cluster` puts several workers on a host and sets how the ring's allreduce runs.
    """
    cluster = cluster or ClusterOptions()
    touched_rows = (inputs or {}).get("touched_rows")
    curves: dict[tuple[str, str], dict[str, Curve]] = {}
    batches: dict[str, int] = {}
    singles: dict[str, float] = {}
    for model in models:
        facts = _model_facts(model, observations, inputs)
        batch = batch_size or facts.batch or DEFAULT_BATCH
        batches[model] = batch
        plans = {
            (k, sharding): ps_plan(model, facts.shape, facts.classes, k, sharding, facts.vocab)
            for k in PS_COUNTS
            if k <= max(workers)
            for sharding in ("round-robin", "balanced")
        }
        for bandwidth in bandwidths:
            dense_base = StepConfig(
                arch="ring", model=model, batch_size=batch, param_bytes=float(sum(facts.sizes)),
                placement=default_placement("ring", 2, 0, "dedicated", None),
                bandwidth_bits=parse_bandwidth(bandwidth), variable_bytes=facts.sizes,
            )  # fmt: skip
            if cluster.overlap_schedule == "backward":
                dense_base = replace(
                    dense_base,
                    variable_flops=variable_flops(model, facts.shape, facts.classes, facts.vocab),
                )
            base = dense_base
            if touched_rows:
                table = embedding_shape(model, facts.shape, facts.classes, facts.vocab)
                if table is None:
                    raise UsageError(f"--sparse-exchange sparse: model {model!r} has no embedding")
                base = replace(
                    dense_base, sparse_exchange="sparse", touched_rows=float(touched_rows),
                    embedding_shape=table, rows_looked_up=float(batch * math.prod(facts.shape)),
                )  # fmt: skip

            def predict(config: StepConfig) -> StepPrediction:
                if not is_baseline(config.arch):
                    config = cluster.configure(config)
                return predict_step(config, params, calib)

            alone = replace(
                base, arch="single", placement=default_placement("single", 1, 0, "dedicated", None)
            )
            singles[model] = predict(alone).samples_per_s
            lines: dict[str, Curve] = {
                "ring": Curve(), "p2p": Curve(), "ps (1 PS)": Curve(), "ps (best K)": Curve(),
            }  # fmt: skip
            if touched_rows:
                lines["ring (dense)"] = Curve()
            for w in workers:
                if touched_rows:
                    placement = cluster.placement("ring", w, 0)
                    lines["ring (dense)"].points.append(
                        (w, predict(replace(dense_base, placement=placement)))
                    )
                for arch in ALLREDUCE_LIKE:
                    placement = cluster.placement(arch, w, 0)
                    lines[arch].points.append(
                        (w, predict(replace(base, arch=arch, placement=placement)))
                    )
                best: tuple[StepPrediction, str] | None = None
                for k in (k for k in PS_COUNTS if k <= w):
                    for sharding in ("round-robin", "balanced"):
                        config = replace(
                            base, arch="ps", ps_sharding=sharding, ps_plan=plans[(k, sharding)],
                            placement=cluster.placement("ps", w, k),
                        )  # fmt: skip
                        prediction = predict(config)
                        if k == 1 and sharding == "round-robin":
                            lines["ps (1 PS)"].points.append((w, prediction))
                        if best is None or prediction.samples_per_s > best[0].samples_per_s:
                            best = (prediction, f"K={k} {sharding}")
                assert best is not None
                lines["ps (best K)"].points.append((w, best[0]))
                lines["ps (best K)"].notes[w] = best[1]
            curves[(model, bandwidth)] = lines
    return curves, batches, singles


def walls_of(curve: Curve, single_rate: float) -> list[Wall]:
    """The efficiency walls of one curve, with the term that costs the most there (the
    largest besides compute: with the compute of one worker alone the same at every W, the
    rest of the step is what the efficiency lost)."""
    dominant = {w: p.dominant_overhead for w, p in curve.points}
    return scaling_walls(curve.rates(), single_rate, WALLS, dominant)


def describe_walls(label: str, curve: Curve, single_rate: float) -> str:
    """One line: the efficiency at the first and last worker counts, and each wall."""
    (w0, p0), (w1, p1) = curve.points[0], curve.points[-1]
    parts = [
        f"{label:12s} efficiency {efficiency(w0, p0.samples_per_s, single_rate):4.0%} at "
        f"W={w0}, {efficiency(w1, p1.samples_per_s, single_rate):4.0%} at W={w1}"
        + (f" ({curve.notes[w1]})" if w1 in curve.notes else "")
    ]
    for wall in walls_of(curve, single_rate):
        if wall.workers is None:
            parts.append(f"stays >= {wall.threshold:.0%} up to W={w1}")
        else:
            parts.append(
                f"< {wall.threshold:.0%} from W={wall.workers} "
                f"({wall.term} {wall.term_share:.0%} of the step)"
            )
    return "; ".join(parts)
