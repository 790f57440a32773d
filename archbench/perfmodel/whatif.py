"""Predicted throughput of ring / p2p / ps on clusters larger than the one at hand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from archbench.errors import UsageError
from archbench.perfmodel.calibration import Calibration
from archbench.perfmodel.modelinfo import input_spec, variable_bytes
from archbench.perfmodel.predictor import ModelParams, StepConfig, default_placement, predict_step
from archbench.perfmodel.records import Observation
from archbench.perfmodel.units import parse_bandwidth

DEFAULT_BATCH = 64


def _model_facts(
    model: str, observations: Sequence[Observation]
) -> tuple[tuple[float, ...] | None, float, int | None]:
    """(variable sizes, gradient bytes, most common batch) of a model, from the study or built."""
    mine = [o for o in observations if o.config.model == model]
    batch = Counter(o.config.batch_size for o in mine).most_common(1)[0][0] if mine else None
    if mine and mine[0].config.variable_bytes:
        sizes = mine[0].config.variable_bytes
        return sizes, float(sum(sizes)), batch
    dataset = (mine[0].record.get("config") or {}).get("dataset") if mine else "fashion_mnist"
    shape, classes = input_spec({"dataset": dataset})
    try:
        sizes = variable_bytes(model, shape, classes)
    except Exception:  # noqa: BLE001 - fall back to the recorded byte count
        if mine:
            return None, mine[0].config.param_bytes, batch
        raise UsageError(f"cannot build model {model!r} to count its parameters") from None
    return sizes, float(sum(sizes)), batch


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
        sizes, param_bytes, study_batch = _model_facts(model, observations)
        batch = batch_size or study_batch or DEFAULT_BATCH
        batches[model] = batch
        for bandwidth in bandwidths:
            bits = parse_bandwidth(bandwidth)
            lines: dict[str, list[tuple[int, float]]] = {
                "ring": [],
                "p2p": [],
                "ps (1 PS)": [],
                "ps (best K)": [],
            }

            base = StepConfig(
                arch="ring", model=model, batch_size=batch, param_bytes=param_bytes,
                placement=default_placement("ring", 2, 0, "dedicated", None),
                bandwidth_bits=bits, variable_bytes=sizes,
            )  # fmt: skip

            def predict(
                arch: str,
                w: int,
                k: int = 0,
                sharding: str = "round-robin",
                base: StepConfig = base,
            ) -> float:
                config = replace(
                    base,
                    arch=arch,
                    ps_sharding=sharding,
                    placement=default_placement(arch, w, k, "dedicated", None),
                )
                return predict_step(config, params, calib).samples_per_s

            for w in workers:
                lines["ring"].append((w, predict("ring", w)))
                lines["p2p"].append((w, predict("p2p", w)))
                lines["ps (1 PS)"].append((w, predict("ps", w, 1)))
                counts = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= w]
                lines["ps (best K)"].append(
                    (w, max(predict("ps", w, k, "balanced") for k in counts))
                )
            curves[(model, bandwidth)] = lines
    return curves, batches
