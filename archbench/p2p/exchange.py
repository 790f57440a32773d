"""The peer-to-peer exchange on numpy buffers: MPI point-to-point messages only, no collective.

Two phases per step, both on one flat float32 vector split by a `ShardPlan`:

1. `reduce_scatter_mean(gradient)`: every worker sends each gradient shard to the shard's owner;
   the owner averages the W contributions to its own shard (summed in rank order, so the result
   does not depend on which message arrived first). With top-k compression,
   `reduce_scatter_sparse_mean(indices, values)` sends each owner only the selected entries of
   its shard, values and indices (`archbench.p2p.sparse`), and the owner averages them dense.
2. `allgather(params)`: every owner sends its fresh parameter shard to every peer; each worker
   receives the other shards straight into their place in its full parameter vector. After a
   sparse first phase, `allgather_sparse_mean(gradient)` sends instead the owner's averaged
   shard as the entries any worker selected (values and indices: with momentum every entry of
   the updated parameters changes, so they could only travel dense), or dense when that is
   fewer bytes; each worker assembles the full averaged gradient and updates its whole replica.

On a traced step (--timeline) the exchange's recorder times every send, every receive (from its
posting to its completion, which it then waits for one by one with `Waitany` instead of
`Waitall`: the same messages, completed in arrival order) and the wait for them; elsewhere the
recorder is inactive and costs nothing but a check.

Receives are posted before any send, so no schedule can deadlock. Sends go out in rounds: in round
i a worker sends to one peer and waits for that send to complete (its buffer handed over to MPI
or delivered) before the next round, so the schedule decides who talks to whom at a time:
- "naive": peers in rank order, so in round 1 every worker sends to rank 0 (incast on rank 0);
- "staggered": peer (r + i) mod W in round i, a permutation in every round (no incast).

All buffers are allocated once; a step does no per-element Python work. Bytes are counted from
the messages themselves: send sizes as posted, receive sizes from the MPI statuses.
"""

from __future__ import annotations

import time

import numpy as np

from archbench.p2p import sparse
from archbench.p2p.shards import ShardPlan
from archbench.runtime.settings import P2P_SCHEDULES
from archbench.timeline.recorder import NULL_RECORDER
from archbench.timeline.spans import COMM, UPDATE, WAIT

SCHEDULES = P2P_SCHEDULES  # the settings' choices: one list
GRADIENT_TAG = 41
PARAMETER_TAG = 42
KIND = {GRADIENT_TAG: "gradient", PARAMETER_TAG: "parameters"}  # what a message carries


def send_order(rank: int, workers: int, schedule: str) -> list[int]:
    """The peers `rank` sends to, one per round."""
    if schedule == "naive":
        return [peer for peer in range(workers) if peer != rank]
    if schedule == "staggered":
        return [(rank + step) % workers for step in range(1, workers)]
    raise ValueError(f"unknown p2p schedule {schedule!r} (choose from {', '.join(SCHEDULES)})")


