"""Which parameter server holds which part of which variable.

Two placements:
- `round-robin`: variable i goes whole to server i mod K (what `replica_device_setter` does), so a
  model with one huge matrix leaves one server holding most of the bytes;
- `balanced`: greedy by size. Variables are taken largest first; each goes to the server holding
  the fewest bytes, and when it would carry that server past its fair share (total / K) it is cut
  along its first axis, the rows that fit staying there and the rest going on to the next
  least-loaded server. Every server then holds about total / K bytes.

Pure Python: the plan is decided from shapes alone, the same on every worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SHARDINGS = ("round-robin", "balanced")
# Variables smaller than this are never cut: a cut costs a gather and a split per step.
MIN_CUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class VariableInfo:
    """What placement needs to know about one trainable variable (its name labels it; the plan
    depends on shapes alone, so plans of the same model built twice compare equal)."""

    name: str = field(compare=False)
    shape: tuple[int, ...]
    itemsize: int  # bytes per element

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def row_bytes(self) -> int:
        return math.prod(self.shape[1:]) * self.itemsize if self.shape else self.itemsize

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes


@dataclass(frozen=True)
class Shard:
    """Rows [row_start, row_end) of variable `variable` (its index), held by server `ps_task`."""

    variable: int
    row_start: int
    row_end: int
    ps_task: int
    nbytes: int

    @property
    def rows(self) -> int:
        return self.row_end - self.row_start


@dataclass(frozen=True)
class ShardPlan:
    sharding: str
    num_ps: int
    variables: tuple[VariableInfo, ...]
    shards: tuple[Shard, ...]  # grouped by variable, in row order

    def shards_of(self, variable: int) -> list[Shard]:
        return [s for s in self.shards if s.variable == variable]

    def bytes_per_server(self) -> list[int]:
        held = [0] * self.num_ps
        for shard in self.shards:
            held[shard.ps_task] += shard.nbytes
        return held

    def variables_per_server(self) -> list[int]:
        """How many variables (whole or in part) each server holds."""
        counts = [0] * self.num_ps
        for shard in self.shards:
            counts[shard.ps_task] += 1
        return counts

    @property
    def total_bytes(self) -> int:
        return sum(v.nbytes for v in self.variables)

    @property
    def partitioned(self) -> list[str]:
        """Names of the variables cut into more than one shard (across servers by `balanced`,
        into pieces by `cut_shards`)."""
        return [v.name for i, v in enumerate(self.variables) if len(self.shards_of(i)) > 1]

    def imbalance(self) -> float:
        """Largest server's bytes over the smallest's (inf when a server holds nothing)."""
        held = self.bytes_per_server()
        return max(held) / min(held) if min(held) > 0 else math.inf

    def summary(self) -> dict:
        return {
            "sharding": self.sharding,
            "bytes_per_server": self.bytes_per_server(),
            "variables_per_server": self.variables_per_server(),
            "imbalance": round(self.imbalance(), 4) if math.isfinite(self.imbalance()) else None,
            "partitioned_variables": self.partitioned,
            "shards": [
                {
                    "variable": self.variables[s.variable].name,
                    "rows": [s.row_start, s.row_end],
                    "ps": s.ps_task,
                    "bytes": s.nbytes,
                }
                for s in self.shards
            ],
        }


def round_robin(variables: list[VariableInfo], num_ps: int) -> ShardPlan:
    shards = tuple(Shard(i, 0, v.rows, i % num_ps, v.nbytes) for i, v in enumerate(variables))
    return ShardPlan("round-robin", num_ps, tuple(variables), shards)


def balanced(variables: list[VariableInfo], num_ps: int) -> ShardPlan:
    total = sum(v.nbytes for v in variables)
    fair_share = total / num_ps
    min_cut = max(MIN_CUT_BYTES, fair_share / 16)
    loads = [0] * num_ps
    pieces: list[Shard] = []
    # Largest first; ties broken by position so every worker computes the same plan.
    order = sorted(range(len(variables)), key=lambda i: (-variables[i].nbytes, i))
    for index in order:
        variable = variables[index]
        row = 0
        while row < variable.rows:
            server = min(range(num_ps), key=lambda k: (loads[k], k))
            remaining_rows = variable.rows - row
            room_rows = int((fair_share - loads[server]) // variable.row_bytes)
            # Cut only a large variable whose rest overflows this server's share, and only when
            # at least one row fits; otherwise the rest goes here whole.
            cut = variable.nbytes >= min_cut and 0 < room_rows < remaining_rows
            take = room_rows if cut else remaining_rows
            nbytes = take * variable.row_bytes
            pieces.append(Shard(index, row, row + take, server, nbytes))
            loads[server] += nbytes
            row += take
    pieces.sort(key=lambda s: (s.variable, s.row_start))
    return ShardPlan("balanced", num_ps, tuple(variables), tuple(pieces))


def make_plan(sharding: str, variables: list[VariableInfo], num_ps: int) -> ShardPlan:
    if num_ps < 1:
        raise ValueError(f"need at least one parameter server, got {num_ps}")
    if sharding == "round-robin":
        return round_robin(variables, num_ps)
    if sharding == "balanced":
        return balanced(variables, num_ps)
    raise ValueError(f"unknown sharding {sharding!r} (choose from {', '.join(SHARDINGS)})")


def cut_shards(plan: ShardPlan, max_bytes: int) -> ShardPlan:
    """The plan with every shard larger than `max_bytes` cut along its first axis into pieces
    of at most `max_bytes` (at least one row each), all on the shard's server (--partition-mb):
    the servers hold the same bytes, in more, smaller variables."""
    pieces: list[Shard] = []
    for shard in plan.shards:
        row_bytes = plan.variables[shard.variable].row_bytes
        step = max(1, max_bytes // row_bytes) if row_bytes else shard.rows
        for row in range(shard.row_start, shard.row_end, step):
            end = min(row + step, shard.row_end)
            pieces.append(Shard(shard.variable, row, end, shard.ps_task, (end - row) * row_bytes))
    return ShardPlan(plan.sharding, plan.num_ps, plan.variables, tuple(pieces))


def variable_infos(model) -> list[VariableInfo]:
    """The trainable variables of a Keras model, in creation order."""
    return [
        VariableInfo(v.name, tuple(int(d) for d in v.shape), v.dtype.size)
        for v in model.trainable_variables
    ]


def plan_for_model(model, num_ps: int, sharding: str) -> ShardPlan:
    """The shard plan of a Keras model's variables: what the PS trainer builds and the
    performance model prices."""
    return make_plan(sharding, variable_infos(model), num_ps)


def with_row_placement(plan: ShardPlan, variable: int, servers) -> tuple[ShardPlan, list[int]]:
    """The plan with `variable`'s rows placed row by row (`servers[r]`: the server of row r,
    `archbench.runtime.partition.place_rows`): the servers hold the variable in stored order (rows
    grouped by server, in row order within one), server k a contiguous run of positions. Returns
    the plan and each row's stored position."""
    info = plan.variables[variable]
    counts = [0] * plan.num_ps
    for server in servers:
        counts[int(server)] += 1
    starts = [sum(counts[:k]) for k in range(plan.num_ps)]
    positions, filled = [], list(starts)
    for server in servers:
        positions.append(filled[int(server)])
        filled[int(server)] += 1
    placed = [
        Shard(variable, starts[k], starts[k] + counts[k], k, counts[k] * info.row_bytes)
        for k in range(plan.num_ps)
        if counts[k]
    ]
    shards = [s for s in plan.shards if s.variable != variable] + placed
    shards.sort(key=lambda s: (s.variable, s.row_start))
    return ShardPlan(plan.sharding, plan.num_ps, plan.variables, tuple(shards)), positions
