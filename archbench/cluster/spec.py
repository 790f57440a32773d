"""What a cluster is asked to be: validated name, node names, bandwidth and slots."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from archbench.bandwidth import Bandwidth
from archbench.cluster.idlewait import DEFAULT_NAP_US, MAX_NAP_US
from archbench.errors import UsageError

DEFAULT_NAME = "emulated"
DEFAULT_PREFIX = "node"
DEFAULT_BANDWIDTH = "1gbit"
MAX_NODES = 64
# The CFS period: 10 ms, or longer where the budget's quota (CPUs x period) would fall under the
# kernel's 1 ms minimum. Measured on four 0.45-CPU nodes with a busy loop each: 10 ms and 20 ms
# periods deliver 0.96-1.00 of the budget, 5 ms 0.88, 2.5 ms 0.75 (quotas below the kernel's 5 ms
# bandwidth slice are handed out unevenly); the kernel's default 100 ms delivers it too, but
# stalls a throttled rank for up to 55 ms in mid-step (cnn: step p90 62 ms against 22 ms at
# 10 ms). Details: archbench/cluster/README.md.
DEFAULT_PERIOD_US = 10_000
CPU_BUDGET_OFF = "off"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_PREFIX_RE = re.compile(r"^[a-z][a-z-]{0,9}$")


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    nodes: int
    bandwidth: str
    prefix: str = DEFAULT_PREFIX
    slots: int = 1
    # CPU budget of every node (None: no budget, an explicitly unfaithful cluster) and the CFS
    # period over which the kernel enforces it.
    cpus_per_node: float | None = None
    cfs_period_us: int = DEFAULT_PERIOD_US
    # Microseconds an idle wait of the nodes' processes sleeps instead of spinning (0: spin).
    idle_nap_us: int = DEFAULT_NAP_US
    slurm: bool = False  # munged, slurmctld and a slurmd per node (`up --slurm`)

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{k}" for k in range(1, self.nodes + 1)]


def bandwidth_bits_per_s(bandwidth: str) -> float:
    """Bits per second of a tc rate string such as `200mbit` (decimal units, as tc reads them)."""
    return Bandwidth.tc_rate(bandwidth, check_range=False).bits_per_s


def auto_period_us(cpus: float) -> int:
    """10 ms, or the shortest period (in 0.5 ms steps) whose quota cpus x period is >= 1 ms."""
    return max(DEFAULT_PERIOD_US, math.ceil(1000 / cpus / 500) * 500)


def budgets_of_other_clusters(name: str) -> float:
    """CPUs the budgets of the other emulated clusters that are up hold (their nodes x budget)."""
    from archbench.cluster.state import is_up, list_states

    return sum(
        state.cpus_per_node * len(state.nodes)
        for state in list_states()
        if state.name != name and state.cpus_per_node and is_up(state)
    )


def parse_cpus_per_node(
    text: str | float | None, nodes: int, committed: float = 0.0
) -> float | None:
    """`--cpus-per-node`: a number of CPUs, `off`, or None for the default fair share of the
    CPUs that the budgets of other clusters (`committed`) leave."""
    from archbench.cluster import cgroups
    from archbench.launch import usable_cores

    if text is None:
        return cgroups.default_cpus_per_node(nodes, usable_cores() - committed)
    if str(text).strip().lower() == CPU_BUDGET_OFF:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(
            f"--cpus-per-node {text!r} is not a number of CPUs (e.g. 0.45) or 'off'"
        ) from None
    if not value > 0 or value != value or value == float("inf"):
        raise UsageError(f"--cpus-per-node {text} must be a positive number of CPUs")
    return value


def make_spec(
    name: str,
    nodes: int,
    bandwidth: str,
    prefix: str,
    slots: int,
    cpus_per_node: str | float | None = None,
    cfs_period_ms: float | None = None,
    idle_nap_us: int | None = None,
    slurm: bool = False,
) -> ClusterSpec:
    """Validate the `cluster up` arguments; raise UsageError naming the first bad one.
    `cpus_per_node` None means the default fair share; "off" means no budget."""
    if not _NAME_RE.match(name):
        raise UsageError(
            f"cluster name {name!r} must be 1-40 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
        )
    if not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"--nodes {nodes} is out of range 1..{MAX_NODES}")
    if not _PREFIX_RE.match(prefix):
        raise UsageError(f"node prefix {prefix!r} must be 1-10 lower-case letters or '-'")
    if not 1 <= slots <= 64:
        raise UsageError(f"--slots {slots} is out of range 1..64")
    bandwidth = Bandwidth.tc_rate(bandwidth).text
    nap_us = DEFAULT_NAP_US if idle_nap_us is None else idle_nap_us
    if not 0 <= nap_us <= MAX_NAP_US:
        raise UsageError(f"--idle-nap-us {nap_us} is out of range 0..{MAX_NAP_US} (0: waits spin)")
    committed = budgets_of_other_clusters(name)
    cpus = parse_cpus_per_node(cpus_per_node, nodes, committed)
    if cfs_period_ms is not None:
        period_us = int(round(cfs_period_ms * 1000))
    else:
        period_us = auto_period_us(cpus) if cpus is not None else DEFAULT_PERIOD_US
    if cpus is not None:
        from archbench.cluster import cgroups

        cgroups.check_budget(cpus, nodes, period_us, committed=committed)
    return ClusterSpec(
        name=name,
        nodes=nodes,
        bandwidth=bandwidth,
        prefix=prefix,
        slots=slots,
        cpus_per_node=cpus,
        cfs_period_us=period_us,
        idle_nap_us=nap_us,
        slurm=slurm,
    )
