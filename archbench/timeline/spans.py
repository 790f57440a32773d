"""A span: one stretch of time on one rank's track, as the trace and its analysis see it.

Categories (the trace events' `cat`), which the breakdown and the overlap figure read:

- `forward`, `backward`: compute ops of the forward and backward pass (per op, with its layer);
- `update`: the optimizer and the writing of parameters (worker or server side), and a
  server's aggregation of the workers' gradients;
- `comm`: bytes moving (an allreduce, a send or receive, a push or pull), with the bytes and the
  peer, server or collective;
- `wait`: a rank blocked on others (Horovod's negotiation, an MPI wait, a server waiting for W
  gradients or a worker for its token, a receive whose sender had not sent yet);
- `host`: the process between the engine's events (Python handing the step to the engine, the
  results coming back);
- `compute`: the step's thread inside its call into the engine that computes the gradients
  (p2p's tf.function: forward and backward, nothing else), from the call to its return with
  the results in hand, timed by that thread itself. It contains
  the engine's own spans of that work (its ops, which its executor threads record) and claims
  only the time none of them covers: the call's own time between the engine's events (an
  executor stopped by a CPU budget, the results waiting for the thread to run again); and
  (ps) an op of the worker's step from when its executor scheduled it to its start, the
  op ready and waiting for a thread (`stepstats.queued`), which also claims only what no other
  span covers;
- `stopped`: the rank's process stopped by its node's CPU budget (an emulated node's quota for
  the CFS period spent), as the kernel counted it (`archbench.cluster.throttle.StopSampler`):
  no engine runs then, so no other span can hold that time;
- `step`: one traced step as the training loop timed it (the frame the others fall in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORWARD, BACKWARD, UPDATE, COMM, WAIT, HOST, COMPUTE, STOPPED, STEP = (
    "forward",
    "backward",
    "update",
    "comm",
    "wait",
    "host",
    "compute",
    "stopped",
    "step",
)
CATEGORIES = (FORWARD, BACKWARD, UPDATE, COMM, WAIT, HOST, COMPUTE, STOPPED, STEP)
# "the rank was computing": its ops. Not `compute`: a call's own time between its ops is the
# thread waiting in the call, which says nothing of what overlapped.
COMPUTING = (FORWARD, BACKWARD, UPDATE)


@dataclass
class Span:
    rank: int  # whose track it is drawn on
    thread: str  # the row within the rank's track (a compute thread, "mpi", "horovod", ...)
    cat: str
    name: str
    start_ns: int  # on the clock of `clock_rank` (a host's wall clock, CLOCK_REALTIME)
    end_ns: int
    args: dict[str, Any] = field(default_factory=dict)
    clock_rank: int | None = None  # None: the rank's own clock

    @property
    def clock(self) -> int:
        return self.rank if self.clock_rank is None else self.clock_rank

    def as_tuple(self) -> tuple:
        """A compact, picklable form for gathering spans over the ranks."""
        return (
            self.rank, self.thread, self.cat, self.name, self.start_ns, self.end_ns,
            self.args, self.clock_rank,
        )  # fmt: skip

    @classmethod
    def from_tuple(cls, values: tuple) -> Span:
        return cls(*values)
