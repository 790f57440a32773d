"""What the run record's `comm` says about a compressed exchange: the bytes per step of each
architecture's compressed exchange, and `comm.compression` (the method, its parameters and the
achieved ratio, dense bytes / sent bytes). Called by the trainers after training."""

from __future__ import annotations

import math
from typing import Any

from archbench.compression import (
    INDEX_BYTES,
    PS_INDEX_BYTES,
    VALUE_BYTES,
    CompressionSpec,
    powersgd_payload,
    ring_bytes_per_step,
)


def _ratio(dense: int, sent: int) -> float | None:
    return dense / sent if sent else None


def ring_stats(
    spec: CompressionSpec, shapes: list[tuple[int, ...]], workers: int, steps: int, compressor
) -> dict[str, Any]:
    """The ring's `comm` for top-k or PowerSGD (analytic, from what each step sends: k follows
    the warm-up step by step)."""
    elements = sum(math.prod(shape) for shape in shapes)
    steady = ring_bytes_per_step(spec, shapes, workers)
    if spec.method == "topk":
        entry = VALUE_BYTES + INDEX_BYTES
        total = (workers - 1) * entry * spec.kept_total(steps, elements) if workers > 1 else 0
        method = "analytic: allgather of each worker's top-k values and int32 indices, (W-1) x 8k"
    else:
        total = steady * steps
        method = "analytic: ring allreduce of PowerSGD's P and Q factors and of the gradients sent dense, 2(W-1)/W x their bytes"
    per_step = total // steps if steps else 0
    dense = ring_bytes_per_step(CompressionSpec("none"), shapes, workers)
    record = {
        **spec.as_record(),
        "dense_bytes_per_step": dense,
        "bytes_sent_per_step_after_warmup": steady,
        "achieved_ratio": _ratio(dense, per_step),
        "achieved_ratio_after_warmup": _ratio(dense, steady),
        "densified_gradients": sorted(set(compressor.densified)),
    }
    if spec.method == "topk":
        record.update(
            elements=elements,
            kept_per_step=spec.kept(spec.warmup_steps, elements),
            kept_total=spec.kept_total(steps, elements),
            exchange="hvd.allgather of the values (float32) and of the indices (int32)",
        )
    else:
        record.update(
            factors=powersgd_payload(shapes, spec.rank),
            compressed_matrices=compressor.compressed,
            exchange="hvd.allreduce (average) of P with the dense gradients, then of Q",
        )
    return {
        "bytes_sent_per_step": per_step,
        "bytes_received_per_step": per_step,
        "bytes_total": total,
        "bytes_method": method,
        "compression": record,
    }


def p2p_compression(
    spec: CompressionSpec, plan, rank: int, exchange, steps: int, facts: list[dict]
) -> dict[str, Any]:
    """p2p's `comm.compression` for top-k: this worker's measured bytes against the dense
    exchange's for the same shard plan, each phase alone, and per rank the gradient bytes sent
    and the selected entries that stayed in the rank's own shard (over the run)."""
    done = max(1, steps)
    sent = exchange.bytes_sent // done
    dense = plan.bytes_sent_per_step(rank)
    dense_gradient = plan.total_bytes - plan.shard_bytes(rank)
    gradient = exchange.gradient_bytes_sent // done
    returned = (exchange.bytes_sent - exchange.gradient_bytes_sent) // done
    dense_returned = plan.bytes_sent_per_step(rank) - dense_gradient
    return {
        **spec.as_record(),
        "elements": plan.elements,
        "kept_per_step": spec.kept(spec.warmup_steps, plan.elements),
        "kept_total": spec.kept_total(steps, plan.elements),
        "dense_bytes_per_step": dense,
        "achieved_ratio": _ratio(dense, sent),
        "gradient_bytes_sent_per_step": gradient,
        "dense_gradient_bytes_per_step": dense_gradient,
        "gradient_ratio": _ratio(dense_gradient, gradient),
        "return_bytes_sent_per_step": returned,
        "dense_return_bytes_per_step": dense_returned,
        "return_ratio": _ratio(dense_returned, returned),
        # each kept entry went to its owner (8 bytes, unless the message went dense) or stayed
        # in the rank's own shard
        "gradient_bytes_sent_total_per_rank": [fact["gradient_sent"] for fact in facts],
        "own_shard_entries_total_per_rank": [fact["own_entries"] for fact in facts],
        "exchange": "point-to-point: each owner's entries of the selection, values and "
        "indices in one message (dense where that is no more bytes); each owner averages them "
        "and sends every peer the average at the entries any worker selected (values and "
        "indices, or dense where that is no more bytes)",
    }


def ps_stats(spec: CompressionSpec, elements: int, pulled: int, steps: int) -> dict[str, Any]:
    """The ps's `comm` for top-k (analytic): every kept entry is pushed to exactly one shard,
    a float32 value and an int64 index; the pull stays dense."""
    entry = VALUE_BYTES + PS_INDEX_BYTES
    total = spec.kept_total(steps, elements) * entry
    pushed = total // steps if steps else 0
    steady = spec.kept(spec.warmup_steps, elements) * entry
    dense = elements * VALUE_BYTES
    return {
        "bytes_sent_per_step": pushed,
        "bytes_received_per_step": pulled,
        "bytes_total": total,
        "bytes_method": "analytic: each worker pushes its top-k entries (float32 value and "
        "int64 index each) to the shards holding them and pulls every shard dense",
        "compression": {
            **spec.as_record(),
            "elements": elements,
            "kept_per_step": spec.kept(spec.warmup_steps, elements),
            "kept_total": spec.kept_total(steps, elements),
            "dense_bytes_per_step": dense,
            "bytes_sent_per_step_after_warmup": steady,
            "achieved_ratio": _ratio(dense, pushed),
            "achieved_ratio_after_warmup": _ratio(dense, steady),
            "exchange": "a summing SparseConditionalAccumulator per shard (the chief divides "
            "by W); pulls dense",
        },
    }
