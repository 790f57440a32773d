"""`single`: one process, the baseline for speed-up and scaling efficiency.

With `--companions N` the job has N more ranks, each on a host of its own, that train the same
model on the same data at the same time and record nothing but their compute: the baseline is
then measured with the machine loaded as a job of 1 + N workers loads it. They meet only at a
barrier before training and in the gathers of the run's facts at the end.
"""

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

    @property
    def is_chief(self) -> bool:
        return self.place.rank == 0

    @property
    def evaluates(self) -> bool:
        # Companions evaluate as the baseline does, so that the load stays the same throughout.
        return True

    def setup(self) -> None:
        super().setup()
        if self.place.size > 1:
            self._comm().Barrier()  # the baseline and its companions start training together

    def _comm(self):
        # deferred: importing mpi4py.MPI initialises MPI, which a one-process run never needs
        from mpi4py import MPI

        return MPI.COMM_WORLD

    def allgather_object(self, value) -> list:
        if self.place.size == 1:
            return [value]
        return self._comm().allgather(value)
