"""`ring`: Horovod ring-allreduce (MPI or Gloo controller on CPUs, NCCL on GPUs).

The fused step uses `hvd.DistributedGradientTape`, so each gradient's allreduce starts as soon as
the backward pass has produced it and tensor fusion batches small tensors: the overlap Horovod gets
in real use. The probe step runs the same allreduces after the whole backward pass, to time the
exchange on its own.

With `--compression topk` or `powersgd` the exchange is the compressor's
(`archbench.compression.topk.TopKAllgather`: hvd.allgather of each worker's top-k values and
indices; `archbench.compression.powersgd.PowerSGD`: hvd.allreduce of the factors): it needs the
whole gradient, so the fused step runs it after the backward pass (no overlap), as the probe does.
"""

from __future__ import annotations

import os

import numpy as np

from archbench.compression import ring_allreduce_bytes
from archbench.compression.record import ring_stats
from archbench.compression.ring import ring_compressor
from archbench.runtime import sparse_rows
from archbench.runtime.emulation import factor as dilation_factor
from archbench.runtime.localsgd import AVERAGE, SYNC
from archbench.trainers.base import KerasTrainer
from archbench.workloads.models import parameter_stats

# Open MPI's coll/tuned allreduce algorithms: 4 is the ring (reduce-scatter, then allgather).
OMPI_RING_ALLREDUCE = "4"
_OMPI_ALGORITHM_VARS = (
    "OMPI_MCA_coll_tuned_use_dynamic_rules",
    "OMPI_MCA_coll_tuned_allreduce_algorithm",
)


def mpi_allreduce_environment(algorithm: str) -> dict[str, str]:
    """The MCA variables that select the MPI allreduce algorithm (none for the default)."""
    if algorithm == "ring":
        return dict(zip(_OMPI_ALGORITHM_VARS, ("1", OMPI_RING_ALLREDUCE), strict=True))
    return {}


def allreduce_algorithm_run(controller: str, nccl: bool = False) -> str:
    """What the record calls the algorithm that ran, as `<library>:<algorithm>`, read from what
    the library was given at init (the MCA variables in this process's environment)."""
    if nccl:
        return f"nccl:{os.environ.get('NCCL_ALGO', 'auto').lower()}"
    if controller == "gloo":
        return "gloo:ring"  # Horovod calls gloo::allreduce, whose default algorithm is the ring
    if controller != "mpi":
        return "unknown"
    if os.environ.get("OMPI_MCA_coll_tuned_use_dynamic_rules") != "1":
        return "mpi:default"
    forced = os.environ.get("OMPI_MCA_coll_tuned_allreduce_algorithm", "0")
    return "mpi:ring" if forced == OMPI_RING_ALLREDUCE else f"mpi:tuned-{forced}"


