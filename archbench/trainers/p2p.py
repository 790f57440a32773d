"""`p2p`: peer to peer over MPI point-to-point messages (mpi4py), every worker a shard owner.

The trainable variables are flattened into one float32 vector and split into W contiguous shards
of about equal bytes (`archbench.p2p.shards.ShardPlan`, recorded as `comm.shard_plan`). A step:

1. compute: forward + backward in a tf.function that returns the loss and the whole gradient as
   one flat vector (sparse IndexedSlices gradients, e.g. an embedding's, are densified: p2p
   carries every gradient dense);
2. exchange: each gradient shard goes to its owner with non-blocking sends and receives; the
   owner averages the W contributions and applies SGD with momentum (Keras's formula, float32) to
   its shard, then sends the fresh shard to every peer (`archbench.p2p.exchange.ShardExchange`);
3. every worker writes the full vector back into its model's variables.

With `--compression topk` (or `--sparse-exchange sparse`) step 2 sends each owner only the
entries of this worker's top-k selection (with error feedback: `archbench.compression.topk.TopK`;
or its touched rows) that fall in the owner's shard, values and indices; the owner averages them
and sends back, instead of its updated parameters, the averaged gradient at the entries any
worker selected (dense when that is fewer bytes). With momentum every entry of the updated
parameters changes, so parameters could only travel dense; the averaged gradient stays sparse.
Every worker then applies SGD with momentum to its whole replica, holding momentum for the
whole vector (as ring does): the same float32 operations on the same averaged gradient as an
owner's, so the same bits as if each owner had updated its shard and sent it back.

No MPI collective moves gradients or parameters; collectives are used only to set up (one
broadcast of the initial parameters) and for small facts (allgather of Python objects). The
parameters are the owners' numpy shards; the Keras model is a copy refreshed every step, so all
ranks hold identical parameters after every step (checked at the end of the run).

With `--sync-every H` > 1 (`archbench.runtime.localsgd`), a local step applies this worker's own
gradient to its whole parameter vector with its own momentum (a full-length `ShardSGD`; at the
first local step after synchronous warm-up steps it starts from the owners' momentum shards,
gathered once), and an averaging step runs the same two phases on the parameter vector instead
of the gradient: each owner averages its shard of the parameters over the workers, then sends it
to every peer. The same messages, so the same bytes as a gradient exchange; ranks hold identical
parameters after every averaging step, and the run's last step always averages.

With `--partition-mb S` or `--priority on` (`archbench.runtime.tensor_partition`), step 2 runs in pieces
(`archbench.p2p.pieces.PieceExchange`): every piece a non-blocking message, each owner piece
averaged, updated and sent back as soon as its contributions are in; the same bits, the same
bytes. An averaging step sends a copy of the parameters, since fresh pieces land in them.
"""

from __future__ import annotations

import time

import numpy as np

from archbench.common.errors import UsageError
from archbench.compression.record import p2p_compression
from archbench.compression.topk import TopK
from archbench.p2p.exchange import ShardExchange
from archbench.p2p.pieces import PieceExchange
from archbench.p2p.sgd import ShardSGD
from archbench.p2p.shards import ShardPlan
from archbench.runtime import sparse_rows
from archbench.runtime.localsgd import AVERAGE, SYNC
from archbench.runtime.tensor_partition import PartitionSpec
from archbench.timeline.spans import UPDATE
from archbench.trainers.base import Trainer
from archbench.workloads.models import parameter_digest

COMPUTE_WORK = "forward + backward"  # what the gradients' tf.function computes


