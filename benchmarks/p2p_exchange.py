"""p2p exchange vs. MPI collectives on the same bytes, in one run.

Exchanges one float32 vector of wide_mlp's parameter count (by default) two ways, alternating
within each repetition so both see the same machine load:

- p2p: archbench's point-to-point exchange (`archbench.p2p.exchange.ShardExchange`): gradient
  shards to their owners, owners average, fresh shards to every peer;
- collective: `MPI_Reduce_scatter` (sum, the same shard counts) + scaling by 1/W +
  `MPI_Allgatherv` of the same shards, through mpi4py.

Each repetition's time is the slowest rank's. Prints medians, spread (p10..p90) and the ratio.

    mpirun -np 2 python benchmarks/p2p_exchange.py [--repeats 20] [--schedule staggered]
    mpirun -np 3 --oversubscribe python benchmarks/p2p_exchange.py --elements 1001 --verify

Target: p2p median <= 1.25 x the collective pair's median.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from archbench.p2p.exchange import SCHEDULES, ShardExchange  # noqa: E402
from archbench.p2p.shards import ShardPlan  # noqa: E402
from archbench.runtime import mpitransport  # noqa: E402

TARGET_RATIO = 1.25


def wide_mlp_elements() -> int:
    """Trainable parameters of archbench's wide_mlp on Fashion-MNIST-shaped inputs (28x28x1, 10)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from archbench.workloads.models import build_model, parameter_stats

    return parameter_stats(build_model("wide_mlp", (28, 28, 1), 10, seed=1))["params"]


def local_gradient(rank: int, elements: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, rank]).standard_normal(elements, dtype=np.float32)


class CollectivePair:
    """Reduce_scatter + Allgatherv over the same shard plan and buffers."""

    def __init__(self, comm, plan: ShardPlan):
        from mpi4py import MPI

        self.mpi = MPI
        self.comm = comm
        self.counts = [plan.length(owner) for owner in range(plan.workers)]
        self.displacements = [plan.bounds(owner)[0] for owner in range(plan.workers)]
        self.own = np.empty(self.counts[comm.Get_rank()], dtype=np.float32)
        self.workers = plan.workers

    def run(self, gradient: np.ndarray, params: np.ndarray) -> None:
        MPI = self.mpi
        self.comm.Reduce_scatter(gradient, self.own, recvcounts=self.counts, op=MPI.SUM)
        np.divide(self.own, np.float32(self.workers), out=self.own)
        self.comm.Allgatherv(self.own, [params, self.counts, self.displacements, MPI.FLOAT])


def p2p_run(exchange: ShardExchange, gradient: np.ndarray, params: np.ndarray) -> None:
    start, stop = exchange.own_range
    params[start:stop] = exchange.reduce_scatter_mean(gradient)
    exchange.allgather(params)


def expected_mean(workers: int, elements: int, seed: int) -> np.ndarray:
    """The average in the p2p exchange's order: summed in rank order, then divided by W."""
    total = local_gradient(0, elements, seed).copy()
    for rank in range(1, workers):
        total += local_gradient(rank, elements, seed)
    return total / np.float32(workers)


def timed(comm, action) -> float:
    """Seconds the slowest rank spent in `action`, started together."""
    from mpi4py import MPI

    comm.Barrier()
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    return comm.allreduce(elapsed, op=MPI.MAX)


