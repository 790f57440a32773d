"""The p2p exchange in pieces (`--partition-mb S`, `--priority on`): one pipelined pass.

`ShardExchange` runs its two phases one after the other: every gradient shard to its owner,
each send waited for in turn, then every fresh parameter shard to every peer. Here each shard is
cut into pieces of at most S MB (`archbench.runtime.tensor_partition.cut_range`; one piece per shard when S is
not given), and a step is one pass of non-blocking messages:

1. every receive is posted (the W-1 contributions to each piece of this worker's shard; every
   piece of every other shard's fresh parameters, straight into place), each piece under a tag
   of its own (`piece_tag`): the owner returns each piece as it completes, in an order of its
   own, and with one tag for all, a receive took another piece's message (MPI_ERR_TRUNCATE
   between two emulated nodes; where the sizes agree it would put a piece in the wrong place);
2. every gradient piece is sent at once (`Isend`, none waited for), in the exchange's own order
   (`--priority off`: peer by peer as the p2p schedule says, each shard's pieces in order) or
   first layers first (`--priority on`: all pieces by their position in the flattened model,
   whose variables are in layer order);
3. as receives complete (`Waitany`), a piece of the own shard whose W contributions are all in
   is averaged (summed in rank order, as `ShardExchange` does), updated, and its fresh
   parameters sent to every peer at once; parameter pieces from the other owners land in place.

On a traced step (--timeline) every receive is timed from its posting to its completion, every
piece's averaging and update, and the sends from their posting to the final wait.

So an owner updates and returns its first pieces while later gradient pieces are still on the
wire, and the parameters of the model's first variable can be complete before the last piece
arrives. Every element goes through the same float32 operations as in `ShardExchange`, so the
parameters are the same bits; the bytes are the same too (the same data, cut).

What it does not do: the gradient still comes out of one compiled backward pass as one vector
(no piece leaves before the whole backward pass ends), and the next forward pass starts only
when every piece is in (the Keras model runs as one graph). The timestamps of each exchange
(`PieceTimes`) measure how much earlier a per-layer engine could start it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from archbench.p2p.exchange import GRADIENT_TAG, PARAMETER_TAG, ShardExchange
from archbench.p2p.shards import ShardPlan
from archbench.runtime.tensor_partition import PartitionSpec, cut_range
from archbench.timeline.spans import COMM, UPDATE, WAIT

PIECE_TAG_BASE = 1000  # above the exchange's phase tags


def piece_tag(kind_tag: int, index: int) -> int:
    """The tag of piece `index` of a shard, a gradient contribution or fresh parameters: a tag
    of its own, so a receive takes its piece whatever order the messages between two ranks are
    matched in."""
    return PIECE_TAG_BASE + 2 * index + (kind_tag == PARAMETER_TAG)


# apply(low, high, averaged): update the own shard's elements [low, high) (shard-relative) from
# their average over the workers
ApplyPiece = Callable[[int, int, np.ndarray], None]


@dataclass
class PieceTimes:
    """Seconds from the start of one exchange to its milestones."""

    first_update_sent_s: float  # the first fresh parameter piece went out
    gradients_in_s: float  # the last gradient contribution to this worker's shard arrived
    first_layer_ready_s: float  # every element of the model's first variable was in place
    done_s: float  # every piece in place, every send complete

    @property
    def pipelined_s(self) -> float:
        """How long parameter pieces went out while gradient pieces were still arriving."""
        return max(0.0, self.gradients_in_s - self.first_update_sent_s)


class PieceExchange(ShardExchange):
    def __init__(
        self,
        comm,
        plan: ShardPlan,
        schedule: str,
        spec: PartitionSpec,
        first_layer_elements: int,
    ):
        super().__init__(comm, plan, schedule)
        self.spec = spec
        limit = spec.max_elements(plan.itemsize)
        self.pieces = [cut_range(*plan.bounds(owner), limit) for owner in range(self.workers)]
        self.first_layer_elements = first_layer_elements
        # the schedule's peer order, each shard's pieces in order; priority: by position in the
        # flattened model (variables in layer order), first layers first
        self.send_pieces = [
            (owner, index, low, high)
            for owner in self.targets
            for index, (low, high) in enumerate(self.pieces[owner])
        ]
        if spec.priority:
            self.send_pieces.sort(key=lambda piece: piece[2])
        self.times: list[PieceTimes] = []

    @property
    def piece_count(self) -> int:
        return sum(len(pieces) for pieces in self.pieces)

    def reduce_apply_gather(self, vector: np.ndarray, params: np.ndarray, apply: ApplyPiece):
        """Averages `vector` over the workers piece by piece, calls `apply` on each piece of the
        own shard, and leaves every fresh piece of `params` in place on every worker."""
        self._check_vector(vector)
        self._check_vector(params)
        mpi, comm = self.mpi, self.comm
        start = time.perf_counter()
        own_pieces = self.pieces[self.rank]
        if not self.peers:
            for low, high in own_pieces:
                apply(low - self.start, high - self.start, vector[low:high])
            self.last_sent = self.last_received = 0
            return
        recorder = self.recorder
        posted = recorder.now()
        # (kind, piece index, peer) per receive: kind 0 a gradient contribution, 1 a parameter piece
        requests, meaning = [], []
        for row, peer in enumerate(self.peers):
            for index, (low, high) in enumerate(own_pieces):
                rows = self.contributions[row, low - self.start : high - self.start]
                requests.append(comm.Irecv(rows, source=peer, tag=piece_tag(GRADIENT_TAG, index)))
                meaning.append((0, index, peer))
        first = self.first_layer_elements
        first_layer_waiting = 0
        for peer in self.peers:
            for index, (low, high) in enumerate(self.pieces[peer]):
                place = params[low:high]
                requests.append(comm.Irecv(place, source=peer, tag=piece_tag(PARAMETER_TAG, index)))
                meaning.append((1, low < first, peer))
                first_layer_waiting += low < first
        first_layer_waiting += sum(low < first for low, _ in own_pieces)
        sends = [
            comm.Isend(vector[low:high], dest=owner, tag=piece_tag(GRADIENT_TAG, index))
            for owner, index, low, high in self.send_pieces
        ]
        gradients_posted = recorder.now()
        returns: list[tuple[int, int]] = []  # (posted, bytes) of each fresh piece sent back
        sent = sum(high - low for _, _, low, high in self.send_pieces) * vector.itemsize
        gradient_sent = sent
        missing = [len(self.peers)] * len(own_pieces)
        gradients_left = len(self.peers) * len(own_pieces)
        status = mpi.Status()
        received = 0
        first_update = gradients_in = first_layer_ready = None
        for _ in range(len(requests)):
            which = mpi.Request.Waitany(requests, status)
            received += status.Get_count(mpi.BYTE)
            kind, detail, peer = meaning[which]
            if posted:
                what = "parameters" if kind else "gradient"
                recorder.add(
                    COMM, f"receive {what} piece from rank {peer}", posted, time.time_ns(),
                    thread="mpi receives", peer=peer, bytes=status.Get_count(mpi.BYTE),
                    kind=what, direction="receive",
                )  # fmt: skip
            if kind == 1:
                first_layer_waiting -= detail
            else:
                gradients_left -= 1
                if not gradients_left:
                    gradients_in = time.perf_counter()
                missing[detail] -= 1
                if not missing[detail]:
                    low, high = own_pieces[detail]
                    rel_low, rel_high = low - self.start, high - self.start
                    with recorder.span(UPDATE, "average and update a piece", thread="python"):
                        self._average_piece(vector, rel_low, rel_high)
                        apply(rel_low, rel_high, self.averaged[rel_low:rel_high])
                    piece = params[low:high]
                    returned = recorder.now()
                    tag = piece_tag(PARAMETER_TAG, detail)
                    sends += [comm.Isend(piece, dest=peer, tag=tag) for peer in self.targets]
                    returns.append((returned, piece.nbytes))
                    sent += piece.nbytes * len(self.targets)
                    first_layer_waiting -= low < first
                    if first_update is None:
                        first_update = time.perf_counter()
            if first_layer_ready is None and first_layer_waiting == 0:
                first_layer_ready = time.perf_counter()
        sends_waited = recorder.now()
        mpi.Request.Waitall(sends)
        done = time.perf_counter()
        if posted:
            self._record_sends(gradients_posted, gradient_sent, returns, sends_waited)
        self._count(sent, received)
        self.gradient_bytes_sent += gradient_sent
        self.times.append(
            PieceTimes(
                first_update_sent_s=first_update - start,
                gradients_in_s=gradients_in - start,
                first_layer_ready_s=(first_layer_ready or done) - start,
                done_s=done - start,
            )
        )

    def _record_sends(
        self, gradients_posted: int, gradient_bytes: int, returns: list, waited: int
    ) -> None:
        """A traced step's non-blocking sends: each group from its posting to the final wait,
        which itself is a wait."""
        recorder, ended = self.recorder, time.time_ns()
        recorder.add(
            COMM, f"send {len(self.send_pieces)} gradient pieces (non-blocking)",
            gradients_posted, ended, thread="mpi sends", bytes=gradient_bytes,
            peers=self.targets, kind="gradient", direction="send",
        )  # fmt: skip
        if returns:
            recorder.add(
                COMM, f"send {len(returns)} fresh pieces to every peer (non-blocking)",
                returns[0][0], ended, thread="mpi sends",
                bytes=sum(size for _, size in returns) * len(self.targets), peers=self.targets,
                kind="parameters", direction="send",
            )  # fmt: skip
        recorder.add(WAIT, "wait for the sends", waited, ended)

    def _average_piece(self, vector: np.ndarray, low: int, high: int) -> None:
        """The mean of the W contributions to own-shard elements [low, high), summed in rank
        order into `self.averaged[low:high]` (the operations of `reduce_scatter_mean`)."""
        parts = [row[low:high] for row in self.contributions]
        parts.insert(self.rank, vector[self.start + low : self.start + high])
        out = self.averaged[low:high]
        np.add(parts[0], parts[1], out=out)
        for part in parts[2:]:
            np.add(out, part, out=out)
        np.divide(out, np.float32(self.workers), out=out)

    def as_record(self) -> dict:
        """What was cut, into how many pieces, in which order, and the measured pipelining."""
        pieces = [len(p) for p in self.pieces]
        record = {
            **self.spec.record(pieces),
            "pieces_per_shard": pieces,
            "send_order": "first layers first (by position in the flattened model)"
            if self.spec.priority
            else "the p2p schedule's peer order, each shard's pieces in order",
            "engine_overlap": "pieces sent non-blocking; each own piece averaged, updated and "
            "returned as soon as its W contributions are in (while later pieces are still "
            "arriving); the backward pass ends before any piece leaves and the next forward "
            "pass starts after the last piece",
            "exchanges_timed": len(self.times),
        }
        if self.times:
            for name in ("first_update_sent_s", "gradients_in_s", "first_layer_ready_s", "done_s"):
                record[f"{name[:-2]}_median_s"] = float(
                    np.median([getattr(t, name) for t in self.times])
                )
            record["pipelined_median_s"] = float(np.median([t.pipelined_s for t in self.times]))
            record["first_layer_lead_median_s"] = float(
                np.median([t.done_s - t.first_layer_ready_s for t in self.times])
            )
        return record