class P2PTrainer(Trainer):
    arch = "p2p"
    SETTINGS_READ = Trainer.SETTINGS_READ + (
        "loss",  # archbench.workloads.task
        "optimizer",  # only sgd
        "model",
        "seed",
        "lr",
        "momentum",
        "p2p_schedule",
        "sparse_exchange",
        "compression_spec",
        "partition_mb",  # PartitionSpec.from_config
        "priority",  # PartitionSpec.from_config
    )

    def setup(self) -> None:
        if self.place.launcher == "horovodrun" and not self.place.under_mpi:
            raise UsageError(
                "--arch p2p sends MPI point-to-point messages, and this job has no MPI "
                "(horovodrun --gloo): start it with mpirun, or horovodrun without --gloo"
            )
        if self.config.optimizer != "sgd":
            raise UsageError(
                f"--arch p2p implements only the sgd optimizer, not {self.config.optimizer!r}"
            )
        # deferred: TensorFlow loads when the trainer runs; importing mpi4py.MPI initialises MPI
        import tensorflow as tf
        from mpi4py import MPI

        from archbench.workloads.models import build_for_data
        from archbench.workloads.task import keras_loss

        self.comm = MPI.COMM_WORLD
        self.check_world("MPI", self.comm.Get_rank(), self.comm.Get_size())
        self.model = build_for_data(self.config.model, self.data, self.config.seed)
        self.variables = list(self.model.trainable_variables)
        not_float32 = [v.name for v in self.variables if v.dtype != tf.float32]
        if not_float32:
            raise UsageError(f"--arch p2p exchanges float32 parameters; {not_float32[0]} is not")
        self.shapes = [tuple(v.shape) for v in self.variables]
        self.sizes = [int(np.prod(shape)) for shape in self.shapes]
        self.plan = ShardPlan(sum(self.sizes), self.world_size)
        self.loss_fn = keras_loss(tf, self.config.loss)
        self.densified: list[str] = []  # variables whose gradient came as IndexedSlices

        # The parameters live here; the model's variables are refreshed from this vector.
        self.params = np.concatenate([v.numpy().reshape(-1) for v in self.variables])
        # Every rank built the same weights from the seed; the broadcast makes it a fact.
        self.comm.Bcast(self.params, root=0)
        self.partition = PartitionSpec.from_config(self.config)
        if self.partition.active:  # --partition-mb, --priority on: archbench.p2p.pieces
            self.exchange = PieceExchange(
                self.comm, self.plan, self.config.p2p_schedule, self.partition, self.sizes[0]
            )
        else:
            self.exchange = ShardExchange(self.comm, self.plan, self.config.p2p_schedule)
        self._outgoing: np.ndarray | None = None  # pieces: the parameters an averaging sends
        start, stop = self.exchange.own_range
        self.own_params = self.params[start:stop]
        self.sgd = ShardSGD(stop - start, self.config.lr, self.config.momentum)
        self.local_sgd: ShardSGD | None = None  # --sync-every: this worker's own momentum
        self.steps_done = 0
        self.spec = self.config.compression_spec
        self.topk = TopK(self.plan.elements, self.spec) if self.spec.sparse else None

        self._gradients = tf.function(self._flat_gradients)
        # --sparse-exchange sparse: the embeddings' touched rows travel, not the whole tables
        embeddings = sparse_rows.embedding_variables(self.model)
        self.row_sparse = [
            i
            for i, v in enumerate(self.variables)
            if self.config.sparse_exchange == "sparse" and any(v is e for e in embeddings)
        ]
        if self.row_sparse or self.topk is not None:
            # the averaged gradient comes back sparse and every worker updates its whole
            # replica, with momentum for the whole vector
            self.replica_sgd = ShardSGD(self.plan.elements, self.config.lr, self.config.momentum)
            self.full_gradient = np.empty(self.plan.elements, dtype=np.float32)
        self.offsets = np.concatenate(([0], np.cumsum(self.sizes)))
        self._row_gradients = tf.function(self._rows_and_dense)
        self.rows_sent = 0  # touched rows this worker sent (its own shard's included)
        # Each variable's part of the vector as a view in its shape, handed to one compiled
        # call that converts and assigns each: one copy of the vector fewer than splitting a
        # whole-vector tensor (wide_mlp's 80 MB: 40 ms against 57 on an uncapped core; that
        # write-back took 88-236 ms of a 0.82-0.97 s exchange at W = 2 on an emulated node).
        self._param_views = [
            self.params[low:high].reshape(shape)
            for low, high, shape in zip(self.offsets[:-1], self.offsets[1:], self.shapes)
        ]
        self._assign_views = tf.function(
            self._assign_each,
            input_signature=[tf.TensorSpec(shape, tf.float32) for shape in self.shapes],
        )
        self._assign()

    def attach_recorder(self, recorder) -> None:
        super().attach_recorder(recorder)
        self.exchange.recorder = recorder  # its sends, receives and waits

    # --- the step ------------------------------------------------------------------------------
    def _flat_gradients(self, x, y):
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.variables)
        flat = []
        for grad, variable in zip(grads, self.variables):
            if grad is None:
                grad = tf.zeros_like(variable)
            elif isinstance(grad, tf.IndexedSlices):
                self.densified.append(variable.name)  # at trace time: once per variable
                grad = tf.convert_to_tensor(grad)
            flat.append(tf.reshape(grad, [-1]))
        return loss, tf.concat(flat, axis=0)

    def _rows_and_dense(self, x, y):
        """Loss, then per variable: a row-sparse one's (ascending unique rows, their summed
        values), any other's flat gradient."""
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        outputs = []
        for index, grad in enumerate(tape.gradient(loss, self.variables)):
            if index in self.row_sparse:
                rows, position = tf.unique(grad.indices)
                values = tf.math.unsorted_segment_sum(grad.values, position, tf.size(rows))
                order = tf.argsort(rows)
                outputs.append((tf.gather(rows, order), tf.gather(values, order)))
            else:
                outputs.append(tf.reshape(tf.convert_to_tensor(grad), [-1]))
        return loss, outputs

    def _sparse_vector(self, outputs) -> tuple[np.ndarray, np.ndarray]:
        """(ascending int32 indices over the flat vector, values) of this worker's gradient: the
        touched rows of the row-sparse variables, every entry of the others."""
        indices, values = [], []
        for index, output in enumerate(outputs):
            offset = int(self.offsets[index])
            if index in self.row_sparse:
                rows, rows_values = (np.asarray(part) for part in output)
                width = int(np.prod(self.shapes[index][1:]))
                entries = offset + rows[:, None].astype(np.int64) * width + np.arange(width)
                indices.append(entries.reshape(-1))
                values.append(rows_values.reshape(-1))
            else:
                indices.append(np.arange(offset, offset + self.sizes[index]))
                values.append(np.asarray(output))
        return (
            np.concatenate(indices).astype(np.int32),
            np.concatenate(values).astype(np.float32, copy=False),
        )

    def _assign(self) -> None:
        """The parameter vector into the model's variables."""
        self._assign_views(*self._param_views)

    def _assign_each(self, *values) -> None:
        for variable, value in zip(self.variables, values):
            variable.assign(value)

    def _exchange_apply(self, gradient) -> None:
        if self.step_kind != SYNC:
            self._local_apply(gradient)
            return
        if self.partition.active:
            self.exchange.reduce_apply_gather(gradient, self.params, self._update_piece)
        elif self.row_sparse or self.topk is not None:
            selection = gradient if self.row_sparse else self.topk.select(gradient)
            runs = bool(self.row_sparse)  # rows travel as index runs
            self.exchange.reduce_scatter_sparse_mean(*selection, runs=runs)
            self.exchange.allgather_sparse_mean(self.full_gradient, runs=runs)
            with self.recorder.span(UPDATE, "update: SGD on the whole replica", thread="python"):
                self.replica_sgd.apply(self.params, self.full_gradient)
        else:
            averaged = self.exchange.reduce_scatter_mean(gradient)
            with self.recorder.span(UPDATE, "update: SGD on the own shard", thread="python"):
                self.sgd.apply(self.own_params, averaged)
            self.exchange.allgather(self.params)
        with self.recorder.span(UPDATE, "update: parameters into the model", thread="python"):
            self._assign()
        self.steps_done += 1

    def _local_apply(self, gradient: np.ndarray) -> None:
        """--sync-every: this worker's own update of the whole vector, then (average step) the
        parameters averaged over the workers by the sharded exchange."""
        if self.local_sgd is None:
            self._start_local_steps()
        self.local_sgd.apply(self.params, gradient)
        if self.step_kind == AVERAGE and self.partition.active:
            # fresh pieces land in self.params while its old values are still being sent
            if self._outgoing is None:
                self._outgoing = np.empty_like(self.params)
            np.copyto(self._outgoing, self.params)
            self.exchange.reduce_apply_gather(self._outgoing, self.params, self._take_average)
        elif self.step_kind == AVERAGE:
            averaged = self.exchange.reduce_scatter_mean(self.params)
            np.copyto(self.own_params, averaged)
            self.exchange.allgather(self.params)
        self._assign()
        self.steps_done += 1

    def _update_piece(self, low: int, high: int, averaged: np.ndarray) -> None:
        self.sgd.apply_range(self.own_params, averaged, low, high)

    def _take_average(self, low: int, high: int, averaged: np.ndarray) -> None:
        np.copyto(self.own_params[low:high], averaged)

    def _start_local_steps(self) -> None:
        """Each worker's momentum for the whole vector: the owners' shards of the synchronous
        momentum (gathered once, after synchronous warm-up steps), else zero."""
        self.local_sgd = ShardSGD(self.plan.elements, self.config.lr, self.config.momentum)
        if self.steps_by_kind.get(SYNC, 0):
            velocity = self.local_sgd.velocity
            start, stop = self.exchange.own_range
            velocity[start:stop] = self.sgd.velocity
            self.exchange.allgather(velocity)

    def _sparse_step(self, x, y) -> tuple[float, float, float]:
        start = time.perf_counter()
        with self.recorder.call(COMPUTE_WORK):  # --timeline: the call's own span
            loss, outputs = self._row_gradients(x, y)
        gradient = self._sparse_vector(outputs)
        loss = float(loss)
        computed = time.perf_counter()
        self.rows_sent += sum(len(outputs[index][0]) for index in self.row_sparse)
        self._exchange_apply(gradient)
        return loss, computed - start, time.perf_counter() - computed

    def train_step(self, x, y) -> float:
        if self.row_sparse:
            return self._sparse_step(x, y)[0]
        with self.recorder.call(COMPUTE_WORK):  # --timeline: the call's own span
            loss, flat = self._gradients(x, y)
            gradient = np.asarray(flat)  # a view of the tensor's buffer, no copy
        self._exchange_apply(gradient)
        del flat  # the tensor outlived every use of its view
        return float(loss)

    def compute_pass(self, x, y) -> None:
        if self.row_sparse:
            loss, outputs = self._row_gradients(x, y)
            self._sparse_vector(outputs)
            float(loss)
            return
        loss, flat = self._gradients(x, y)
        np.asarray(flat)
        float(loss)

    def probe_step(self, x, y) -> tuple[float, float, float]:
        if self.row_sparse:
            return self._sparse_step(x, y)
        start = time.perf_counter()
        loss, flat = self._gradients(x, y)
        gradient = np.asarray(flat)
        loss = float(loss)
        computed = time.perf_counter()
        self._exchange_apply(gradient)
        done = time.perf_counter()
        del flat
        return loss, computed - start, done - computed

    # --- facts ---------------------------------------------------------------------------------
    def allgather_object(self, value) -> list:
        return list(self.comm.allgather(value))

    def comm_stats(self, steps: int) -> dict:
        done = max(1, steps)  # every step, local ones included (--sync-every)
        return {
            "bytes_sent_per_step": self.exchange.bytes_sent // done,
            "bytes_received_per_step": self.exchange.bytes_received // done,
            "bytes_total": self.exchange.bytes_sent,
            "bytes_received_total": self.exchange.bytes_received,
            "bytes_method": "measured: point-to-point message sizes (sends as posted, "
            "receives from MPI statuses), this worker",
        }

    def extra_record(self) -> dict:
        """Collective (every rank calls it): also checks that all ranks hold the same parameters."""

        steps = max(1, self.steps_done)
        facts = self.allgather_object(
            {
                "digest": parameter_digest(self.weights()),
                "sent": self.exchange.bytes_sent // steps,
                "received": self.exchange.bytes_received // steps,
                "gradient_sent": self.exchange.gradient_bytes_sent,
                "own_entries": self.exchange.own_entries_total,
                "returned_entries": self.exchange.returned_entries_total,
                "dense_returns": self.exchange.dense_returns,
            }
        )
        differing = [
            rank for rank, fact in enumerate(facts) if fact["digest"] != facts[0]["digest"]
        ]
        if differing:
            raise RuntimeError(
                f"p2p ranks ended with different parameters: ranks {differing} differ from rank 0"
            )
        return {
            "controller": "mpi",
            "p2p_schedule": self.config.p2p_schedule,
            "shard_plan": self.plan.as_record(),
            "bytes_sent_per_step_per_rank": [fact["sent"] for fact in facts],
            "bytes_received_per_step_per_rank": [fact["received"] for fact in facts],
            "gradient_encoding": self._gradient_encoding(),
            "sparse_exchange": sparse_rows.record(
                self.config.sparse_exchange,
                [v.name for v in sparse_rows.embedding_variables(self.model)],
                "each owner gets the touched rows (unique, summed) in its shard and every entry "
                "of the other variables, float32 values with int32 index runs, and sends back "
                "the averaged gradient of the rows any worker touched the same way; every "
                "worker updates its whole replica",
                self.rows_sent / steps if self.row_sparse else None,
                **(self._return_record(facts) if self.row_sparse else {}),
            ),
            "densified_gradients": sorted(set(self.densified)),
            "params_identical_across_ranks": True,
            **self._compression_record(facts),
            **({"tensor_partition": self.exchange.as_record()} if self.partition.active else {}),
        }

    def _gradient_encoding(self) -> str:
        if self.row_sparse:
            return (
                "touched rows and dense variables: float32 values and int32 index runs "
                "(start, length), both ways (the averaged gradient back, dense where that is "
                "fewer bytes)"
            )
        if self.topk is not None:
            return (
                "top-k values (float32) and shard indices (int32), both ways (the averaged "
                "gradient of the selected entries back, dense where that is fewer bytes; "
                "IndexedSlices densified)"
            )
        return "dense float32 (IndexedSlices densified)"

    def _compression_record(self, facts: list[dict]) -> dict:
        if self.topk is None:
            return {}

        args = (self.spec, self.plan, self.rank, self.exchange, self.steps_done, facts)
        return {"compression": {**p2p_compression(*args), **self._return_record(facts)}}

    def _return_record(self, facts: list[dict]) -> dict:
        """What the owners sent back after a sparse gradient phase, per rank over the run."""
        return {
            "returned_entries_per_step_per_rank": [
                fact["returned_entries"] / max(1, self.steps_done) for fact in facts
            ],
            "dense_returns_per_rank": [fact["dense_returns"] for fact in facts],
            "update": "each owner sends back its averaged shard at the entries any worker "
            "selected; every worker applies SGD with momentum to its whole replica",
        }