class ShardExchange:
    """One worker's side of the exchange, with its buffers and byte counters."""

    recorder = NULL_RECORDER  # --timeline: a traced step's sends, receives and waits

    def __init__(self, comm, plan: ShardPlan, schedule: str = "staggered"):
        # deferred: importing mpi4py.MPI initialises MPI
        from mpi4py import MPI

        self.mpi = MPI
        self.comm = comm
        self.plan = plan
        self.rank = comm.Get_rank()
        self.workers = comm.Get_size()
        if plan.workers != self.workers:
            raise ValueError(
                f"shard plan for {plan.workers} workers, communicator has {self.workers}"
            )
        self.schedule = schedule
        self.targets = send_order(self.rank, self.workers, schedule)
        self.peers = [peer for peer in range(self.workers) if peer != self.rank]
        self.start, self.stop = plan.bounds(self.rank)
        own = self.stop - self.start
        # one row per peer (rank order) for its contribution to this worker's shard
        self.contributions = np.empty((len(self.peers), own), dtype=np.float32)
        self.averaged = np.empty(own, dtype=np.float32)
        self.statuses = [MPI.Status() for _ in self.peers]
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_sent = 0
        self.last_received = 0
        self.gradient_bytes_sent = 0  # the gradient phase's share of bytes_sent
        self.sparse_buffers: tuple[np.ndarray, np.ndarray] | None = None
        self.own_entries_total = 0  # entries of this worker's selections in its own shard
        self.selected = np.empty(0, dtype=np.int32)  # own-shard entries any worker selected
        self.return_buffers: list[np.ndarray] | None = None
        self.returned_entries_total = 0  # entries of its averaged shard this owner sent back
        self.dense_returns = 0  # sparse steps whose averaged shard went back dense

    @property
    def own_range(self) -> tuple[int, int]:
        return self.start, self.stop

    def reduce_scatter_mean(self, gradient: np.ndarray) -> np.ndarray:
        """This worker's shard of the gradient averaged over all workers (a preallocated buffer,
        overwritten by the next call). `gradient` is the full local vector."""
        self._check_vector(gradient)
        own = gradient[self.start : self.stop]
        if not self.peers:
            np.copyto(self.averaged, own)
            self.last_sent = self.last_received = 0
            return self.averaged
        posted = self.recorder.now()
        receives = [
            self.comm.Irecv(self.contributions[row], source=peer, tag=GRADIENT_TAG)
            for row, peer in enumerate(self.peers)
        ]
        sent = 0
        for target in self.targets:
            low, high = self.plan.bounds(target)
            self._send(gradient[low:high], target, GRADIENT_TAG)
            sent += (high - low) * gradient.itemsize
        self._wait_receives(receives, GRADIENT_TAG, posted)
        self._count(sent, self._received_bytes())
        with self.recorder.span(UPDATE, "average the gradient shard", thread="python"):
            # sum in rank order: the same rounding whatever the arrival order
            parts = list(self.contributions)
            parts.insert(self.rank, own)
            np.add(parts[0], parts[1], out=self.averaged)
            for part in parts[2:]:
                np.add(self.averaged, part, out=self.averaged)
            np.divide(self.averaged, np.float32(self.workers), out=self.averaged)
        self.gradient_bytes_sent += sent
        return self.averaged

    def reduce_scatter_sparse_mean(
        self, indices: np.ndarray, values: np.ndarray, runs: bool = False
    ) -> np.ndarray:
        """This worker's shard averaged over all workers from their top-k selections (or, with
        `runs`, their touched rows: indices sent as runs): `indices` (int32, ascending, over the
        full vector) and `values` are this worker's selection; each owner gets the part that
        falls in its shard as one message, or that part dense (zeros elsewhere) where the
        entries and their indices would be no fewer bytes, as early in a warm-up (a
        preallocated buffer is returned, overwritten by the next call)."""
        pack, unpack = (
            (sparse.pack_runs, sparse.unpack_runs) if runs else (sparse.pack, sparse.unpack)
        )
        if self.sparse_buffers is None:  # a peer sends at most this worker's whole shard
            own = self.stop - self.start
            self.sparse_buffers = (  # room for either message format
                np.empty((len(self.peers), 3 * own + 1), dtype=np.int32),
                np.empty(3 * (self.plan.elements - own) + 2 * self.workers, dtype=np.int32),
            )
        incoming, outgoing = self.sparse_buffers
        bounds = [self.plan.bounds(owner) for owner in range(self.workers)]
        cuts = sparse.owner_slices(indices, bounds)
        posted = self.recorder.now()
        receives = [
            self.comm.Irecv(incoming[row], source=peer, tag=GRADIENT_TAG)
            for row, peer in enumerate(self.peers)
        ]
        sent = offset = 0
        for target in self.targets:
            first, last = cuts[target]
            low, high = bounds[target]
            room = outgoing[offset : offset + 3 * (last - first) + 1]
            local = indices[first:last] - np.int32(low)
            message = pack(values[first:last], local, room)
            if len(message) >= high - low:  # as many entries as not: dense is no more bytes
                message = sparse.dense_message(values[first:last], local, room[: high - low])
            offset += len(message)
            self._send(message, target, GRADIENT_TAG)
            sent += message.nbytes
        self._wait_receives(receives, GRADIENT_TAG, posted)
        self._count(sent, self._received_bytes())
        self.gradient_bytes_sent += sent
        first, last = cuts[self.rank]
        own = self.stop - self.start
        parts = [
            sparse.unpack_any(incoming[row], status.Get_count(self.mpi.INT), own, unpack)
            for row, status in enumerate(self.statuses)
        ]
        parts.insert(self.rank, (indices[first:last] - np.int32(self.start), values[first:last]))
        sparse.sparse_mean(parts, self.averaged)
        self.selected = sparse.union([part[0] for part in parts], len(self.averaged))
        self.own_entries_total += last - first
        return self.averaged

    def allgather_sparse_mean(self, gradient: np.ndarray, runs: bool = False) -> None:
        """The second phase after `reduce_scatter_sparse_mean`: `gradient` (the full vector)
        becomes the average over all workers. This owner sends its averaged shard to every peer
        as the entries any worker selected (outside them the average is exactly 0), values and
        indices (as runs with `runs`), or dense when that message would not be smaller; the
        other owners' shards are received into place."""
        self._check_vector(gradient)
        np.copyto(gradient[self.start : self.stop], self.averaged)
        if not self.peers:
            return
        pack = sparse.pack_runs if runs else sparse.pack
        unpack = sparse.unpack_runs if runs else sparse.unpack
        if self.return_buffers is None:  # a message is never longer than the sender's shard
            self.return_buffers = [
                np.empty(max(self.plan.length(peer), 1), dtype=np.int32) for peer in self.peers
            ]
            self.return_buffers.append(np.empty(3 * len(self.averaged) + 1, dtype=np.int32))
        *incoming, outgoing = self.return_buffers
        posted = self.recorder.now()
        receives = [
            self.comm.Irecv(incoming[row], source=peer, tag=PARAMETER_TAG)
            for row, peer in enumerate(self.peers)
        ]
        selected = self.selected
        message = pack(self.averaged[selected], selected, outgoing)
        if len(message) >= len(self.averaged):  # dense is no more bytes: send the shard as is
            message = self.averaged.view(np.int32)  # the float32 bits, as every message
            self.dense_returns += 1
            self.returned_entries_total += len(self.averaged)
        else:
            self.returned_entries_total += len(selected)
        for target in self.targets:
            self._send(message, target, PARAMETER_TAG)
        self._wait_receives(receives, PARAMETER_TAG, posted)
        self._count(message.nbytes * len(self.targets), self._received_bytes(), accumulate=True)
        for row, peer in enumerate(self.peers):
            low, high = self.plan.bounds(peer)
            words = self.statuses[row].Get_count(self.mpi.INT)
            place = gradient[low:high]
            if words == high - low:  # dense: a sparse message is always shorter
                np.copyto(place, incoming[row][:words].view(np.float32))
            else:
                local, values = unpack(incoming[row], words)
                place.fill(0.0)
                place[local] = values

    def allgather(self, params: np.ndarray) -> None:
        """Sends this worker's shard of `params` to every peer and receives theirs in place."""
        self._check_vector(params)
        if not self.peers:
            return
        posted = self.recorder.now()
        receives = []
        for peer in self.peers:
            low, high = self.plan.bounds(peer)
            receives.append(self.comm.Irecv(params[low:high], source=peer, tag=PARAMETER_TAG))
        own = params[self.start : self.stop]
        for target in self.targets:
            self._send(own, target, PARAMETER_TAG)
        self._wait_receives(receives, PARAMETER_TAG, posted)
        self._count(own.nbytes * len(self.targets), self._received_bytes(), accumulate=True)

    def _send(self, message: np.ndarray, target: int, tag: int) -> None:
        """One send, waited for before the next round's (its buffer handed over or delivered)."""
        started = self.recorder.now()
        self.comm.Isend(message, dest=target, tag=tag).Wait()
        if started:
            self.recorder.add(
                COMM, f"send {KIND[tag]} to rank {target}", started, time.time_ns(),
                peer=target, bytes=int(message.nbytes), kind=KIND[tag], direction="send",
            )  # fmt: skip

    def _wait_receives(self, receives: list, tag: int, posted: int) -> None:
        """Completes the receives into `self.statuses` (rank order of the peers); on a traced
        step one by one, each timed from its posting (`posted`) to its completion."""
        if not posted:
            self.mpi.Request.Waitall(receives, self.statuses)
            return
        waiting = time.time_ns()
        status = self.mpi.Status()
        for _ in receives:
            row = self.mpi.Request.Waitany(receives, status)
            self.statuses[row] = self.mpi.Status(status)
            self.recorder.add(
                COMM, f"receive {KIND[tag]} from rank {self.peers[row]}", posted, time.time_ns(),
                thread="mpi receives", peer=self.peers[row],
                bytes=status.Get_count(self.mpi.BYTE), kind=KIND[tag], direction="receive",
            )  # fmt: skip
        self.recorder.add(WAIT, f"wait for the {KIND[tag]} receives", waiting, time.time_ns())

    def _received_bytes(self) -> int:
        return sum(status.Get_count(self.mpi.BYTE) for status in self.statuses)

    def _count(self, sent: int, received: int, accumulate: bool = False) -> None:
        """Adds one phase's bytes; `last_*` hold the current step's (gradient + parameter) bytes."""
        self.bytes_sent += sent
        self.bytes_received += received
        if accumulate:
            self.last_sent += sent
            self.last_received += received
        else:
            self.last_sent, self.last_received = sent, received

    def _check_vector(self, vector: np.ndarray) -> None:
        if (
            vector.dtype != np.float32
            or vector.shape != (self.plan.elements,)
            or not vector.flags.c_contiguous
        ):
            raise ValueError(
                f"exchange expects a contiguous float32 vector of {self.plan.elements} elements, "
                f"got {vector.dtype} {vector.shape}"
            )
