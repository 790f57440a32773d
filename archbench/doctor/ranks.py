"""The ranks of doctor's mpirun job, one per host: each listens on a port picked as a parameter
server picks its own (archbench.ps.cluster_spec), and connects to every other rank's, so a
firewall between hosts shows here rather than as a parameter-server run that hangs.

    mpirun -np N -H h1:1,h2:1,... python -m archbench.doctor.ranks

Rank 0 prints one JSON line after MARKER: each rank's host and address, and each connection
that failed (from host, to host, address, why).
"""

from __future__ import annotations

import json
import socket
import sys

from archbench.common.errors import RunFailed
from archbench.ps.cluster_spec import pick_free_port, reachable_address
from archbench.runtime import mpitransport

MARKER = "archbench-doctor-ranks:"
CONNECT_TIMEOUT_S = 3.0


def _listen() -> tuple[socket.socket | None, int | None, str | None]:
    try:
        port = pick_free_port()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("", port))  # a server listens on every address, as TensorFlow's does
        listener.listen(64)
    except (RunFailed, OSError) as exc:
        return None, None, str(exc)
    return listener, port, None


def main() -> int:
    mpitransport.apply()  # the transport the runs use, before MPI starts
    # deferred: importing mpi4py.MPI initialises MPI
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    listener, port, error = _listen()
    me = socket.gethostname()
    entries = comm.allgather((me, reachable_address(), port, error))
    failures = []
    for rank, (host, address, their_port, _) in enumerate(entries):
        if rank == comm.Get_rank() or their_port is None:
            continue
        try:
            socket.create_connection((address, their_port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            failures.append((me, host, f"{address}:{their_port}", exc.strerror or str(exc)))
    comm.Barrier()  # every listener stays open until every rank has tried it
    if listener is not None:
        listener.close()
    gathered = comm.gather(failures, root=0)
    if comm.Get_rank() == 0:
        report = {
            "ranks": [{"host": h, "address": a, "port": p, "error": e} for h, a, p, e in entries],
            "unreachable": [failure for part in gathered for failure in part],
        }
        print(MARKER + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
