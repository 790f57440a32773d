"""Gradient compression: which method an architecture carries, how much it keeps, what it sends.

Methods (`--compression`):
- `none`: the dense exchange of each architecture, unchanged;
- `fp16`: Horovod's fp16 compression (ring only): every gradient cast to float16 on the wire;
- `topk`: each worker keeps the `--compression-ratio` share of its gradient's entries largest
  in magnitude (of the whole flattened gradient, its error-feedback residual added) and sends
  their values and indices (`archbench.compression.topk`);
- `powersgd`: rank-r factors P and Q of each matrix-shaped gradient are allreduced instead of
  the matrix (Vogels et al., 2019; `archbench.compression.powersgd`); ring only.

Error feedback (`--error-feedback on`, the default): what a worker did not send this step is
kept and added to its next step's gradient, so no gradient mass is lost, only delayed.

Warm-up (`--compression-warmup-steps T`, as in Deep Gradient Compression, Lin et al. 2018): the
kept share starts dense and falls exponentially to the ratio over the first T steps:
share(t) = ratio ** (t / T) for t < T, then the ratio (t counted from 0).

This module is free of TensorFlow and MPI: the settings registry, the trainers' records and the
performance model all read the same counts from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from archbench.common.archs import has_servers
from archbench.common.errors import UsageError

METHODS = ("none", "fp16", "topk", "powersgd")
# Methods whose exchange is their own (top-k's selection, PowerSGD's factors, each with error
# feedback), in place of the architecture's dense one; none and fp16 keep the dense exchange.
OWN_EXCHANGE = ("topk", "powersgd")
# What each architecture can carry (settings that do not apply to an architecture, e.g. any
# compression on `single`, are not judged).
CARRIED_BY: dict[str, tuple[str, ...]] = {
    "ring": METHODS,
    "p2p": ("none", "topk"),
    "ps": ("none", "topk"),
}
WHY_NOT: dict[tuple[str, str], str] = {
    ("p2p", "fp16"): "p2p sends float32 shards; fp16 is Horovod's compression",
    ("ps", "fp16"): "the servers take float32 pushes; fp16 is Horovod's compression",
    ("p2p", "powersgd"): "PowerSGD allreduces low-rank factors, and p2p exchanges shards",
    ("ps", "powersgd"): "PowerSGD allreduces low-rank factors, and the servers take shards",
}
VALUE_BYTES = 4  # float32 values
FP16_BYTES = 2  # a value as fp16 casts it for the wire
INDEX_BYTES = 4  # int32 indices (ring allgather, p2p messages)
PS_INDEX_BYTES = 8  # TensorFlow's sparse accumulators take int64 indices


def carry_problem(arch: str, method: str | None, sync: bool = True) -> str | None:
    """Why `arch` cannot carry compression `method` (one line), or None when it can."""
    carried = CARRIED_BY.get(arch)
    if carried is None or method is None or method in carried:
        if has_servers(arch) and method == "topk" and not sync:
            return (
                "--compression topk on --arch ps needs --sync: the asynchronous servers add "
                "each worker's momentum update as it comes, densely"
            )
        return None
    why = WHY_NOT.get((arch, method), "")
    return (
        f"--compression {method} cannot be carried by --arch {arch}"
        + (f" ({why})" if why else "")
        + f"; it carries {', '.join(carried)}"
    )


@dataclass(frozen=True)
class CompressionSpec:
    """The compression of one run, as its settings give it."""

    method: str = "none"
    ratio: float = 0.01
    rank: int = 2
    warmup_steps: int = 0
    error_feedback: bool = True

    @classmethod
    def from_config(cls, config: Any) -> CompressionSpec:
        """The compression a run's settings ask for; UsageError (one line) for an unknown method."""
        method = config.compression or "none"
        if method not in METHODS:
            raise UsageError(f"--compression {method!r} is not one of {', '.join(METHODS)}")
        return cls(
            method=method,
            ratio=float(config.compression_ratio),
            rank=int(config.powersgd_rank),
            warmup_steps=int(config.compression_warmup_steps),
            error_feedback=config.error_feedback != "off",
        )

    @property
    def sparse(self) -> bool:
        """Top-k: a selection of entries travels, values with their indices."""
        return self.method == "topk"

    @property
    def low_rank(self) -> bool:
        """PowerSGD: low-rank factors travel, in two rounds of allreduce (P, then Q)."""
        return self.method == "powersgd"

    @property
    def own_exchange(self) -> bool:
        """Whether the method exchanges gradients its own way (a compressor's), not through the
        architecture's dense exchange (which fp16 only narrows)."""
        return self.method in OWN_EXCHANGE

    @property
    def wire_value_bytes(self) -> int:
        """Bytes a float32 gradient value takes in the dense exchange: fp16 casts it to 2."""
        return FP16_BYTES if self.method == "fp16" else VALUE_BYTES

    def dense_wire_bytes(self, dense_bytes: int) -> int:
        """Bytes `dense_bytes` of float32 gradient take in the dense exchange (halved by fp16)."""
        return dense_bytes * self.wire_value_bytes // VALUE_BYTES

    def horovod_compression(self, hvd: Any) -> Any:
        """Horovod's compressor for its own allreduce: fp16's cast, or none (the methods with an
        exchange of their own run it outside Horovod's compression)."""
        return hvd.Compression.fp16 if self.method == "fp16" else hvd.Compression.none

    def kept_share(self, step: int) -> float:
        """Share of the entries top-k keeps at `step` (from 0): dense at step 0 of a warm-up,
        falling exponentially to the ratio at step T."""
        if self.warmup_steps <= 0 or step >= self.warmup_steps:
            return self.ratio
        return self.ratio ** (step / self.warmup_steps)

    def kept(self, step: int, elements: int) -> int:
        """Entries top-k keeps at `step` out of `elements`: ceil(share x elements), at least 1."""
        if elements <= 0:
            return 0
        return max(1, min(elements, math.ceil(self.kept_share(step) * elements - 1e-9)))

    def kept_schedule(self, elements: int) -> list[int]:
        """k at steps 0..T (the last entry holds for every later step)."""
        return [self.kept(step, elements) for step in range(max(self.warmup_steps, 0) + 1)]

    def kept_total(self, steps: int, elements: int) -> int:
        """Entries kept over the first `steps` steps."""
        schedule = self.kept_schedule(elements)
        warm = sum(schedule[: min(steps, len(schedule) - 1)])
        return warm + max(0, steps - (len(schedule) - 1)) * schedule[-1]

    def as_record(self) -> dict[str, Any]:
        """The method and its parameters (those it uses), as the record's `comm.compression`."""
        record: dict[str, Any] = {"method": self.method}
        if self.method == "topk":
            record.update(ratio=self.ratio, warmup_steps=self.warmup_steps)
        if self.method == "powersgd":
            record["rank"] = self.rank
        if self.method in ("topk", "powersgd"):
            record["error_feedback"] = self.error_feedback
        return record