class RingTrainer(KerasTrainer):
    arch = "ring"
    SETTINGS_READ = KerasTrainer.SETTINGS_READ + (
        "fusion_threshold_mb",  # Horovod's environment, before hvd.init
        "cycle_time_ms",  # Horovod's environment, before hvd.init
        "allreduce_algorithm",  # MPI's environment, before hvd.init
        "compression_spec",
        "sparse_exchange",
    )

    def setup(self) -> None:
        # Horovod reads its knobs from the environment at init.
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(
            int(self.config.fusion_threshold_mb * 1024 * 1024)
        )
        # A virtual duration, like every one a user gives: on a dilated node D times longer.
        os.environ["HOROVOD_CYCLE_TIME"] = str(self.config.cycle_time_ms * dilation_factor())
        # Open MPI reads its MCA parameters from the environment in MPI_Init (inside
        # hvd.init), so the algorithm is chosen here, per run, not by the launcher.
        os.environ.update(mpi_allreduce_environment(self.config.allreduce_algorithm))
        # deferred: Horovod (and TensorFlow with it) loads after its knobs are in the environment
        import horovod.tensorflow as hvd

        self.hvd = hvd
        # In a warm group Horovod stays initialised from the group's first run on (a later
        # hvd.init() is a no-op): Horovod 0.28 crashes when initialised again after
        # hvd.shutdown(), and MPI cannot start twice. So the sweep groups ring runs by every
        # setting read at init (fusion threshold, cycle time, allreduce algorithm, controller).
        hvd.init()
        self.check_world("Horovod", hvd.rank(), hvd.size())
        spec = self.config.compression_spec
        self.hvd_compression = spec.horovod_compression(hvd)  # fp16's cast, or none
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        # --sparse-exchange sparse: rows gathered per row-sparse variable (counted in the steps)
        self._sparse_rows: dict[str, int] = {}  # variable name -> bytes of one row + its index
        super().setup()
        self._gathered_rows = [
            tf.Variable(0, dtype=tf.int64, trainable=False) for _ in self.model.trainable_variables
        ]
        # Every rank built the same initial weights from the seed; broadcasting makes it a fact.
        hvd.broadcast_variables(self.model.variables, root_rank=0)
        # top-k or PowerSGD: the compressor's exchange replaces Horovod's allreduce
        variables = self.model.trainable_variables
        self.compressor = ring_compressor(tf, hvd, spec, variables, hvd.size(), self.config.seed)

    @property
    def controller(self) -> str:
        if self.hvd.mpi_enabled():
            return "mpi"
        if self.hvd.gloo_enabled():
            return "gloo"
        return "unknown"

    def exchange(self, grads):
        if self.compressor is not None:
            return self.compressor.exchange(grads)
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        hvd = self.hvd
        if not self.sparse:  # densify, then allreduce (sparse_as_dense)
            grads = [tf.convert_to_tensor(g) for g in grads]
        # an IndexedSlices is allgathered (its rows and indices), a tensor allreduced
        reduced = [
            hvd.allreduce(g, op=hvd.Average, compression=self.hvd_compression) for g in grads
        ]
        self._count_gathered_rows(reduced)
        return reduced

    @property
    def sparse(self) -> bool:
        return self.config.sparse_exchange == "sparse"

    def _count_gathered_rows(self, grads) -> None:
        """Adds the rows of each gathered IndexedSlices (all workers' rows) to the counters; at
        trace time, notes which variables' gradients are row-sparse and a row's bytes."""
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        for index, grad in enumerate(grads):
            if isinstance(grad, tf.IndexedSlices):
                variable = self.model.trainable_variables[index]
                row_bytes = int(np.prod(variable.shape[1:])) * variable.dtype.size
                self._sparse_rows[variable.name] = row_bytes + grad.indices.dtype.size
                rows = tf.cast(tf.shape(grad.indices)[0], tf.int64)
                self._gathered_rows[index].assign_add(rows)

    def _build_fused_step(self):
        if self.config.compression_spec.own_exchange:
            return super()._build_fused_step()  # compute, then the compressor's exchange
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        hvd = self.hvd

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = self.model(x, training=True)
                loss = self.loss_fn(y, logits)
            tape = hvd.DistributedGradientTape(
                tape, compression=self.hvd_compression, sparse_as_dense=not self.sparse
            )
            grads = tape.gradient(loss, self.model.trainable_variables)
            self._count_gathered_rows(grads)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        return step

    def average_parameters(self) -> None:
        # --sync-every: the parameters themselves are averaged, uncompressed (fp16 would round
        # the weights, not only their update); --compression applies to the gradient steps only
        hvd = self.hvd
        for variable in self.model.trainable_variables:
            variable.assign(hvd.allreduce(variable.read_value(), op=hvd.Average))

    def allgather_object(self, value) -> list:
        return list(self.hvd.allgather_object(value))

    def comm_stats(self, steps: int) -> dict:
        if self.compressor is not None:
            shapes = [tuple(map(int, v.shape)) for v in self.model.trainable_variables]
            spec = self.compressor.spec
            return ring_stats(spec, shapes, self.num_workers, steps, self.compressor)
        # Ring allreduce of the dense gradients as they go on the wire (fp16 halves them)
        workers = self.num_workers
        gradient_bytes = parameter_stats(self.model)["param_bytes"] - self._row_sparse_dense_bytes()
        wire_bytes = self.config.compression_spec.dense_wire_bytes(gradient_bytes)
        per_step = ring_allreduce_bytes(wire_bytes, workers)
        method = "analytic: ring allreduce, 2(W-1)/W x gradient bytes"
        if self._sparse_rows:
            per_step += int(round((workers - 1) / workers * self._gathered_bytes(steps)))
            method += (
                " of the dense gradients; row-sparse gradients: (W-1)/W x the rows and indices "
                "gathered (counted each step), as a ring allgather moves them"
            )
        stats = {
            "bytes_sent_per_step": per_step,
            "bytes_received_per_step": per_step,
            "bytes_total": per_step * steps,
            "bytes_method": method,
        }
        if self.schedule.local_steps:
            stats = self._with_local_steps(stats, steps)
        return stats

    def _gathered_bytes(self, steps: int) -> float:
        """Bytes of the rows and indices allgathered per step, all workers' together."""
        by_name = {v.name: i for i, v in enumerate(self.model.trainable_variables)}
        total = sum(
            int(self._gathered_rows[by_name[name]].numpy()) * row_bytes
            for name, row_bytes in self._sparse_rows.items()
        )
        return total / max(1, steps)

    def _row_sparse_dense_bytes(self) -> int:
        """The dense bytes of the variables whose rows were gathered (left out of the allreduce)."""
        return sum(
            int(np.prod(v.shape)) * v.dtype.size
            for v in self.model.trainable_variables
            if v.name in self._sparse_rows
        )

    def _with_local_steps(self, synchronous: dict, steps: int) -> dict:
        """--sync-every > 1: the gradient allreduce (as counted above) on the synchronous steps,
        an uncompressed allreduce of the parameters on the averaging steps, nothing on the local
        ones; per step = over every step."""

        param_bytes = parameter_stats(self.model)["param_bytes"]
        per_average = ring_allreduce_bytes(param_bytes, self.num_workers)
        total = synchronous["bytes_sent_per_step"] * self.steps_by_kind.get(SYNC, 0)
        total += per_average * self.steps_by_kind.get(AVERAGE, 0)
        per_step = int(round(total / steps)) if steps else 0
        return {
            **synchronous,
            "bytes_sent_per_step": per_step,
            "bytes_received_per_step": per_step,
            "bytes_total": total,
            "bytes_method": synchronous["bytes_method"] + " per synchronous step; 2(W-1)/W x "
            "parameter bytes per averaging step (uncompressed); averaged over every step",
        }

    def extra_record(self) -> dict:
        rows = None
        if self._sparse_rows and self.sparse:
            by_name = {v.name: i for i, v in enumerate(self.model.trainable_variables)}
            steps = max(1, sum(self.steps_by_kind.values()))
            gathered = sum(int(self._gathered_rows[by_name[n]].numpy()) for n in self._sparse_rows)
            rows = gathered / steps / self.num_workers
        return {
            "sparse_exchange": sparse_rows.record(
                self.config.sparse_exchange,
                [v.name for v in sparse_rows.embedding_variables(self.model)],
                "Horovod allgather of each worker's rows (duplicates included) and indices",
                rows,
            ),
            "controller": self.controller,
            "nccl_built": bool(self.hvd.nccl_built()),
            "allreduce_algorithm": allreduce_algorithm_run(self.controller, self._nccl_in_use()),
        }

    def _nccl_in_use(self) -> bool:
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        return bool(self.hvd.nccl_built()) and bool(tf.config.list_physical_devices("GPU"))

    def finish(self) -> None:
        self.hvd.join()
