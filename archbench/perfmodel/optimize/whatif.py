"""Predicted throughput of ring / p2p / ps on clusters larger than the one at hand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from archbench.archs import ARCHS
from archbench.bandwidth import parse_bandwidth
from archbench.errors import UsageError
from archbench.perfmodel.fit.records import Observation
from archbench.perfmodel.measure.calibration import Calibration
from archbench.perfmodel.model.modelinfo import input_spec, ps_plan, variable_bytes
from archbench.perfmodel.model.predictor import (
    ModelParams,
    StepConfig,
    default_placement,
    predict_step,
)

DEFAULT_BATCH = 64
PS_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
# the multi-process architectures without servers (ring, p2p): one curve each
ALLREDUCE_LIKE = tuple(n for n, a in ARCHS.items() if a.multi_process and not a.has_servers)


@dataclass(frozen=True)
class ModelFacts:
    sizes: tuple[float, ...]
    shape: tuple[int, ...]
    classes: int
    batch: int | None  # the study's most common batch for this model


def _model_facts(model: str, observations: Sequence[Observation]) -> ModelFacts:
    """Variable sizes, input shape and usual batch of a model, from the study and the builder."""
    mine = [o for o in observations if o.config.model == model]
    batch = Counter(o.config.batch_size for o in mine).most_common(1)[0][0] if mine else None
    dataset = (mine[0].record.get("config") or {}).get("dataset") if mine else "fashion_mnist"
    shape, classes = input_spec({"dataset": dataset})
    try:
        sizes = variable_bytes(model, shape, classes)
    except Exception:  # noqa: BLE001 - the builder's own message is not ours to show
        raise UsageError(f"cannot build model {model!r} to count its parameters") from None
    return ModelFacts(sizes, shape, classes, batch)


def whatif_curves(
    models: Sequence[str],
    workers: Sequence[int],
    bandwidths: Sequence[str],
    params: ModelParams,
    calib: Calibration,
    observations: Sequence[Observation],
    batch_size: int | None,
) -> tuple[dict[tuple[str, str], dict[str, list[tuple[int, float]]]], dict[str, int]]:
    """Samples/s per (model, bandwidth) and line label, over worker counts.

    One worker per host, PS on hosts of their own; ps is drawn with one server and with the
    best number of servers (powers of two up to W) under the balanced plan.
    """
    curves: dict[tuple[str, str], dict[str, list[tuple[int, float]]]] = {}
    batches: dict[str, int] = {}
    for model in models:
        facts = _model_facts(model, observations)
        batch = batch_size or facts.batch or DEFAULT_BATCH
        batches[model] = batch
        plans = {
            (k, sharding): ps_plan(model, facts.shape, facts.classes, k, sharding)
            for k in PS_COUNTS
            for sharding in ("round-robin", "balanced")
        }
        for bandwidth in bandwidths:
            base = StepConfig(
                arch="ring", model=model, batch_size=batch, param_bytes=float(sum(facts.sizes)),
                placement=default_placement("ring", 2, 0, "dedicated", None),
                bandwidth_bits=parse_bandwidth(bandwidth), variable_bytes=facts.sizes,
            )  # fmt: skip

            def samples_per_s(config: StepConfig) -> float:
                return predict_step(config, params, calib).samples_per_s

            lines: dict[str, list[tuple[int, float]]] = {
                "ring": [], "p2p": [], "ps (1 PS)": [], "ps (best K)": [],
            }  # fmt: skip
            for w in workers:
                for arch in ALLREDUCE_LIKE:
                    placement = default_placement(arch, w, 0, "dedicated", None)
                    lines[arch].append(
                        (w, samples_per_s(replace(base, arch=arch, placement=placement)))
                    )
                best = 0.0
                for k in (k for k in PS_COUNTS if k <= w):
                    for sharding in ("round-robin", "balanced"):
                        config = replace(
                            base, arch="ps", ps_sharding=sharding, ps_plan=plans[(k, sharding)],
                            placement=default_placement("ps", w, k, "dedicated", None),
                        )  # fmt: skip
                        rate = samples_per_s(config)
                        if k == 1 and sharding == "round-robin":
                            lines["ps (1 PS)"].append((w, rate))
                        best = max(best, rate)
                lines["ps (best K)"].append((w, best))
            curves[(model, bandwidth)] = lines
    return curves, batches