def matrix_view(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(n, m) a gradient of `shape` is reshaped to for PowerSGD: all axes but the last, then the
    last (a Dense kernel is (inputs, units), a Conv2D kernel (h*w*in, out)); None for vectors
    and scalars, which are sent dense."""
    if len(shape) < 2:
        return None
    return math.prod(shape[:-1]), int(shape[-1])


def powersgd_compresses(shape: tuple[int, ...], rank: int) -> bool:
    """Whether PowerSGD sends a gradient of `shape` as rank-`rank` factors: only matrices whose
    factors are smaller than the matrix, (n + m) r < n m (as PyTorch's PowerSGD hook decides);
    the others go dense."""
    view = matrix_view(shape)
    return view is not None and (view[0] + view[1]) * rank < view[0] * view[1]


def powersgd_payload(shapes: list[tuple[int, ...]], rank: int) -> dict[str, int]:
    """Elements PowerSGD allreduces per step: P factors (n r each), Q factors (m r each) and the
    gradients sent dense."""
    p = q = dense = 0
    for shape in shapes:
        if powersgd_compresses(shape, rank):
            n, m = matrix_view(shape)
            p, q = p + n * rank, q + m * rank
        else:
            dense += math.prod(shape)
    return {"p_elements": p, "q_elements": q, "dense_elements": dense}


def ring_allreduce_bytes(payload_bytes: int, workers: int) -> int:
    """Bytes one worker sends in a ring allreduce of `payload_bytes` (reduce-scatter, then
    allgather): 2(W-1)/W of them; nothing alone."""
    if workers <= 1:
        return 0
    return int(round(2 * (workers - 1) / workers * payload_bytes))


def ring_bytes_per_step(
    spec: CompressionSpec, shapes: list[tuple[int, ...]], workers: int, step: int | None = None
) -> int:
    """Bytes one ring worker sends in a step (`step` matters for top-k's warm-up; None: after
    it). Allreduce (reduce-scatter then allgather): 2(W-1)/W of the payload. Allgather (top-k's
    values and indices): the other W-1 workers' blocks pass through each worker once, so it
    sends (W-1) blocks of k (value + index) entries."""
    if workers <= 1:
        return 0
    elements = sum(math.prod(shape) for shape in shapes)
    if spec.method == "topk":
        k = spec.kept(spec.warmup_steps if step is None else step, elements)
        return (workers - 1) * k * (VALUE_BYTES + INDEX_BYTES)
    if spec.method == "powersgd":
        payload = sum(powersgd_payload(shapes, spec.rank).values()) * VALUE_BYTES
    else:
        payload = spec.dense_wire_bytes(elements * VALUE_BYTES)
    return ring_allreduce_bytes(payload, workers)
