"""archbench: the same models on the same data under parameter-server, peer-to-peer and ring-allreduce training."""

__version__ = "0.1.0"
