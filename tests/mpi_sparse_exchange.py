"""Run under mpirun by tests/test_p2p_exchange.py: p2p's sparse exchange in both phases.

Every rank draws every rank's selection from the same seeds, so each can compute the expected
average alone: the W selections scattered into dense vectors, summed in rank order, divided by W.
After `reduce_scatter_sparse_mean` and `allgather_sparse_mean` every rank's full vector must be
those bits, and what it sent in each phase must be the sparse message (8 bytes an entry, or
runs) or the dense shard, whichever is fewer bytes. Rank 0 prints every rank's findings as one
JSON line.

    mpirun -np 3 python tests/mpi_sparse_exchange.py ELEMENTS SHARE RUNS
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from archbench.p2p import sparse  # noqa: E402
from archbench.p2p.exchange import ShardExchange  # noqa: E402
from archbench.p2p.shards import ShardPlan  # noqa: E402


def selection(rank: int, elements: int, share: float, runs: bool, step: int):
    """(ascending int32 indices, float32 values) rank `rank` selects at `step`: single entries,
    or with `runs` rows of 4 consecutive entries."""
    rng = np.random.default_rng([step, rank])
    if runs:
        rows = elements // 4
        chosen = np.sort(rng.choice(rows, size=max(1, int(share * rows)), replace=False))
        indices = (chosen[:, None] * 4 + np.arange(4)).reshape(-1)
    else:
        indices = np.sort(rng.choice(elements, size=max(1, int(share * elements)), replace=False))
    values = rng.standard_normal(len(indices)).astype(np.float32)
    return indices.astype(np.int32), values


def message_words(local_indices: np.ndarray, runs: bool) -> int:
    """int32 words of the sparse message of these entries: values and indices, or with `runs`
    the run count, values, run starts and lengths."""
    if runs:
        return 1 + len(local_indices) + 2 * len(sparse.runs_of(local_indices)[0])
    return 2 * len(local_indices)


def main() -> int:
    from mpi4py import MPI

    elements, share, runs = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "runs"
    comm = MPI.COMM_WORLD
    rank, workers = comm.Get_rank(), comm.Get_size()
    plan = ShardPlan(elements, workers)
    exchange = ShardExchange(comm, plan)
    gradient = np.empty(elements, dtype=np.float32)
    problems, dense_returns = [], 0
    for step in range(3):
        chosen = [selection(r, elements, share, runs, step) for r in range(workers)]
        expected = np.zeros(elements, dtype=np.float32)
        for indices, values in chosen:  # rank order, as the owners sum
            expected[indices] += values
        expected /= np.float32(workers)
        before = exchange.bytes_sent
        exchange.reduce_scatter_sparse_mean(*chosen[rank], runs=runs)
        gradient_sent = exchange.bytes_sent - before
        expected_gradient = 0  # per other owner: its entries of the selection, or its shard dense
        for owner in range(workers):
            low, high = plan.bounds(owner)
            if owner != rank:
                mine = chosen[rank][0]
                expected_gradient += 4 * min(
                    message_words(mine[(mine >= low) & (mine < high)] - low, runs), high - low
                )
        if gradient_sent != expected_gradient:
            problems.append(f"step {step}: rank {rank} sent {gradient_sent} B, {expected_gradient}")
        exchange.allgather_sparse_mean(gradient, runs=runs)
        returned = exchange.bytes_sent - before - gradient_sent
        if gradient.tobytes() != expected.tobytes():
            problems.append(f"step {step}: rank {rank}'s average differs from the expected bits")
        start, stop = plan.bounds(rank)
        own = np.unique(np.concatenate([i[(i >= start) & (i < stop)] - start for i, _ in chosen]))
        words = message_words(own, runs)
        dense = words >= stop - start
        dense_returns += dense
        expected_bytes = (workers - 1) * 4 * (stop - start if dense else words)
        if returned != expected_bytes:
            problems.append(f"step {step}: rank {rank} sent {returned} B back, {expected_bytes}")
    ranks = comm.gather({"rank": rank, "problems": problems, "dense_returns": dense_returns})
    if rank == 0:  # one line: the ranks' prints would interleave
        print(json.dumps(ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