def summary(times: list[float]) -> dict:
    values = np.asarray(times)
    return {
        "median_s": float(np.median(values)),
        "p10_s": float(np.quantile(values, 0.1)),
        "p90_s": float(np.quantile(values, 0.9)),
        "min_s": float(values.min()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--elements", type=int, help="float32 elements (default: wide_mlp's params)"
    )
    parser.add_argument("--repeats", type=int, default=20, help="timed repetitions of each method")
    parser.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    parser.add_argument("--schedule", choices=SCHEDULES, default="staggered")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verify", action="store_true", help="check both results and byte counts")
    parser.add_argument("--json", action="store_true", help="also print one JSON line (rank 0)")
    args = parser.parse_args(argv)
    mpitransport.apply()  # Open MPI's transport as archbench's runs start it

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, workers = comm.Get_rank(), comm.Get_size()
    if args.elements is not None and args.elements < 1:
        if rank == 0:
            print("p2p_exchange: error: --elements must be positive", file=sys.stderr)
        return 2
    elements = args.elements if args.elements else (wide_mlp_elements() if rank == 0 else None)
    elements = comm.bcast(elements, root=0)

    plan = ShardPlan(elements, workers)
    exchange = ShardExchange(comm, plan, args.schedule)
    collective = CollectivePair(comm, plan)
    gradient = local_gradient(rank, elements, args.seed)
    p2p_params = np.zeros(elements, dtype=np.float32)
    collective_params = np.zeros(elements, dtype=np.float32)

    def run_p2p() -> None:
        p2p_run(exchange, gradient, p2p_params)

    def run_collective() -> None:
        collective.run(gradient, collective_params)

    problems = []
    if args.verify:
        run_p2p()
        run_collective()
        expected = expected_mean(workers, elements, args.seed)
        if not np.array_equal(p2p_params, expected):
            problems.append("p2p average differs from the rank-order sum / W")
        if not np.allclose(collective_params, expected, rtol=1e-5, atol=1e-6):
            problems.append("collective average differs from the reference")
        if exchange.last_sent != plan.bytes_sent_per_step(rank):
            problems.append(
                f"bytes sent {exchange.last_sent} != plan {plan.bytes_sent_per_step(rank)}"
            )
        if exchange.last_received != plan.bytes_received_per_step(rank):
            problems.append(
                f"bytes received {exchange.last_received} != plan "
                f"{plan.bytes_received_per_step(rank)}"
            )
    problems_by_rank = comm.gather(problems, root=0)

    for _ in range(args.warmup):
        run_p2p()
        run_collective()
    p2p_times, collective_times = [], []
    for repeat in range(args.repeats):
        # alternate which goes first, so neither always runs on a warmer cache
        order = ((p2p_times, run_p2p), (collective_times, run_collective))
        for times, action in order if repeat % 2 == 0 else order[::-1]:
            times.append(timed(comm, action))

    if rank != 0:
        return 0
    failed = [f"rank {r}: {p}" for r, ps in enumerate(problems_by_rank) for p in ps]
    p2p_stats, collective_stats = summary(p2p_times), summary(collective_times)
    ratio = p2p_stats["median_s"] / collective_stats["median_s"]
    megabytes = elements * 4 / 1e6
    print(
        f"exchange of {elements:,} float32 ({megabytes:.1f} MB) over W={workers} ranks, "
        f"{args.repeats} repetitions after {args.warmup} warm-up, time of the slowest rank:"
    )
    for name, stats in (
        (f"p2p point-to-point ({args.schedule})", p2p_stats),
        ("MPI Reduce_scatter + Allgatherv", collective_stats),
    ):
        print(
            f"  {name:34s} median {1e3 * stats['median_s']:9.2f} ms   "
            f"p10 {1e3 * stats['p10_s']:9.2f}   p90 {1e3 * stats['p90_s']:9.2f}"
        )
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"  ratio p2p / collective (medians): {ratio:.3f}  (target <= {TARGET_RATIO}: {verdict})")
    print(
        f"  p2p bytes per rank: sent {exchange.last_sent:,}, received {exchange.last_received:,} "
        f"(plan: {plan.bytes_sent_per_step(0):,} for rank 0)"
    )
    if args.verify:
        print("  verify: " + ("ok" if not failed else "; ".join(failed)))
    if args.json:
        print(
            json.dumps(
                {
                    "benchmark": "p2p_exchange",
                    "elements": elements,
                    "workers": workers,
                    "schedule": args.schedule,
                    "repeats": args.repeats,
                    "p2p": p2p_stats,
                    "collective": collective_stats,
                    "ratio": ratio,
                    "target_ratio": TARGET_RATIO,
                    "bytes_sent_rank0": exchange.last_sent,
                    "bytes_received_rank0": exchange.last_received,
                    "verified": bool(args.verify and not failed),
                    "problems": failed,
                }
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
