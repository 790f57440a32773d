"""Does MPI point-to-point use both directions of a link at once? One-way `Send` against
`Sendrecv` (both ranks send and receive the same bytes at once) between two ranks, by message
size, alternating within each repetition so both see the same load.

A full-duplex link carries both directions of a `Sendrecv` in about the one-way time (ratio near
1); a ratio near 2 means the two directions took turns. Run it on two hosts (two nodes of an
emulated cluster), once as is and once with the transport settings to compare, e.g. Open MPI's
TCP transport without its emulated RDMA `put` protocol:

    mpirun -np 2 --host node1,node2 python benchmarks/mpi_duplex.py
    mpirun -np 2 --host node1,node2 --mca btl_tcp_flags send,inplace,need-ack,need-csum \\
        python benchmarks/mpi_duplex.py

Prints, per size, the medians (real seconds: on a dilated cluster, D times the virtual ones;
the ratio is the same in both) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

DEFAULT_SIZES = (65_536, 262_144, 450_000, 4_194_304)


def timed(comm, mode: str, send: np.ndarray, receive: np.ndarray) -> float:
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    comm.Barrier()
    started = time.perf_counter()
    if mode == "sendrecv":
        comm.Sendrecv(send, peer, recvbuf=receive, source=peer)
    elif rank == 0:
        comm.Send(send, 1)
    else:
        comm.Recv(receive, 0)
    comm.Barrier()  # the slower side's end
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mpi_duplex.py", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    if min(args.sizes) < 1 or args.repeats < 1:
        print("mpi_duplex.py: error: --sizes and --repeats must be positive", file=sys.stderr)
        return 2
    from mpi4py import MPI  # deferred: `--help` needs no MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print("mpi_duplex.py: error: run it with exactly 2 ranks", file=sys.stderr)
        return 2
    if comm.Get_rank() == 0:
        print(f"{'bytes':>10} {'one way ms':>11} {'sendrecv ms':>12} {'ratio':>6}")
    for size in args.sizes:
        send, receive = np.ones(size, np.uint8), np.empty(size, np.uint8)
        times: dict[str, list[float]] = {"oneway": [], "sendrecv": []}
        timed(comm, "sendrecv", send, receive)  # connections and buffers set up, not timed
        for _ in range(args.repeats):
            for mode in times:
                times[mode].append(timed(comm, mode, send, receive))
        if comm.Get_rank() == 0:
            one, both = (statistics.median(times[mode]) for mode in ("oneway", "sendrecv"))
            print(f"{size:>10} {one * 1e3:>11.1f} {both * 1e3:>12.1f} {both / one:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
