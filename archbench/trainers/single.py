"""`single`: one process, the baseline for speed-up and scaling efficiency."""

from __future__ import annotations

from archbench.trainers.base import KerasTrainer


class SingleTrainer(KerasTrainer):
    arch = "single"

    @property
    def num_workers(self) -> int:
        return 1

    @property
    def worker_index(self) -> int:
        return 0

    def allgather_object(self, value) -> list:
        return [value]
