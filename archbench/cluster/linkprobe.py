"""Measure the link between MPI ranks 0 and 1: both send and receive the same buffer at once
(Isend + Irecv), so each direction of the link carries `--megabytes` per exchange.

(Not `Sendrecv`: Open MPI 4.1 over TCP serialises its two halves and shows half the rate.)

    mpirun -np 2 --host node1,node2 python -m archbench.cluster.linkprobe --megabytes 8

Rank 0 prints one JSON line: the two hosts, the median exchange time and the throughput of
one direction in Mbit/s (payload only; headers make the wire rate a little higher). On a
time-dilated node the ranks arm their thread caps first, as a training rank does before its
timed steps, and times are virtual (real / D, `dilation` says D): the link runs at B / D in real
time, B in virtual time.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time

from archbench.cluster import threadcaps
from archbench.runtime import mpitransport
from archbench.runtime.virtualtime import factor


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m archbench.cluster.linkprobe")
    parser.add_argument("--megabytes", type=float, default=8.0, help="payload per direction")
    parser.add_argument("--repeats", type=int, default=3, help="timed exchanges after a warm-up")
    args = parser.parse_args(argv)
    if args.megabytes <= 0 or args.repeats < 1:
        parser.error("--megabytes must be > 0 and --repeats >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    mpitransport.apply()  # the transport the runs use, before MPI starts
    # deferred: importing mpi4py.MPI initialises MPI, after the arguments are read
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print("linkprobe needs exactly 2 ranks", file=sys.stderr)
        return 2
    peer = 1 - comm.Get_rank()
    nbytes = int(args.megabytes * 1e6)
    outgoing = np.ones(nbytes, dtype=np.uint8)
    incoming = np.empty(nbytes, dtype=np.uint8)
    threadcaps.arm()  # a no-op off a dilated node
    dilation = factor()
    seconds = []
    for attempt in range(args.repeats + 1):
        comm.Barrier()
        start = time.perf_counter()
        requests = [comm.Isend(outgoing, dest=peer), comm.Irecv(incoming, source=peer)]
        MPI.Request.Waitall(requests)
        elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
        if attempt > 0:  # the first exchange sets up connections
            seconds.append(elapsed / dilation)
    hosts = comm.gather(socket.gethostname(), root=0)
    if comm.Get_rank() == 0:
        median = statistics.median(seconds)
        print(
            json.dumps(
                {
                    "hosts": hosts,
                    "megabytes": args.megabytes,
                    "seconds_median": median,
                    "seconds": seconds,
                    "mbit_per_s": nbytes * 8 / median / 1e6,
                    "dilation": dilation,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
