"""Clock alignment across hosts: every rank's wall clock against rank 0's, with a bound.

Each rank's events carry its own host's wall clock (CLOCK_REALTIME: what `time.time_ns()`,
TensorFlow's profiler and step statistics, and Horovod's timeline read). Hosts' clocks differ by
an offset d_j = clock_j - clock_0, measured over the job's own connections in rounds, each of
which bounds it:

- over MPI (every job started by mpirun, or horovodrun with MPI): ping-pongs between rank 0 and
  each rank j in turn. Rank 0 reads its clock (b), sends, rank j reads its clock (t) when the
  message arrives and answers, rank 0 reads its clock again (a): j's reading happened between
  0's two, so d_j lies in (t - a, t - b), whatever the network does;
- otherwise (Horovod over Gloo, ps over gRPC) rounds of the trainer's `allgather_object`: every
  rank reads its clock (b), enters the allgather, and reads it again when it leaves (a). No
  rank leaves before every rank entered, so d_j lies in (b_j - a_0, a_j - b_0); such a round
  waits for the slowest rank, so its interval is wider.

The rounds' intervals are intersected (in batches, until every rank's is within 50 µs or the
batches run out) and the offset taken as the middle of what remains, off by at most half its
width (the `bound`). On one machine (localhost, the emulated cluster's namespaces share one
kernel clock) the offsets are about 0; across real hosts the bound is about half the quickest
round trip. Clocks are assumed not to drift over the run's length (NTP keeps drift to
microseconds per second).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

ROUNDS = 10  # per batch
BATCHES = 10  # at most; fewer once every rank's bound is within TARGET_BOUND_NS
TARGET_BOUND_NS = 50_000
PING_TAG = 7301  # the ping-pongs' MPI tag (no other message of a run uses it)

# One round for rank j: ((b_j, a_j), (b_0, a_0)), clock readings of j and of rank 0 bounding it
Round = tuple[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class Offset:
    offset_ns: float  # this rank's clock minus rank 0's
    bound_ns: float  # the offset is within this of the truth

    def to_reference(self, t_ns: float) -> float:
        """A time on this rank's clock as rank 0's clock reads it."""
        return t_ns - self.offset_ns


def offsets(rounds: list[list[Round]]) -> list[Offset]:
    """Each rank's offset against rank 0 from its rounds (rank order; rank 0's list unused)."""
    result = [Offset(0.0, 0.0)]
    for mine in rounds[1:]:
        low, high = -math.inf, math.inf
        tightest = (math.inf, 0.0)  # (width, middle) of the narrowest single round
        for (b_j, a_j), (b_0, a_0) in mine:
            round_low, round_high = b_j - a_0, a_j - b_0
            low, high = max(low, round_low), min(high, round_high)
            if round_high - round_low < tightest[0]:
                tightest = (round_high - round_low, (round_low + round_high) / 2)
        if low <= high:
            result.append(Offset((low + high) / 2, (high - low) / 2))
        else:  # the rounds disagree (a clock stepped during them): the narrowest round alone
            result.append(Offset(tightest[1], tightest[0] / 2))
    return result


def _tight(rounds: list[list[Round]]) -> bool:
    return max(offset.bound_ns for offset in offsets(rounds)) <= TARGET_BOUND_NS


def allgather_rounds(allgather: Callable[[object], list]) -> list[list[Round]]:
    """Rounds of `allgather` (a collective call on every rank: each decides from the same
    gathered readings whether to go on, so all stop after the same batch)."""
    gathered: list[list[tuple[int, int]]] = []
    for _ in range(BATCHES):
        readings = []
        for _ in range(ROUNDS):
            before = time.time_ns()
            allgather(None)
            readings.append((before, time.time_ns()))
        batch = allgather(readings)
        if gathered:
            batch = [old + new for old, new in zip(gathered, batch, strict=True)]
        gathered = batch
        rounds = [list(zip(mine, gathered[0], strict=True)) for mine in gathered]
        if _tight(rounds):
            break
    return rounds


def ping_pong_rounds(comm) -> list[list[Round]]:
    """Ping-pongs between rank 0 and every other rank over MPI (collective on `comm`)."""
    import numpy as np

    rank, size = comm.Get_rank(), comm.Get_size()
    stamp = np.zeros(1, dtype=np.int64)
    rounds: list[list[Round]] = [[] for _ in range(size)]
    for peer in range(1, size):
        for _ in range(BATCHES):
            for _ in range(ROUNDS):
                if rank == 0:
                    before = time.time_ns()
                    comm.Send(stamp, dest=peer, tag=PING_TAG)
                    comm.Recv(stamp, source=peer, tag=PING_TAG)
                    after = time.time_ns()
                    seen = int(stamp[0])
                    rounds[peer].append(((seen, seen), (before, after)))
                elif rank == peer:
                    comm.Recv(stamp, source=0, tag=PING_TAG)
                    stamp[0] = time.time_ns()
                    comm.Send(stamp, dest=0, tag=PING_TAG)
            done = comm.bcast(rank != 0 or _tight([[], rounds[peer]]), root=0)
            if done:
                break
    return comm.bcast(rounds, root=0)
