"""`ps`: parameter servers over TensorFlow gRPC, synchronous or asynchronous, 1..K servers.

Ranks 0..K-1 serve (each a `tf.distribute.Server` holding its shards of the parameters and their
optimizer state); ranks K..N-1 train (the first is the chief: it initialises the servers,
evaluates and writes the record). The graph and its two modes are described in
`archbench.ps.graph`; start-up, shutdown and failures in `archbench.ps.lifecycle`.

Collectives (`allgather_object`) go over MPI when the job was started by an MPI launcher, and
over the tasks' own gRPC servers when it was described by TF_CONFIG. A worker's first collective
after training first tells every server it is done, so the servers leave `serve()` (blocked in a
gRPC dequeue, not spinning in MPI) exactly when the last worker has finished.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from functools import cached_property

import numpy as np

from archbench.common.errors import RunFailed, UsageError
from archbench.compression import CompressionSpec
from archbench.compression.record import ps_stats
from archbench.ps import row_bytes, wire
from archbench.ps.cluster_spec import (
    ClusterLayout,
    layout_from_tf_config,
    layout_over_mpi,
    unreachable,
    wait_until_listening,
)
from archbench.ps.graph import (
    WorkerGraph,
    build_worker_graph,
    done_queue,
    in_row_order,
    initial_feed,
)
from archbench.ps.lifecycle import (
    GrpcAllgather,
    explain_failure,
    open_session,
    serve_until_released,
    session_config,
    start_server,
    take_when_there,
)
from archbench.ps.sharding import ShardPlan
from archbench.runtime import sparse_rows, warmgroup
from archbench.runtime.emulation import factor as dilation_factor
from archbench.runtime.launch import threads_per_process
from archbench.runtime.localsgd import AVERAGE, SYNC
from archbench.runtime.partition import data_partition, place_rows
from archbench.runtime.tensor_partition import PartitionSpec
from archbench.trainers.base import Trainer
from archbench.workloads.models import build_for_data, model_source

READY_POLL_S = 0.1


class PSTrainer(Trainer):
    arch = "ps"
    SETTINGS_READ = Trainer.SETTINGS_READ + (
        "loss",  # archbench.workloads.task
        "ps_timeout_s",
        "threads",
        "model",
        "seed",
        "ps_sharding",
        "sync",
        "lr",
        "momentum",
        "param_partition",
        "data_partition",
        "sparse_exchange",
        "compression_spec",
        "partition_mb",  # PartitionSpec.from_config
        "priority",  # PartitionSpec.from_config
    )

    def __init__(self, config, place, data):
        super().__init__(config, place, data)
        self.layout: ClusterLayout | None = None
        self.plan: ShardPlan | None = None
        self.server = None
        self.session = None
        self.graph: WorkerGraph | None = None
        self._mpi = None
        self._grpc_allgather: GrpcAllgather | None = None
        self._steps = 0
        self._pulled_step = 0
        self._staleness: Counter = Counter()
        self._released = False
        self._reports: list[dict] = []
        self._serve_facts: dict = {}
        self._setup_s: float | None = None
        self._waited_for_chief = False
        self._averagings = 0  # --sync-every: averaging exchanges done (their accumulator step)
        self._local_started = False
        self._momentum_pulled = False
        self._row_counts: list | None = None  # --sparse-exchange sparse: [pushed, pulled] per shard

    # --- roles -------------------------------------------------------------------------------
    @property
    def num_ps(self) -> int:
        return self.config.num_ps

    @property
    def num_workers(self) -> int:
        return self.world_size - self.num_ps

    @property
    def worker_index(self) -> int:
        return self.rank - self.num_ps

    @property
    def is_worker(self) -> bool:
        return self.rank >= self.num_ps

    @property
    def timeout_s(self) -> float:
        # A virtual duration: on a dilated node D times longer in real time.
        return self.config.ps_timeout_s * dilation_factor()

    # --- set-up ------------------------------------------------------------------------------
    def setup(self) -> None:
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        self.tf = tf
        started = time.perf_counter()
        threads = threads_per_process(self.config.threads, self.place.local_size)
        group = warmgroup.current()
        kept = group.shared.get("ps_cluster") if group is not None else None
        if kept is not None:
            # a warm group's later run: the same tasks on the same ports, their resource
            # containers emptied after the previous run (finish)
            self._mpi, self.layout, self.server = kept
        else:
            self.layout = self._discover_layout()
            self.server = start_server(tf, self.layout, threads)
            if group is not None and self._mpi is not None:
                group.shared["ps_cluster"] = (self._mpi, self.layout, self.server)
        # No session may be opened before every server listens: a gRPC channel that once found
        # a port closed backs off, and a later transfer over it fails ("failed to connect").
        wait_until_listening(
            [task for task in self.layout.tasks if task.rank != self.rank],
            self.timeout_s,
            f"{self.layout.me.describe()} waited for the other tasks",
        )
        if self.layout.source == "tf_config":
            self._grpc_allgather = GrpcAllgather(
                tf, self.layout, self.server.target, threads, self.timeout_s
            )
        if self.is_worker:
            self._setup_worker(tf, threads)
        else:
            self._setup_server(tf, threads)
        self._setup_s = time.perf_counter() - started

    def _discover_layout(self) -> ClusterLayout:
        if self.place.launcher == "tf_config":
            layout = layout_from_tf_config(self.num_ps)
        elif self.place.launcher in ("mpirun", "slurm", "horovodrun"):
            # deferred: mpi4py.rc must be set before MPI is imported
            import mpi4py

            # MPI_Finalize waits for every rank; at the exit of a failed rank that would hang the
            # job. Finalize explicitly in finish() instead: a rank that fails exits without it,
            # and the launcher then ends the whole job.
            mpi4py.rc.finalize = False
            # deferred: mpi4py.rc must be set before MPI is imported
            from mpi4py import MPI

            self._mpi = MPI.COMM_WORLD
            if self._mpi.Get_size() != self.world_size:
                raise RunFailed(
                    f"MPI sees {self._mpi.Get_size()} process(es) but {self.place.launcher} "
                    f"started {self.world_size}: start --arch ps with mpirun, or describe the "
                    "cluster with TF_CONFIG"
                )
            layout = layout_over_mpi(self._mpi.allgather, self.rank, self.num_ps)
        else:
            raise UsageError(
                "--arch ps needs several processes: start it with mpirun -np N (N > --num-ps) "
                "or give each process a TF_CONFIG"
            )
        if layout.rank != self.rank or len(layout.tasks) != self.world_size:
            raise RunFailed(
                f"cluster layout says rank {layout.rank} of {len(layout.tasks)}, "
                f"the launcher said {self.rank} of {self.world_size}"
            )
        return layout

    def _setup_server(self, tf, threads: int) -> None:
        me = self.layout.me
        graph = tf.Graph()
        with graph.as_default():
            queue = done_queue(tf, me.index, capacity=self.num_workers)
            self._done = (queue.size(), queue.dequeue())
        graph.finalize()
        self.session = open_session(
            tf,
            self.server.target,
            graph,
            session_config(tf, threads, self.timeout_s, [me.device]),
            self._done[0],
            self.layout,
            f"starting {me.describe()}",
            self.timeout_s,
        )

    def _setup_worker(self, tf, threads: int) -> None:
        config, data = self.config, self.data
        input_dtype = (
            tf.float32
            if data.scale != 1.0 or data.x_train.dtype.kind == "f"
            else tf.as_dtype(data.x_train.dtype)
        )
        self.graph = build_worker_graph(
            tf,
            model_name=config.model,
            input_shape=data.input_shape,
            input_dtype=input_dtype,
            num_classes=data.num_classes,
            vocab_size=getattr(data, "vocab_size", None),
            seed=config.seed,
            sharding=config.ps_sharding,
            layout=self.layout,
            worker_index=self.worker_index,
            sync=config.sync,
            lr=config.lr,
            momentum=config.momentum,
            compression=self.compression,
            local_steps=self.schedule.local_steps,
            sparse_rows=self.sparse_rows,
            row_servers=self._row_placement.servers if self._row_placement else None,
            partition=self.partition if self.partition.active else None,
            loss_name=config.loss,
            label_shape=tuple(getattr(data, "y_train", np.empty((0,))).shape[1:]),
        )
        self.plan = self.graph.plan
        # The eager copy: the seed's initial values (the same as every other architecture's) and
        # the model the chief evaluates. Built after the graph copy, because Keras switches its
        # layer classes to graph mode while a model is built in a tf.Graph, which leaves models
        # built earlier unusable eagerly.
        self.model = build_for_data(config.model, data, config.seed)
        self.session = open_session(
            tf,
            self.server.target,
            self.graph.graph,
            session_config(tf, threads, self.timeout_s, ["/job:ps", self.layout.me.device]),
            self.graph.is_ready,
            self.layout,
            f"{self.layout.me.describe()} connected to the parameter servers",
            self.timeout_s,
        )
        graph = self.graph
        if self.is_chief:
            weights = [v.numpy() for v in self.model.trainable_variables]
            self._run(graph.init_servers, "initialising the servers", initial_feed(graph, weights))
            self._run(graph.mark_ready, "initialising the servers")
        else:
            self._wait_for_chief()
        self._run(graph.init_local, "initialising the local copy")
        self._load_saved_statistics()
        _, self._pulled_step = self._run(
            [graph.pull, graph.pulled_step], "pulling the initial parameters"
        )

    def _load_saved_statistics(self) -> None:
        """A saved model's non-trainable weights (batch-norm statistics) into the local copy,
        whose initialisers know only the architecture (the trainable ones come from the
        servers)."""
        graph_model = self.graph.model
        if not model_source(self.config.model).user or len(
            graph_model.non_trainable_weights
        ) != len(self.model.non_trainable_weights):
            return
        feeds = {
            variable.initializer.inputs[1]: value.numpy()  # the initial value, fed
            for variable, value in zip(
                graph_model.non_trainable_weights, self.model.non_trainable_weights
            )
        }
        if feeds:
            initializers = [v.initializer for v in graph_model.non_trainable_weights]
            self._run(initializers, "loading the saved model's statistics", feeds)

    def _wait_for_chief(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not self._run(self.graph.is_ready, "waiting for the chief to initialise"):
            if time.monotonic() > deadline:
                chief = self.layout.worker_tasks()[0]
                raise RunFailed(
                    f"{chief.describe()} did not initialise the parameters within "
                    f"--ps-timeout {self.timeout_s:g} s"
                )
            time.sleep(READY_POLL_S)

    def _run(self, fetches, doing: str, feed: dict | None = None):
        try:
            return self.session.run(fetches, feed_dict=feed)
        except self.tf.errors.OpError as exc:
            raise explain_failure(self.tf, exc, self.layout, doing, self.timeout_s) from None

    # --- training ----------------------------------------------------------------------------
    def _feed(self, x, y) -> dict:
        graph = self.graph
        return {graph.x: x.numpy(), graph.y: y.numpy(), graph.local_step: self._steps}

    def _account(self, update_step, pulled_step) -> None:
        # other workers' updates that landed between this worker's pull and its own update
        self._staleness[int(update_step) - 1 - int(self._pulled_step)] += 1
        self._pulled_step = int(pulled_step)
        self._steps += 1

    def train_step(self, x, y) -> float:
        if self.step_kind != SYNC:
            return self._local_step(x, y)
        graph = self.graph
        ops = graph.fused
        loss, update_step, pulled_step = self._exchange(
            [graph.fused_loss, ops.update_step, ops.pulled_step, ops.run],
            f"training step {self._steps}",
            self._feed(x, y),
        )
        self._account(update_step, pulled_step)
        return float(loss)

    def compute_pass(self, x, y) -> None:
        # overwrites the gradient buffers, which the next probe fills again before it pushes
        self._run(self.graph.compute_into_buffers, "compute window", self._feed(x, y))

    def dispatch_pass(self, x, y) -> None:
        self._run(self.graph.dispatch, "dispatch window", self._feed(x, y))

    # --- local steps (--sync-every > 1) --------------------------------------------------------
    def _start_local_steps(self) -> None:
        """At the first local step (only then), after synchronous warm-up steps, the servers'
        momentum becomes this worker's own (without warm-up steps both are zero)."""
        if self._local_started:
            return
        self._local_started = True
        if self._steps > 0:
            self._run(self.graph.local.pull_momentum, "pulling the servers' momentum")
            self._momentum_pulled = True

    def _local_step(self, x, y) -> float:
        self._start_local_steps()
        local = self.graph.local
        feed = self._feed(x, y)
        if self.step_kind != AVERAGE:
            loss, _ = self._run(
                [self.graph.loss, local.fused], f"training step {self._steps}", feed
            )
            self._steps += 1
            return float(loss)
        ops = local.average_fused
        feed[self.graph.local_step] = self._averagings
        loss, update_step, pulled_step = self._exchange(
            [self.graph.loss, ops.update_step, ops.pulled_step, ops.run],
            f"training step {self._steps} (averaging)",
            feed,
        )
        self._averagings += 1
        self._account(update_step, pulled_step)
        return float(loss)

    def _local_exchange(self) -> None:
        """Phase 2 of a local or averaging probe (the gradient is in the buffers)."""
        self._start_local_steps()
        local = self.graph.local
        if self.step_kind != AVERAGE:
            self._run(local.probe, f"training step {self._steps} (local update)")
            self._steps += 1
            return
        ops = local.average_probe
        _, update_step, pulled_step = self._exchange(
            [ops.run, ops.update_step, ops.pulled_step, ops.run],
            f"training step {self._steps} (averaging)",
            {self.graph.local_step: self._averagings},
        )
        self._averagings += 1
        self._account(update_step, pulled_step)

    def probe_step(self, x, y) -> tuple[float, float, float]:
        graph = self.graph
        if self.step_kind != SYNC:
            feed = self._feed(x, y)
            start = time.perf_counter()
            loss = self._run(graph.compute_into_buffers, f"training step {self._steps}", feed)
            computed = time.perf_counter()
            self._local_exchange()
            done = time.perf_counter()
            return float(loss), computed - start, done - computed
        ops = graph.probe_exchange
        feed = self._feed(x, y)
        exchange_feed = {graph.local_step: self._steps}
        pulled_rows_s = 0.0
        if graph.pull_rows is not None:  # sparse rows: the batch's rows first (exchange time)
            started = time.perf_counter()
            self._run(graph.pull_rows, f"training step {self._steps} (pull rows)", feed)
            pulled_rows_s = time.perf_counter() - started
            exchange_feed[graph.x] = feed[graph.x]
        start = time.perf_counter()
        loss = self._run(graph.compute_into_buffers, f"training step {self._steps}", feed)
        computed = time.perf_counter()
        _, update_step, pulled_step = self._exchange(
            [ops.run, ops.update_step, ops.pulled_step, ops.run],
            f"training step {self._steps} (push, update, pull)",
            exchange_feed,
        )
        done = time.perf_counter()
        self._account(update_step, pulled_step)
        return float(loss), computed - start, done - computed + pulled_rows_s

    def _exchange(self, fetches: list, doing: str, feed: dict) -> tuple:
        """Runs a step's exchange: fetches = [first, update_step, pulled_step, op] ->
        (first, update_step, pulled_step).

        A synchronous non-chief worker waits in its step for the chief's token; when the chief is
        busy for longer than --ps-timeout (evaluating a large test set), the run gives up although
        nothing is wrong. Then, if every task still answers, the worker waits on for the token
        (its gradient is already in) as long as the chief and the servers are alive. A push or
        pull that alone outlasts --ps-timeout still fails the run (on the chief too): the
        timeout must exceed one step's communication.
        """
        tf = self.tf
        traced = self.recorder.session_run_options()  # --timeline: the step's statistics
        try:
            return tuple(self.session.run(fetches, feed_dict=feed, **traced)[:3])
        except tf.errors.OpError as exc:
            late = self.graph.late_token
            others = [task for task in self.layout.tasks if task.rank != self.rank]
            timed_out = isinstance(exc, tf.errors.DeadlineExceededError)
            if not timed_out or late is None or unreachable(others, timeout=0.5):
                raise explain_failure(tf, exc, self.layout, doing, self.timeout_s) from None
        if not self._waited_for_chief:
            self._waited_for_chief = True
            print(
                f"archbench: {self.layout.me.describe()} waited more than --ps-timeout "
                f"{self.timeout_s:g} s for the chief at step {self._steps}; the chief and the "
                "servers still answer, so it waits on (said once)",
                file=sys.stderr,
                flush=True,
            )
        watched = [*self.layout.ps_tasks(), self.layout.worker_tasks()[0]]
        update_step = take_when_there(
            tf,
            self.session,
            late,
            lambda: watched,
            self.layout,
            f"{doing}: waiting for the chief's update",
            self.timeout_s,
        )
        _, pulled_step = self._run([self.graph.pull, self.graph.pulled_step], doing)
        return float("nan"), update_step, pulled_step

    def weights(self) -> list[np.ndarray]:
        """The parameters as the servers hold them now."""
        shards = self._run(self.graph.shard_values, "reading the parameters from the servers")
        return [
            in_row_order(self.graph, index, parts[0] if len(parts) == 1 else np.concatenate(parts))
            for index, parts in enumerate(shards)
        ]

    def eval_model(self):
        for variable, value in zip(self.model.trainable_variables, self.weights()):
            variable.assign(value)
        statistics = self._run(self.graph.local_non_trainable, "reading the local statistics")
        for variable, value in zip(self.model.non_trainable_variables, statistics):
            variable.assign(value)
        return self.model

    # --- serving and the end -----------------------------------------------------------------
    def serve(self) -> None:
        started = time.perf_counter()
        order = serve_until_released(self.tf, self.session, self._done, self.layout, self.timeout_s)
        self._serve_facts = {"served_s": time.perf_counter() - started, "finish_order": order}

    def _release_servers(self) -> None:
        """Reports this worker's statistics and tells every server it is done (once)."""
        if self._released or not self.is_worker:
            return
        self._released = True
        graph = self.graph
        if graph.row_counts is not None:
            self._row_counts = self._run(graph.row_counts, "reading the row counters")
        mine = self._own_report()
        if self.is_chief:
            self._reports = [mine]
            others = {task.index: task for task in self.layout.worker_tasks()[1:]}
            for _ in range(self.num_workers - 1):
                blob = take_when_there(
                    self.tf,
                    self.session,
                    graph.take_report,
                    lambda: list(others.values()),
                    self.layout,
                    "the chief waited for the other workers to finish",
                    self.timeout_s,
                )
                report = _report_from(blob)
                others.pop(report["worker"], None)
                self._reports.append(report)
        else:
            self._run(graph.send_report, "reporting to the chief", {graph.report: wire.dumps(mine)})
        self._run(graph.release_servers, "telling the servers this worker is done")

    def _own_report(self) -> dict:
        return {
            "worker": self.worker_index,
            "steps": self._steps,
            "staleness": dict(self._staleness),
            "last_global_step": self._pulled_step,
            "row_counts": self._row_counts,
        }

    def allgather_object(self, value) -> list:
        if self.is_worker and self._steps > 0:
            self._release_servers()
        if self._mpi is not None:
            return self._mpi.allgather(value)
        return self._grpc_allgather(value)

    def finish(self) -> None:
        if self.is_worker and self._steps > 0:
            self._release_servers()
        if warmgroup.current() is not None and self._mpi is not None:
            self._empty_servers()
            return  # MPI stays up for the group's next run
        if self._mpi is not None:
            # deferred: importing mpi4py.MPI initialises MPI; only a job that uses it reaches here
            from mpi4py import MPI

            if not MPI.Is_finalized():
                MPI.Finalize()

    def _empty_servers(self) -> None:
        """Between the runs of a warm group: every task's resource containers (variables, their
        optimizer slots, queues, accumulators) are cleared, so the next run's graph finds the
        servers as freshly started ones are. TensorFlow cannot stop a gRPC server, but it can
        reset what it holds: one reset, through any task's master, clears every task of the
        cluster. Collective: every rank closes its sessions first."""
        if self.session is not None:
            self.session.close()
            self.session = None
        self._mpi.Barrier()
        if self.rank == 0:
            self.tf.compat.v1.Session.reset(self.server.target)
        self._mpi.Barrier()

    # --- what the record says ----------------------------------------------------------------
    def _exchanges(self) -> int:
        """Steps that pushed and pulled (every step unless --sync-every > 1)."""
        return self.steps_by_kind.get(SYNC, 0) + self.steps_by_kind.get(AVERAGE, 0)

    @cached_property
    def _row_placement(self):
        """--param-partition other than range: the server of each embedding row (computed by
        every worker alike, after the data partition it may follow)."""
        method = self.config.param_partition
        if method == "range" or not self.sparse_rows:
            return None

        config, data = self.config, self.data
        cut = data_partition(config.data_partition, data, self.num_workers, config.seed)
        return place_rows(method, data.vocab_size, self.num_ps, data, cut)

    @property
    def sparse_rows(self) -> bool:
        return self.config.sparse_exchange == "sparse"

    def comm_stats(self, steps: int) -> dict:
        pushed = self.plan.total_bytes  # one dense gradient per step
        pulled = self.plan.total_bytes  # one fresh copy of every shard per step
        if self.graph.row_shards:
            return row_bytes.worker_stats(self.plan, self.graph.row_shards, self._row_counts, steps)
        if self._topk_spec is not None:
            return ps_stats(self._topk_spec, self.plan.total_bytes // 4, pulled, steps)
        stats = {
            "bytes_sent_per_step": pushed,
            "bytes_received_per_step": pulled,
            "bytes_total": pushed * steps,
            "bytes_method": "analytic: each worker pushes every shard's gradient and pulls every "
            "shard once per step (dense float32)",
        }
        if self.schedule.local_steps:
            stats = self._with_local_steps(stats, steps)
        return stats

    def _with_local_steps(self, synchronous: dict, steps: int) -> dict:
        """--sync-every > 1: the synchronous steps push and pull as counted above; an averaging
        step pushes every shard's parameter change and pulls every shard (dense float32); local
        steps move nothing; where local steps followed synchronous ones each worker also pulled
        the servers' momentum once. Per step = over every step."""
        changes = pulled = self.plan.total_bytes
        syncs, averages = self.steps_by_kind.get(SYNC, 0), self.steps_by_kind.get(AVERAGE, 0)
        sent = synchronous["bytes_sent_per_step"] * syncs + changes * averages
        received = synchronous["bytes_received_per_step"] * syncs + pulled * averages
        received += self.plan.total_bytes if self._momentum_pulled else 0
        return {
            **synchronous,
            "bytes_sent_per_step": round(sent / steps) if steps else 0,
            "bytes_received_per_step": round(received / steps) if steps else 0,
            "bytes_total": sent,
            "bytes_received_total": received,
            "bytes_method": synchronous["bytes_method"] + " on synchronous steps; every shard's "
            "parameter change pushed and every shard pulled on averaging steps; averaged over "
            "every step",
        }

    @cached_property
    def partition(self) -> PartitionSpec:
        return PartitionSpec.from_config(self.config)

    @property
    def compression(self) -> CompressionSpec:
        return self.config.compression_spec

    @cached_property
    def _topk_spec(self) -> CompressionSpec | None:
        """The top-k method when this run pushes sparse gradients (synchronous only), else None."""
        spec = self.compression
        return spec if spec.sparse and self.config.sync else None

    def _received_per_server(self, held: list[int], per_step) -> list | None:
        """Bytes each server receives per step from all workers (top-k: unknown)."""
        if self._topk_spec is not None:
            return None
        if not self.graph.row_shards:
            return [per_step(self.num_workers * b) for b in held]

        shards, workers = self.graph.row_shards, self.num_workers
        return row_bytes.received_per_server(held, shards, self._reports, workers)

    def _sparse_record(self) -> dict:
        embeddings = [v.name for v in sparse_rows.embedding_variables(self.model)]
        facts = {"sparse_variables": embeddings, "rows_per_step": None}
        if self.graph.row_shards:
            args = (self.plan, self.graph.row_shards, self._row_counts, self._steps, self._reports)
            facts = row_bytes.record(*args)
        return sparse_rows.record(self.config.sparse_exchange, how=row_bytes.HOW, **facts)

    def extra_record(self) -> dict:
        if not self.is_chief:
            return {}
        workers = self.num_workers
        held = self.plan.bytes_per_server()
        staleness = Counter()
        for report in self._reports:
            staleness.update({int(k): v for k, v in report["staleness"].items()})
        values = np.repeat(list(staleness.keys()), list(staleness.values()))
        pushed = self.comm_stats(self._steps)["bytes_sent_per_step"]
        # --sync-every > 1: the per-step bytes below average over every step, local ones included
        exchanged, steps = self._exchanges(), self._steps

        def per_step(count: int) -> int:
            if not self.schedule.local_steps or exchanged == steps or not steps:
                return count
            return round(count * exchanged / steps)

        placement = self._row_placement
        return {
            "controller": "grpc",
            "sparse_exchange": self._sparse_record(),
            "param_partition": placement.record(self.num_ps)
            if placement is not None
            else {"param_partition": self.config.param_partition, "param_partition_s": 0.0},
            "ps": {
                "mode": "sync" if self.config.sync else "async",
                # sync: momentum on the servers at lr on the average gradient; async: each worker's
                # own momentum at lr / W (their sum is the synchronous update); --sync-every > 1:
                # each worker's own momentum in local steps, the servers' in the warm-up steps
                "momentum_on": "workers"
                if self.schedule.local_steps or not self.config.sync
                else "servers",
                "update_lr": self.config.lr if self.config.sync else self.config.lr / workers,
                "cluster_spec": {**self.layout.tf_cluster(), "source": self.layout.source},
                "sharding": self.plan.summary(),
                "bytes_held_per_server": held,
                "optimizer_bytes_per_server": held if self.config.sync else [0] * len(held),
                "bytes_served_per_server_per_step": [per_step(workers * b) for b in held],
                # top-k: how the kept entries fall on the servers depends on the gradients
                "bytes_received_per_server_per_step": self._received_per_server(held, per_step),
                "bytes_received_all_servers_per_step": workers * pushed,
                "bytes_pushed_per_worker_per_step": pushed,
                "bytes_pulled_per_worker_per_step": per_step(self.plan.total_bytes),
                "staleness": {
                    "median": float(np.median(values)) if len(values) else None,
                    "max": int(values.max()) if len(values) else None,
                    "mean": float(values.mean()) if len(values) else None,
                    "updates": int(len(values)),
                    "histogram": {str(k): v for k, v in sorted(staleness.items())},
                },
                "global_step": max(r["last_global_step"] for r in self._reports),
                "steps_per_worker": {str(r["worker"]): r["steps"] for r in self._reports},
                "setup_s": self._setup_s,
            },
            **({"tensor_partition": self._partition_record()} if self.partition.active else {}),
        }

    def _partition_record(self) -> dict:
        """--partition-mb, --priority on: what the graph cut and ordered (archbench.runtime.tensor_partition)."""
        per_variable = [len(self.plan.shards_of(i)) for i in range(len(self.plan.variables))]
        return {
            **self.partition.record(per_variable),
            "pieces_per_variable": per_variable,
            "pull_order": "chained first layers first (control dependencies)"
            if self.partition.priority
            else "all pulls at once",
            "engine_overlap": "each piece is its own push (as soon as backward produces its "
            "variable's gradient), accumulator, server update and pull; the next step's forward "
            "pass is a separate session run that starts after the whole pull",
            "overlap_measured": None,
        }


_REPORT_KEYS = {"worker", "steps", "staleness", "last_global_step", "row_counts"}


def _report_from(blob: bytes) -> dict:
    """A worker's report to the chief (`_own_report`), from the wire; RunFailed for bytes that
    are not one (the report queue's port takes anyone's bytes)."""
    try:
        report = wire.loads_wire(blob)
    except wire.WireError as exc:
        raise RunFailed(f"a worker's report that is not archbench's: {exc}") from None
    if (
        not isinstance(report, dict)
        or set(report) != _REPORT_KEYS
        or not all(isinstance(report[key], int) for key in ("worker", "steps", "last_global_step"))
        or not isinstance(report["staleness"], dict)
    ):
        raise RunFailed("a worker's report that is not archbench's (its keys or types differ)")
    return report
