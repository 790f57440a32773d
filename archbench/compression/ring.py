"""The ring's compressed exchange over Horovod: top-k as an allgather, PowerSGD as allreduces."""

from __future__ import annotations

from archbench.compression import CompressionSpec
from archbench.compression.powersgd import PowerSGD


def ring_compressor(tf, hvd, spec: CompressionSpec, variables, workers: int, seed: int):
    """The top-k or PowerSGD exchange of `variables`' gradients over Horovod, or None where
    Horovod's own allreduce carries the method (none, fp16)."""
    if spec.method == "topk":
        # deferred: top-k's exchange loads numpy
        from archbench.compression.topk import TopKAllgather

        return TopKAllgather(tf, variables, spec, hvd.allgather, workers)
    if spec.method == "powersgd":

        def average(tensors):
            return [hvd.allreduce(t, op=hvd.Average) for t in tensors]

        return PowerSGD(tf, variables, spec, average, seed)
    return None
