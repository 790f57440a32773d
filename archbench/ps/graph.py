"""The TensorFlow graph a parameter-server worker runs (TF1-style, on the distributed runtime).

Where things live:
- on the parameter servers (`/job:ps/task:k`): the master copy of every parameter, cut into the
  shards of the `ShardPlan`; when synchronous also the momentum next to each shard, one
  `ConditionalAccumulator` per shard and the queues that pace the workers;
- on each worker (`/job:worker/task:i`): a Keras copy of the model (read-only between pulls) on
  which forward and backward passes run; when asynchronous also the worker's own momentum.

One step, in one `session.run`: compute gradients on the local copy -> push one slice per shard
to the server holding it -> the server-side update -> pull the fresh shards into the local copy.
So push and pull each move the model's bytes once per step, and the probe can time compute
(phase 1) apart from push + update + pull (phase 2).

Synchronous (the sync semantics): each shard's accumulator averages exactly W gradients of the
same step; the chief takes the average, applies momentum SGD on the servers, bumps the global
step and hands one token to each other worker's own queue. A worker pulls only after it holds
its token, so every worker starts every step from the same parameters. The update is Keras
SGD's, op for op (v = -g*lr + v*m; var += v): TF's `ApplyMomentum` (accum = m*accum + g;
var -= lr*accum) is the same update for a constant lr but rounds differently, enough to move a
50-step run's test loss by ~2e-4 relative; with Keras's arithmetic a synchronous run matches
`single` to float32 summation order.

Top-k (`--compression topk`, synchronous only): each worker selects the top-k entries of its
whole flattened gradient plus its error-feedback residual (`archbench.compression.topk.TfTopK`),
and pushes to each shard only the selected entries that fall in it, values and int64 indices,
into the shard's `SparseConditionalAccumulator` (summing; the chief divides by W, so the
average is the dense one's: unselected entries count as zeros). The chief applies the same
momentum SGD to the dense average; the pull stays dense.

Synchronous with `--sync-every H` > 1 (local SGD, `archbench.runtime.localsgd`): a local step applies
the worker's own gradient to its local copy with its own momentum (v = -g*lr + v*m on the
worker, at the full lr: the average of W such models follows synchronous SGD on the average
gradient), and nothing travels. Every H-th step, after its local update, the worker pushes its
parameter change since the last pull (local copy - anchor, the values that pull brought) into a
second `ConditionalAccumulator` per shard; the chief takes the mean of the W changes and adds it
to the shard (no momentum on the servers), then hands out the tokens as above, and every worker
pulls the new parameters (which also become its anchor). That is the model average: anchor +
mean(local_i - anchor). The servers' momentum is used by the synchronous warm-up steps only; at
the first local step after them each worker pulls it once as its own starting momentum.

Asynchronous (Downpour): each worker pushes its update as soon as it has it, no barrier; the
server adds it to the shard in one locked read-modify-write and the global step counts updates.
Staleness = how many other updates landed between the worker's last pull and its own update.
Each worker keeps its own momentum, v_i = -g_i*(lr/W) + v_i*m, and pushes v_i. The sum over
workers is then exactly synchronous momentum SGD on the average gradient, so the modes differ
only by staleness and an epoch is comparable across them. Measured on mlp, 1 epoch, 2 workers,
lr 0.05, momentum 0.9 (sync: 0.834 test accuracy): one shared momentum on the servers applied
at the full lr reaches 0.64 (W times the step per epoch, on stale parameters); at lr/W 0.80-0.815
(the shared momentum decays W times per round); momentum per worker 0.825-0.834.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archbench.compression.topk import TfTopK
from archbench.ps import rows
from archbench.ps.cluster_spec import ClusterLayout
from archbench.ps.sharding import ShardPlan, cut_shards, plan_for_model, with_row_placement
from archbench.runtime.sparse_rows import embedding_variables
from archbench.workloads.models import build_model
from archbench.workloads.task import label_dtype, per_sample_loss

DONE_QUEUE = "archbench_ps_done"
REPORT_QUEUE = "archbench_ps_reports"
TOKEN_QUEUE = "archbench_ps_token_{worker}"
GLOBAL_STEP = "archbench_ps/global_step"
READY_FLAG = "archbench_ps/ready"


def done_queue(tf, ps_task: int, capacity: int):
    """The queue on server `ps_task` into which each worker drops its index when it finishes."""
    with tf.device(f"/job:ps/task:{ps_task}"):
        return tf.queue.FIFOQueue(
            capacity, [tf.int32], shapes=[[]], shared_name=DONE_QUEUE, name="done_queue"
        )


@dataclass
class ExchangeOps:
    """Push + server-side update + pull for one source of gradients."""

    run: object  # op/tensor to run
    update_step: object  # global step value right after this worker's update was applied
    pulled_step: object  # global step value read with the pull


@dataclass
class LocalStepOps:
    """--sync-every > 1: local updates, and the averaging exchange of parameter changes."""

    fused: object  # compute + this worker's own update (fetch with the loss)
    probe: object  # phase 2 of a local probe: the own update from the gradient buffers
    average_fused: ExchangeOps  # compute + own update + push change, server average, pull
    average_probe: ExchangeOps  # phase 2 of an averaging probe
    pull_momentum: object  # the servers' momentum into this worker's own (once, after warm-up)


@dataclass
class WorkerGraph:
    graph: object
    plan: ShardPlan
    model: object  # the local Keras copy (graph mode)
    x: object
    y: object
    local_step: object  # fed: the step every worker is on (sync accumulators drop older ones)
    loss: object
    fused: ExchangeOps  # compute + push + update + pull
    compute_into_buffers: object  # phase 1 of a probe
    probe_exchange: ExchangeOps  # phase 2 of a probe
    late_token: tuple | None  # sync, not chief: (size, dequeue) of this worker's token queue
    init_feeds: dict = field(default_factory=dict)  # placeholder -> variable index, row range
    dispatch: object = None  # a fetch on this worker with no computation: a session call's cost
    init_servers: object = None  # initialises every server-side variable (chief only)
    mark_ready: object = None
    is_ready: object = None
    init_local: object = None
    pull: object = None
    pulled_step: object = None
    shard_values: list = field(default_factory=list)  # per variable: list of shard tensors
    local_non_trainable: list = field(default_factory=list)
    release_servers: object = None
    report: object = None  # placeholder: this worker's pickled statistics
    send_report: object = None
    take_report: tuple = ()  # (size, dequeue): the chief takes the other workers' reports
    local: LocalStepOps | None = None  # --sync-every > 1
    # --sparse-exchange sparse (archbench.ps.rows): the loss the fused step fetches (its forward
    # pass waits for the row pull), the row pull alone (a probe's), the row shards and counters
    fused_loss: object = None
    pull_rows: object = None
    row_shards: list = field(default_factory=list)
    row_counts: object = None
    row_positions: dict = field(default_factory=dict)  # variable index -> stored position per row


def build_worker_graph(
    tf,
    *,
    model_name: str,
    input_shape: tuple[int, ...],
    input_dtype,
    num_classes: int,
    seed: int,
    vocab_size: int | None = None,
    sharding: str,
    layout: ClusterLayout,
    worker_index: int,
    sync: bool,
    lr: float,
    momentum: float,
    compression=None,
    local_steps: bool = False,
    sparse_rows: bool = False,
    row_servers: np.ndarray | None = None,
    partition=None,
    loss_name: str = "crossentropy",
    label_shape: tuple[int, ...] = (),
) -> WorkerGraph:
    """`compression`: a CompressionSpec, or None (dense pushes); only `topk` changes the graph.
    `sparse_rows`: push and pull only the embedding rows a batch touches (`archbench.ps.rows`);
    `row_servers`: the server of each embedding row (`archbench.runtime.partition.place_rows`; default:
    the shard plan's row ranges). `partition`: a PartitionSpec, or None: shards cut into pieces
    of at most its bytes (each pushed, updated and pulled by its own ops), pulls chained first
    layers first (priority; `archbench.runtime.tensor_partition`)."""

    sparse = compression is not None and compression.sparse and sync
    if local_steps and not sync:
        raise ValueError("local steps (--sync-every > 1) need synchronous parameter servers")
    if sparse_rows and (not sync or local_steps or sparse):
        raise ValueError("sparse rows need synchronous servers, no local steps and no top-k")

    num_workers = layout.num_workers
    is_chief = worker_index == 0
    worker_device = f"/job:worker/task:{worker_index}/device:CPU:0"
    graph = tf.Graph()
    with graph.as_default():
        # ---- the worker's local copy and its forward/backward pass
        with tf.device(worker_device):
            model = build_model(model_name, input_shape, num_classes, seed, vocab_size)
        plan = plan_for_model(model, layout.num_ps, sharding)
        ordered = partition is not None and partition.priority
        if partition is not None and partition.max_bytes is not None:
            plan = cut_shards(plan, partition.max_bytes)
        with tf.device(worker_device):
            before = {id(u) for u in model.updates}
            x = tf.compat.v1.placeholder(input_dtype, (None, *input_shape), name="x")
            y = tf.compat.v1.placeholder(label_dtype(tf, loss_name), (None, *label_shape), name="y")
            local_step = tf.compat.v1.placeholder(tf.int64, (), name="local_step")
            logits = model(x, training=True)
            # batch-norm moving statistics stay on each worker (as with Horovod, no sync BN)
            statistics_updates = [u for u in model.updates if id(u) not in before]
            loss = tf.reduce_mean(per_sample_loss(tf, loss_name, y, logits))
            grads = [
                tf.convert_to_tensor(g)  # embedding gradients arrive as IndexedSlices
                for g in tf.gradients(loss, model.trainable_variables)
            ]
            embeddings = embedding_variables(model) if sparse_rows else []
            row_sparse = {
                i
                for i, v in enumerate(model.trainable_variables)
                if any(v is e for e in embeddings)
            }
            with tf.control_dependencies(statistics_updates):
                loss = tf.identity(loss, name="loss")
            buffers = [
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"grad_buffer_{i}")
                for i, v in enumerate(model.trainable_variables)
            ]
            with tf.control_dependencies([loss]):
                fill_buffers = tf.group(*[b.assign(g) for b, g in zip(buffers, grads)])
            selector = None
            if sparse:
                elements = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
                selector = TfTopK(tf, elements, compression, name="archbench_topk")

        row_positions: dict[int, np.ndarray] = {}
        if row_servers is not None:
            if len(row_sparse) != 1:
                raise ValueError("a row placement needs sparse rows and one embedding")
            (embedding,) = row_sparse
            plan, positions = with_row_placement(plan, embedding, row_servers)
            row_positions[embedding] = np.asarray(positions, dtype=np.int64)
        # ---- server-side state
        with tf.device("/job:ps/task:0"):
            global_step = tf.Variable(tf.constant(0, tf.int64), trainable=False, name=GLOBAL_STEP)
            ready = tf.Variable(tf.constant(False), trainable=False, name=READY_FLAG)
        init_feeds: dict = {}
        # per variable: (shard, var, momentum slot or None, accumulator or None)
        shard_vars: list[list] = []
        delta_accumulators: list[list] = []  # --sync-every: per variable, one per shard
        for index, info in enumerate(plan.variables):
            per_variable, per_delta = [], []
            for number, shard in enumerate(plan.shards_of(index)):
                shape = (shard.rows, *info.shape[1:])
                dtype = model.trainable_variables[index].dtype
                with tf.device(worker_device):
                    initial = tf.compat.v1.placeholder(dtype, shape, name=f"init_{index}_{number}")
                init_feeds[initial] = (index, shard.row_start, shard.row_end)
                with tf.device(f"/job:ps/task:{shard.ps_task}"):
                    master = tf.Variable(
                        initial, trainable=False, name=f"archbench_ps/v{index}/s{number}"
                    )
                    slot = accumulator = None
                    if sync:
                        slot = tf.Variable(
                            tf.zeros(shape, dtype),
                            trainable=False,
                            name=f"archbench_ps/v{index}/s{number}/momentum",
                        )
                        accumulator = (
                            rows.row_accumulator(tf, dtype, shape, index, number)
                            if index in row_sparse
                            else _accumulator(tf, dtype, shape, index, number, sparse)
                        )
                    if local_steps:
                        per_delta.append(
                            tf.compat.v1.ConditionalAccumulator(
                                dtype,
                                shape=shape,
                                shared_name=f"archbench_ps/v{index}/s{number}/delta_accumulator",
                                name=f"delta_accumulator_{index}_{number}",
                            )
                        )
                per_variable.append((shard, master, slot, accumulator))
            shard_vars.append(per_variable)
            delta_accumulators.append(per_delta)
        server_initializers = [
            variable.initializer
            for per_variable in shard_vars
            for (_, master, slot, _) in per_variable
            for variable in (master, slot)
            if variable is not None
        ]
        init_servers = tf.group(global_step.initializer, *server_initializers, name="init_servers")
        mark_ready = ready.assign(True)
        is_ready = tf.compat.v1.is_variable_initialized(ready)

        token_queues = {}
        if sync:
            with tf.device("/job:ps/task:0"):
                for worker in range(1, num_workers):
                    token_queues[worker] = tf.queue.FIFOQueue(
                        2,
                        [tf.int64],
                        shapes=[[]],
                        shared_name=TOKEN_QUEUE.format(worker=worker),
                        name=f"token_queue_{worker}",
                    )

        anchors = None
        if not sync or local_steps:
            # asynchronous, or local steps: each worker's own momentum (see the module's docstring)
            with tf.device(worker_device):
                velocities = [
                    tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"velocity_{i}")
                    for i, v in enumerate(model.trainable_variables)
                ]
        if local_steps:
            with tf.device(worker_device):  # the parameters the last pull brought
                anchors = [
                    tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"anchor_{i}")
                    for i, v in enumerate(model.trainable_variables)
                ]

        row_shards: dict[int, list] = {}
        fused_loss, fused_grads, pull_rows, ids, positions, tables = loss, grads, None, None, {}, {}
        if row_sparse:
            with tf.device(worker_device):  # the rows this batch reads: its token ids
                ids = tf.unique(tf.reshape(tf.cast(x, tf.int64), [-1])).y
                tables = {
                    index: tf.constant(order, tf.int64) for index, order in row_positions.items()
                }
                positions = {
                    index: tf.gather(tables[index], ids) if index in tables else ids
                    for index in row_sparse
                }
            pulls = []
            for index in sorted(row_sparse):
                row_shards[index] = rows.row_shards(
                    tf, index, shard_vars[index], plan.variables[index].row_bytes, worker_device
                )
                for row_shard, (_, master, _, _) in zip(row_shards[index], shard_vars[index]):
                    variable = model.trainable_variables[index]
                    pulls.append(
                        rows.pull(
                            tf, row_shard, master, variable, ids, positions[index], worker_device
                        )
                    )
            pull_rows = tf.group(*pulls, name="pull_rows")
            with tf.device(worker_device), tf.control_dependencies([pull_rows]):
                # the fused step's forward pass reads the rows just pulled
                fused_logits = model(x, training=True)
                fused_loss = tf.reduce_mean(
                    per_sample_loss(tf, loss_name, y, fused_logits), name="fused_loss"
                )
                fused_grads = [
                    g if i in row_sparse else tf.convert_to_tensor(g)
                    for i, g in enumerate(tf.gradients(fused_loss, model.trainable_variables))
                ]

        def push_rows(index: int, gradient) -> tuple[list, list]:
            """Sparse push of a row-sparse variable's gradient (an IndexedSlices, or a dense
            buffer whose touched rows are the batch's ids) and the chief's update per shard."""
            pushes, applies = [], []
            with tf.device(worker_device):
                if isinstance(gradient, tf.IndexedSlices):
                    touched, values = rows.unique_rows(tf, gradient)
                    where = tf.gather(tables[index], touched) if index in tables else touched
                else:
                    values, where = tf.gather(gradient, ids), positions[index]
            for row_shard, (shard, master, slot, accumulator) in zip(
                row_shards[index], shard_vars[index]
            ):
                pushes.append(
                    rows.push(tf, row_shard, accumulator, where, values, local_step, worker_device)
                )
                if is_chief:
                    with tf.device(f"/job:ps/task:{shard.ps_task}"):
                        mean = rows.take_mean(tf, accumulator, num_workers, master.shape)
                        applies.append(_apply_momentum(tf, master, slot, mean, lr, momentum))
            return pushes, applies

        def exchange(gradients: list, averaging: bool = False) -> ExchangeOps:
            pushes, applies = [], []
            if sparse:
                return sparse_exchange(gradients)
            if not sync:
                with tf.device(worker_device):
                    gradients = [
                        _momentum_step(tf, velocity, g, lr / num_workers, momentum)
                        for velocity, g in zip(velocities, gradients)
                    ]
            for index, per_variable in enumerate(shard_vars):
                gradient = gradients[index]
                if index in row_sparse:
                    pushed, applied = push_rows(index, gradient)
                    pushes += pushed
                    applies += applied
                    continue
                if len(per_variable) > 1:
                    with tf.device(worker_device):  # cut here: each server gets only its rows
                        pieces = tf.split(gradient, [s.rows for (s, _, _, _) in per_variable])
                else:
                    pieces = [gradient]
                for number, (piece, (shard, master, slot, accumulator)) in enumerate(
                    zip(pieces, per_variable)
                ):
                    with tf.device(f"/job:ps/task:{shard.ps_task}"):
                        if averaging:  # the mean of the W workers' parameter changes
                            changes = delta_accumulators[index][number]
                            pushes.append(changes.apply_grad(piece, local_step=local_step))
                            if is_chief:
                                mean = changes.take_grad(num_workers)
                                applies.append(master.assign_add(mean, read_value=False))
                        elif sync:
                            pushes.append(accumulator.apply_grad(piece, local_step=local_step))
                            if is_chief:
                                average = accumulator.take_grad(num_workers)
                                applies.append(
                                    _apply_momentum(tf, master, slot, average, lr, momentum)
                                )
                        else:
                            applies.append(_add_atomic(tf, master, piece))
            return finish_exchange(pushes, applies)

        def sparse_exchange(gradients: list) -> ExchangeOps:
            """Top-k: each shard gets the selected entries that fall in it (flat positions in
            the shard, int64, and values); the chief densifies the sum and divides by W."""
            pushes, applies = [], []
            with tf.device(worker_device):
                flat = tf.concat([tf.reshape(g, [-1]) for g in gradients], axis=0)
                indices, values, updates = selector.select(flat)
            offset = 0
            for index, per_variable in enumerate(shard_vars):
                row = int(np.prod(plan.variables[index].shape[1:]))
                for shard, master, slot, accumulator in per_variable:
                    low = offset + shard.row_start * row
                    high = offset + shard.row_end * row
                    with tf.device(worker_device), tf.control_dependencies(updates):
                        inside = tf.logical_and(indices >= low, indices < high)
                        local = tf.cast(tf.boolean_mask(indices, inside) - low, tf.int64)
                        kept = tf.boolean_mask(values, inside)
                    with tf.device(f"/job:ps/task:{shard.ps_task}"):
                        pushes.append(accumulator.apply_grad(local, kept, local_step=local_step))
                        if is_chief:
                            taken, summed, _ = accumulator.take_grad(num_workers)
                            dense = tf.scatter_nd(taken[:, None], summed, [high - low])
                            average = tf.reshape(
                                dense / tf.constant(num_workers, dense.dtype), master.shape
                            )
                            applies.append(_apply_momentum(tf, master, slot, average, lr, momentum))
                offset += int(np.prod(plan.variables[index].shape))
            return finish_exchange(pushes, applies)

        def pull_fresh(skip=frozenset()):
            """The servers' fresh values into this worker's copy (and anchors): `_pull`."""
            return _pull(
                tf, model, shard_vars, global_step, worker_device, anchors,
                ordered=ordered, skip=skip, row_positions=row_positions,
            )  # fmt: skip

        def finish_exchange(pushes: list, applies: list) -> ExchangeOps:
            with tf.device("/job:ps/task:0"):
                if sync and is_chief:
                    with tf.control_dependencies(pushes + applies):
                        update_step = global_step.assign_add(1, read_value=True)
                    handed = [q.enqueue(update_step) for q in token_queues.values()]
                    with tf.control_dependencies(handed):
                        update_step = tf.identity(update_step)
                elif sync:
                    with tf.control_dependencies(pushes):
                        update_step = token_queues[worker_index].dequeue()
                else:
                    with tf.control_dependencies(applies):
                        update_step = global_step.assign_add(1, read_value=True)
            with tf.control_dependencies([update_step]):
                # row-sparse variables: their rows are pulled as the next batch needs them
                pull, pulled_step = pull_fresh(skip=row_sparse)
            return ExchangeOps(pull, update_step, pulled_step)

        fused = exchange(fused_grads)
        with tf.control_dependencies([fill_buffers]):
            compute_into_buffers = tf.identity(loss)
        with tf.device(worker_device):
            dispatch = tf.constant(0.0)
        probe_exchange = exchange([b.read_value() for b in buffers])
        pull, pulled_step = pull_fresh()
        local = None
        if local_steps:

            def own_update(gradients: list):
                with tf.device(worker_device):
                    return tf.group(
                        *[
                            variable.assign_add(
                                _momentum_step(tf, velocity, g, lr, momentum), read_value=False
                            )
                            for variable, velocity, g in zip(
                                model.trainable_variables, velocities, gradients
                            )
                        ]
                    )

            def changes_after(update) -> list:
                with tf.device(worker_device), tf.control_dependencies([update]):
                    return [
                        variable.read_value() - anchor.read_value()
                        for variable, anchor in zip(model.trainable_variables, anchors)
                    ]

            from_buffers = [b.read_value() for b in buffers]
            local = LocalStepOps(
                fused=own_update(grads),
                probe=own_update(from_buffers),
                average_fused=exchange(changes_after(own_update(grads)), averaging=True),
                average_probe=exchange(changes_after(own_update(from_buffers)), averaging=True),
                pull_momentum=_pull_momentum(tf, velocities, shard_vars, worker_device),
            )
        late_token = None
        if sync and not is_chief:
            # for a step whose run gave up waiting for its token (the chief was busy): the
            # gradient is already in, so only the token (then a pull) remains
            with tf.device("/job:ps/task:0"):
                late_token = (
                    token_queues[worker_index].size(),
                    token_queues[worker_index].dequeue(),
                )

        local_variables = [*model.variables, *buffers]
        if not sync or local_steps:
            local_variables += velocities
        if local_steps:
            local_variables += anchors
        local_variables += selector.variables if selector is not None else []
        all_row_shards = [s for index in sorted(row_shards) for s in row_shards[index]]
        local_variables += [c for s in all_row_shards for c in (s.pushed, s.pulled)]
        row_counts = [[s.pushed.read_value(), s.pulled.read_value()] for s in all_row_shards]
        init_local = tf.group(*[v.initializer for v in local_variables], name="init_local")
        shard_values = [
            [master.read_value() for (_, master, _, _) in per_variable]
            for per_variable in shard_vars
        ]
        with tf.device(worker_device):
            local_non_trainable = [v.read_value() for v in model.non_trainable_variables]
        release_servers = tf.group(
            *[
                done_queue(tf, k, capacity=num_workers).enqueue(tf.constant(worker_index))
                for k in range(layout.num_ps)
            ]
        )
        with tf.device(worker_device):
            report = tf.compat.v1.placeholder(tf.string, (), name="report")
        with tf.device("/job:ps/task:0"):
            reports = tf.queue.FIFOQueue(
                num_workers, [tf.string], shapes=[[]], shared_name=REPORT_QUEUE, name="reports"
            )
            send_report = reports.enqueue(report)
            take_report = (reports.size(), reports.dequeue())
    graph.finalize()  # nothing may add ops per step (that would leak memory and time)
    return WorkerGraph(
        graph=graph,
        plan=plan,
        model=model,
        x=x,
        y=y,
        local_step=local_step,
        loss=loss,
        fused=fused,
        compute_into_buffers=compute_into_buffers,
        dispatch=dispatch,
        probe_exchange=probe_exchange,
        late_token=late_token,
        init_feeds=init_feeds,
        init_servers=init_servers,
        mark_ready=mark_ready,
        is_ready=is_ready,
        init_local=init_local,
        pull=pull,
        pulled_step=pulled_step,
        shard_values=shard_values,
        local_non_trainable=local_non_trainable,
        release_servers=release_servers,
        report=report,
        send_report=send_report,
        take_report=take_report,
        local=local,
        fused_loss=fused_loss,
        pull_rows=pull_rows,
        row_shards=all_row_shards,
        row_counts=row_counts or None,
        row_positions=row_positions,
    )


def _accumulator(tf, dtype, shape, index: int, number: int, sparse: bool):
    """The shard's accumulator of one step's W gradients: dense (averaging), or for top-k a
    sparse one over the flattened shard that sums (the chief divides by W)."""
    name = f"archbench_ps/v{index}/s{number}/accumulator"
    if sparse:
        return tf.compat.v1.SparseConditionalAccumulator(
            dtype,
            shape=[int(np.prod(shape))],
            shared_name=name + "/sparse",
            name=f"sparse_accumulator_{index}_{number}",
            reduction_type="SUM",
        )
    return tf.compat.v1.ConditionalAccumulator(
        dtype, shape=shape, shared_name=name, name=f"accumulator_{index}_{number}"
    )


def _momentum_step(tf, velocity, gradient, lr: float, momentum: float):
    """Keras SGD's velocity update, op for op: v = -g*lr + v*m (returns the new v)."""
    return velocity.assign(
        -gradient * tf.constant(lr, velocity.dtype)
        + velocity.read_value() * tf.constant(momentum, velocity.dtype)
    )


def _apply_momentum(tf, master, slot, gradient, lr: float, momentum: float):
    """Keras SGD's update (v = -g*lr + v*m; var += v), so that a synchronous run rounds exactly
    as `single` does (TF's ApplyMomentum is the same update, rounded otherwise)."""
    return master.assign_add(_momentum_step(tf, slot, gradient, lr, momentum), read_value=False)


def _add_atomic(tf, master, update):
    """var += update as one locked read-modify-write: concurrent asynchronous updates of the same
    shard all land (none overwrites another)."""
    return tf.raw_ops.ResourceApplyGradientDescent(
        var=master.handle,
        alpha=tf.constant(-1.0, master.dtype),
        delta=update,
        use_locking=True,
    )


def _pull(
    tf,
    model,
    shard_vars,
    global_step,
    worker_device,
    anchors=None,
    ordered=False,
    skip=frozenset(),
    row_positions=None,
):
    """Fresh server values into the local copy (each shard crosses the network once), and into
    the anchors where there are some (--sync-every: the values local changes are measured from).
    `ordered` (--priority on): variable i is read only once variable i-1 is in place, so the
    first layers' parameters arrive first; otherwise every read runs at once. Variables in `skip`
    (row-sparse ones: their rows are pulled as batches need them) stay; those in `row_positions`
    are stored row-placed and put back in row order."""
    assigns = []
    for index, (local, per_variable) in enumerate(zip(model.trainable_variables, shard_vars)):
        if index in skip:
            continue
        with tf.control_dependencies(assigns[-1:] if ordered else []):
            value = _joined(tf, per_variable, lambda entry: entry[1], worker_device)
        if row_positions and index in row_positions:
            with tf.device(worker_device):
                value = tf.gather(value, tf.constant(row_positions[index], tf.int64))
        with tf.device(worker_device):
            assigns.append(local.assign(value, read_value=False))
            if anchors is not None:
                assigns.append(anchors[index].assign(value, read_value=False))
    with tf.device("/job:ps/task:0"):
        pulled_step = global_step.read_value()
    return tf.group(*assigns), pulled_step


def _pull_momentum(tf, velocities, shard_vars, worker_device):
    """The servers' momentum of every shard into this worker's own momentum."""
    assigns = []
    for velocity, per_variable in zip(velocities, shard_vars):
        value = _joined(tf, per_variable, lambda entry: entry[2], worker_device)
        with tf.device(worker_device):
            assigns.append(velocity.assign(value, read_value=False))
    return tf.group(*assigns)


def _joined(tf, per_variable, server_variable, worker_device):
    """One variable whole on the worker: each shard's `server_variable(entry)` read on its
    server (so each crosses the network once), joined on the worker."""
    parts = []
    for entry in per_variable:
        with tf.device(f"/job:ps/task:{entry[0].ps_task}"):
            parts.append(server_variable(entry).read_value())
    with tf.device(worker_device):
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)


def initial_feed(graph: WorkerGraph, initial_weights: list[np.ndarray]) -> dict:
    """Feeds that give every server shard its rows of the chief's initial weights (a row-placed
    variable in its stored order)."""
    stored = list(initial_weights)
    for index, positions in graph.row_positions.items():
        stored[index] = np.empty_like(initial_weights[index])
        stored[index][positions] = initial_weights[index]
    return {
        placeholder: stored[index][start:end]
        for placeholder, (index, start, end) in graph.init_feeds.items()
    }


def in_row_order(graph: WorkerGraph, index: int, stored: np.ndarray) -> np.ndarray:
    """A variable as read from its shards (stored order) back in row order."""
    positions = graph.row_positions.get(index)
    return stored if positions is None else stored[positions]
