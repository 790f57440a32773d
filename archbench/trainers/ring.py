"""`ring`: Horovod ring-allreduce (MPI or Gloo controller on CPUs, NCCL on GPUs).

The fused step uses `hvd.DistributedGradientTape`, so each gradient's allreduce starts as soon as
the backward pass has produced it and tensor fusion batches small tensors: the overlap Horovod gets
in real use. The probe step runs the same allreduces after the whole backward pass, to time the
exchange on its own.
"""

from __future__ import annotations

import os

from archbench.trainers.base import KerasTrainer


class RingTrainer(KerasTrainer):
    arch = "ring"

    def setup(self) -> None:
        # Horovod reads its knobs from the environment at init.
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(
            int(self.config.fusion_threshold_mb * 1024 * 1024)
        )
        os.environ["HOROVOD_CYCLE_TIME"] = str(self.config.cycle_time_ms)
        import horovod.tensorflow as hvd

        self.hvd = hvd
        hvd.init()
        self.check_world("Horovod", hvd.rank(), hvd.size())
        self.compression = (
            hvd.Compression.fp16 if self.config.compression == "fp16" else hvd.Compression.none
        )
        super().setup()
        # Every rank built the same initial weights from the seed; broadcasting makes it a fact.
        hvd.broadcast_variables(self.model.variables, root_rank=0)

    @property
    def controller(self) -> str:
        if self.hvd.mpi_enabled():
            return "mpi"
        if self.hvd.gloo_enabled():
            return "gloo"
        return "unknown"

    def exchange(self, grads):
        hvd = self.hvd
        return [hvd.allreduce(g, op=hvd.Average, compression=self.compression) for g in grads]

    def _build_fused_step(self):
        import tensorflow as tf

        hvd = self.hvd

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = self.model(x, training=True)
                loss = self.loss_fn(y, logits)
            tape = hvd.DistributedGradientTape(tape, compression=self.compression)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        return step

    def allgather_object(self, value) -> list:
        return list(self.hvd.allgather_object(value))

    def comm_stats(self, steps: int) -> dict:
        # Ring allreduce: each worker sends 2(W-1)/W of the gradient bytes per step
        # (reduce-scatter then allgather); fp16 compression halves float32 payloads.
        from archbench.models import parameter_stats

        workers = self.num_workers
        gradient_bytes = parameter_stats(self.model)["param_bytes"]
        if self.config.compression == "fp16":
            gradient_bytes //= 2
        per_step = int(round(2 * (workers - 1) / workers * gradient_bytes)) if workers > 1 else 0
        return {
            "bytes_sent_per_step": per_step,
            "bytes_received_per_step": per_step,
            "bytes_total": per_step * steps,
            "bytes_method": "analytic: ring allreduce, 2(W-1)/W x gradient bytes",
        }

    def extra_record(self) -> dict:
        return {"controller": self.controller, "nccl_built": bool(self.hvd.nccl_built())}

    def finish(self) -> None:
        self.hvd.join()
