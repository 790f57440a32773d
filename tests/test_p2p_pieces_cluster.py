"""p2p's exchange in pieces between two emulated nodes (Open MPI over TCP, as archbench starts
it): every piece of the averaged gradient lands in its own place on every rank, step after step.
Many pieces of several hundred KB are in flight between two ranks at once and complete in an
order of their own; a receive that took another piece's message failed the run with
MPI_ERR_TRUNCATE here (or, with pieces of one size, would have put it in the wrong place)."""

from __future__ import annotations

import sys
from pathlib import Path

from cluster_fixture import EmulatedCluster, emulated_cluster, run_launcher

__all__ = ["emulated_cluster"]  # the session fixture, until tests/conftest.py imports it

EXCHANGE = r"""
from archbench.runtime import mpitransport
mpitransport.apply()  # the transport archbench's ranks run with
import numpy as np
from mpi4py import MPI
from archbench.p2p.pieces import PieceExchange
from archbench.p2p.shards import ShardPlan
from archbench.runtime.tensor_partition import PartitionSpec
comm = MPI.COMM_WORLD
rank, workers = comm.Get_rank(), comm.Get_size()
elements = 2_000_000  # 1 M elements a shard: 7 pieces of 0.5 MB and a shorter one
exchange = PieceExchange(comm, ShardPlan(elements, workers), "staggered",
                         PartitionSpec(max_bytes=2**19), first_layer_elements=1000)
params = np.zeros(elements, dtype=np.float32)
def apply(low, high, averaged):
    params[exchange.start + low : exchange.start + high] = averaged
for step in range(6):
    gradient = (np.arange(elements, dtype=np.float32) % 1000) * (rank + 1) + step
    exchange.reduce_apply_gather(gradient, params, apply)
    expected = (np.arange(elements, dtype=np.float32) % 1000) * 1.5 + step  # the mean of 2
    wrong = int(np.count_nonzero(params != expected))
    assert wrong == 0, f"step {step}: {wrong} elements out of place on rank {rank}"
print(f"rank {rank}: {len(exchange.pieces[rank])} pieces a shard, every step in place")
"""


def test_pieces_in_flight_at_once_each_land_in_their_place(
    emulated_cluster: EmulatedCluster, tmp_path: Path
) -> None:
    script = tmp_path / "exchange.py"
    script.write_text(EXCHANGE)
    result = run_launcher(
        ["mpirun", "-np", "2", "--host", ",".join(emulated_cluster.nodes[:2]),
         sys.executable, str(script)],
        timeout_s=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert result.stdout.count("every step in place") == 2, result.stdout
    assert "8 pieces a shard" in result.stdout
