"""The shard plan: which worker owns which contiguous range of the flattened parameter vector.

Deterministic from (elements, workers) alone, so every rank derives the same plan with no
messages: shard k is elements [start_k, stop_k); the first `elements % workers` shards hold one
element more than the rest (the split of `numpy.array_split`), so shards differ by at most one
element and are of about equal bytes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShardPlan:
    elements: int
    workers: int
    itemsize: int = 4  # float32

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"a shard plan needs at least one worker, got {self.workers}")
        if self.elements < 0:
            raise ValueError(f"element count must be >= 0, got {self.elements}")

    def bounds(self, owner: int) -> tuple[int, int]:
        """[start, stop) element range owned by `owner`."""
        base, extra = divmod(self.elements, self.workers)
        start = owner * base + min(owner, extra)
        return start, start + base + (1 if owner < extra else 0)

    def length(self, owner: int) -> int:
        start, stop = self.bounds(owner)
        return stop - start

    def shard_bytes(self, owner: int) -> int:
        return self.length(owner) * self.itemsize

    @property
    def total_bytes(self) -> int:
        return self.elements * self.itemsize

    def bytes_sent_per_step(self, rank: int) -> int:
        """What `rank` sends in one step: every gradient shard but its own to the shard's owner,
        then its own fresh parameter shard to each of the other W-1 workers."""
        gradient = self.total_bytes - self.shard_bytes(rank)
        parameters = (self.workers - 1) * self.shard_bytes(rank)
        return gradient + parameters

    def bytes_received_per_step(self, rank: int) -> int:
        """What `rank` receives: W-1 contributions to its own shard, then every other fresh shard."""
        gradient = (self.workers - 1) * self.shard_bytes(rank)
        parameters = self.total_bytes - self.shard_bytes(rank)
        return gradient + parameters

    def as_record(self) -> dict:
        """The plan as the run record states it."""
        return {
            "elements": self.elements,
            "workers": self.workers,
            "dtype_bytes": self.itemsize,
            "method": "contiguous ranges of the flattened trainable variables in model order; "
            "shard sizes differ by at most one element",
            "owners": [
                {
                    "rank": owner,
                    "start": self.bounds(owner)[0],
                    "stop": self.bounds(owner)[1],
                    "bytes": self.shard_bytes(owner),
                }
                for owner in range(self.workers)
            ],
        }
