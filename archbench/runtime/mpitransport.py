"""Open MPI's TCP transport as archbench's processes start it: both directions of a link at once.

Open MPI (4.1) sends a point-to-point message above its TCP transport's eager limit (64 KiB)
with an emulated RDMA `put` protocol by default, and with it the two directions of an exchange
between two hosts take turns: `MPI_Sendrecv` of 256 KiB to 4 MiB each way takes 1.8-2.0x one
way, at 1 Gbit/s as at 100 Mbit/s (`benchmarks/mpi_duplex.py`). Without `put` it takes 1.00-1.02x
and one way is unchanged. A network link carries both directions at once, and archbench's p2p
exchange sends its pieces both ways at once (wide_mlp's exchange at 1 Gbit/s: 3.36 s with `put`,
1.69 s without, where MPI's own Reduce_scatter + Allgatherv of the same bytes, whose pieces stay
under the eager limit, took 1.79 s either way). So every archbench process that starts MPI sets
the transport's flags to Open MPI's default less `put` (and `hetero-rdma`, which only qualifies
it), unless the launch set them (`mpirun --mca btl_tcp_flags ...`, or `OMPI_MCA_btl_tcp_flags`
in the environment: how to measure Open MPI's default). The record keeps the value in effect
and who set it (`env.mpi_transport`).

Open MPI reads the variable when MPI starts in the process (mpi4py's or Horovod's init), so
`apply()` must run before that.
"""

from __future__ import annotations

import os

TCP_FLAGS_ENV = "OMPI_MCA_btl_tcp_flags"
FULL_DUPLEX_TCP_FLAGS = "send,inplace,need-ack,need-csum"
SET_BY_ARCHBENCH, SET_BY_LAUNCH = "archbench", "launch"

_set_by: str | None = None


def apply() -> None:
    """The TCP transport's flags for this process's MPI, unless the launch chose them."""
    global _set_by
    if _set_by is not None:
        return
    _set_by = SET_BY_LAUNCH if TCP_FLAGS_ENV in os.environ else SET_BY_ARCHBENCH
    os.environ.setdefault(TCP_FLAGS_ENV, FULL_DUPLEX_TCP_FLAGS)


def settings() -> dict[str, str | None]:
    """The record's `env.mpi_transport`: the flags in effect and who set them; in a process that
    starts no MPI itself (a sweep's or a microbenchmark's driver), those its ranks apply."""
    if _set_by is not None:
        return {"btl_tcp_flags": os.environ.get(TCP_FLAGS_ENV), "set_by": _set_by}
    launched = os.environ.get(TCP_FLAGS_ENV)
    if launched is not None:
        return {"btl_tcp_flags": launched, "set_by": SET_BY_LAUNCH}
    return {"btl_tcp_flags": FULL_DUPLEX_TCP_FLAGS, "set_by": SET_BY_ARCHBENCH}
