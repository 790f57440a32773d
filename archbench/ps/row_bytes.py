"""What a sparse-rows run's rows cost (`archbench.ps.rows`), from the workers' row counters.

Each worker counts, per shard of a row-sparse variable, the rows it pushed and pulled
(`counts`: one [pushed, pulled] pair per shard, in the graph's `row_shards` order). From them:
this worker's bytes per step (the record's `comm.bytes_*`), what each server received from all
workers, each worker's traffic with each server, and the record's `comm.sparse_exchange`.
"""

from __future__ import annotations

from archbench.ps.rows import RowShard, bytes_per_step, traffic_per_server
from archbench.ps.sharding import ShardPlan

HOW = (
    "each worker pushes the rows it touched (unique, summed) with int64 indices to a "
    "SparseConditionalAccumulator per shard and pulls only the rows its batch reads"
)


def _split(counts: list | None, shards: list[RowShard]) -> tuple[list[int], list[int]]:
    counts = counts or [[0, 0]] * len(shards)
    return [c[0] for c in counts], [c[1] for c in counts]


def _dense_bytes(plan: ShardPlan, shards: list[RowShard]) -> int:
    """The bytes of the variables that travel whole (every one but the row-sparse ones)."""
    row_sparse = {shard.variable for shard in shards}
    return plan.total_bytes - sum(plan.variables[i].nbytes for i in row_sparse)


def worker_stats(plan: ShardPlan, shards: list[RowShard], counts: list | None, steps: int) -> dict:
    """This worker's bytes per step: the other variables dense, plus its counted rows."""
    dense = _dense_bytes(plan, shards)
    sent, received, _ = bytes_per_step(shards, *_split(counts, shards), steps)
    return {
        "bytes_sent_per_step": round(dense + sent),
        "bytes_received_per_step": round(dense + received),
        "bytes_total": round((dense + sent) * steps),
        "bytes_method": "counted: the rows pushed (row + int64 index) and pulled (int64 "
        "index sent, row received) on this worker; every other variable dense float32, "
        "pushed and pulled once per step",
    }


def received_per_server(
    held: list[int], shards: list[RowShard], reports: list[dict], workers: int
) -> list[int]:
    """Bytes each server received per step from all workers: every worker's push of the dense
    shards it holds (`held`), plus the rows and indices the workers counted."""
    received = [workers * b for b in held]
    for shard in shards:
        received[shard.ps_task] -= workers * (shard.end - shard.start) * shard.row_bytes
    for report in reports:
        _, _, servers = bytes_per_step(
            shards, *_split(report["row_counts"], shards), report["steps"]
        )
        for task, load in servers.items():
            received[task] += load
    return [round(b) for b in received]


def traffic(shards: list[RowShard], reports: list[dict], num_ps: int) -> dict:
    """Each worker's row bytes per step to and from each server, and the share that went to
    servers other than the worker's partner (server k mod K for worker k: the one beside it when
    each worker has a server on its host)."""
    matrix = [
        traffic_per_server(shards, *_split(r["row_counts"], shards), r["steps"], num_ps)
        for r in sorted(reports, key=lambda r: r["worker"])
    ]
    total = sum(map(sum, matrix))
    partner = sum(row[worker % num_ps] for worker, row in enumerate(matrix))
    return {
        "row_bytes_per_worker_per_server_per_step": [[round(b) for b in r] for r in matrix],
        "row_bytes_off_partner_share": round(1 - partner / total, 6) if total else None,
    }


def record(
    plan: ShardPlan,
    shards: list[RowShard],
    counts: list | None,
    steps: int,
    reports: list[dict],
) -> dict:
    """The sparse part of the record's `comm.sparse_exchange` (rows per step, traffic)."""
    pushed, pulled = _split(counts, shards)
    steps = max(1, steps)
    return {
        "sparse_variables": sorted({plan.variables[s.variable].name for s in shards}),
        "rows_per_step": sum(pushed) / steps,
        "rows_pulled_per_step": sum(pulled) / steps,
        **traffic(shards, reports, plan.num_ps),
    }
