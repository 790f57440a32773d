"""Sparse push and pull of an embedding's rows (`--sparse-exchange sparse`, synchronous PS).

A worker's step reads only the embedding rows its batch's token ids name, and its gradient
touches only those rows. So, per step and per shard of the embedding:

- pull (at the start of the step, before the forward pass): the ids of the batch that fall in the
  shard go to its server (int64), and the server sends back those rows, which are written into
  the worker's local copy (the other rows of the copy may be stale: no computation reads them);
- push (after the backward pass): the gradient's rows, made unique and summed per row on the
  worker (the same segment sum that densifying does), go with their shard-local int64 indices to
  the shard's `SparseConditionalAccumulator`; once W gradients are in, the chief densifies the
  sum, divides by W and applies the same momentum SGD to the whole shard as the dense exchange.
  A row no worker touched gets a zero gradient, as it does densified, so the update is the dense
  exchange's bit for bit (the momentum still moves every row; only the gradient is sparse).

Where a row lives is given by `row_position`: the embedding is held on the servers in that order
(`archbench.runtime.partition.param`), each shard a contiguous run of positions; `range` is the identity.
Counters on the worker (rows pushed and pulled, per shard) give the bytes the record reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from archbench.runtime.sparse_rows import INDEX_BYTES_PS


@dataclass
class RowShard:
    """One shard of a row-sparse variable: where it lives and its counters."""

    variable: int
    number: int  # the shard's position among the variable's shards
    ps_task: int
    start: int  # positions [start, end) of the stored order
    end: int
    row_bytes: int
    pushed: object = None  # worker-local int64 counter: rows pushed so far
    pulled: object = None  # worker-local int64 counter: rows pulled so far


def row_shards(tf, variable: int, shards: list, row_bytes: int, worker_device) -> list[RowShard]:
    """The RowShards of one row-sparse variable (`shards`: its (shard, master, slot,
    accumulator) entries), each with its two counters on the worker."""
    placed = []
    for number, (shard, _, _, _) in enumerate(shards):
        with tf.device(worker_device):
            pushed, pulled = (
                tf.Variable(tf.constant(0, tf.int64), trainable=False, name=name)
                for name in (f"rows_pushed_{variable}_{number}", f"rows_pulled_{variable}_{number}")
            )
        placed.append(
            RowShard(
                variable,
                number,
                shard.ps_task,
                shard.row_start,
                shard.row_end,
                row_bytes,
                pushed,
                pulled,
            )  # fmt: skip
        )
    return placed


def unique_rows(tf, gradient):
    """(unique row ids, int64; the values of each summed) of an IndexedSlices gradient."""
    rows, position = tf.unique(tf.cast(gradient.indices, tf.int64))
    values = tf.math.unsorted_segment_sum(gradient.values, position, tf.size(rows))
    return rows, values


def row_accumulator(tf, dtype, shape, index: int, number: int):
    """A shard's accumulator of the W workers' rows for one step (summing)."""
    return tf.compat.v1.SparseConditionalAccumulator(
        dtype,
        shape=list(shape),
        shared_name=f"archbench_ps/v{index}/s{number}/row_accumulator",
        name=f"row_accumulator_{index}_{number}",
        reduction_type="SUM",
    )


def in_shard(tf, positions, shard: RowShard):
    """The mask of `positions` that fall in the shard, and those positions local to it."""
    inside = tf.logical_and(positions >= shard.start, positions < shard.end)
    return inside, tf.boolean_mask(positions, inside) - shard.start


def push(tf, shard: RowShard, accumulator, positions, values, local_step, worker_device):
    """This worker's rows of the shard into its accumulator; counts them."""
    with tf.device(worker_device):
        inside, local = in_shard(tf, positions, shard)
        kept = tf.boolean_mask(values, inside)
        counted = shard.pushed.assign_add(tf.cast(tf.size(local), tf.int64))
    with tf.device(f"/job:ps/task:{shard.ps_task}"):
        applied = accumulator.apply_grad(local, kept, local_step=local_step)
    return tf.group(applied, counted)


def take_mean(tf, accumulator, num_workers: int, shape):
    """Chief: the W workers' summed rows, densified over the shard and divided by W."""
    indices, values, _ = accumulator.take_grad(num_workers)
    dense = tf.scatter_nd(indices[:, None], values, shape)
    return dense / tf.constant(num_workers, dense.dtype)


def pull(tf, shard: RowShard, master, local_variable, ids, positions, worker_device):
    """The rows of `ids` (at `positions` of the stored order) that the shard holds, from its
    server into the worker's local copy; counts them."""
    with tf.device(worker_device):
        inside, local = in_shard(tf, positions, shard)
        wanted = tf.boolean_mask(ids, inside)
    with tf.device(f"/job:ps/task:{shard.ps_task}"):
        rows = tf.gather(master, local)
    with tf.device(worker_device):
        written = local_variable.scatter_update(tf.IndexedSlices(rows, wanted))
        counted = shard.pulled.assign_add(tf.cast(tf.size(local), tf.int64))
    return tf.group(written, counted)


def bytes_per_step(shards: list[RowShard], pushed: list[int], pulled: list[int], steps: int):
    """(sent, received, per-server received) bytes per step of the rows: pushes carry a row and
    its index, pull requests an index, pull answers a row."""
    steps = max(1, steps)
    sent = sum(
        (p * (s.row_bytes + INDEX_BYTES_PS) + q * INDEX_BYTES_PS)
        for s, p, q in zip(shards, pushed, pulled)
    )
    received = sum(q * s.row_bytes for s, q in zip(shards, pulled))
    servers: dict[int, float] = {}
    for shard, p, q in zip(shards, pushed, pulled):
        load = p * (shard.row_bytes + INDEX_BYTES_PS) + q * INDEX_BYTES_PS
        servers[shard.ps_task] = servers.get(shard.ps_task, 0) + load / steps
    return sent / steps, received / steps, servers


def traffic_per_server(
    shards: list[RowShard], pushed: list[int], pulled: list[int], steps: int, num_ps: int
) -> list[float]:
    """Row bytes per step between one worker and each server, both ways: pushed rows and their
    indices, pull requests (indices) and the rows pulled."""
    traffic = [0.0] * num_ps
    for shard, p, q in zip(shards, pushed, pulled):
        both = p * (shard.row_bytes + INDEX_BYTES_PS) + q * (INDEX_BYTES_PS + shard.row_bytes)
        traffic[shard.ps_task] += both / max(1, steps)
    return traffic
