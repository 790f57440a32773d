"""What a cluster is asked to be: validated name, node names, bandwidth and slots."""

from __future__ import annotations

import re
from dataclasses import dataclass

from archbench.bandwidth import Bandwidth
from archbench.errors import UsageError

DEFAULT_NAME = "emulated"
DEFAULT_PREFIX = "node"
DEFAULT_BANDWIDTH = "1gbit"
MAX_NODES = 64
# 10 ms: the step-time spread of a millisecond step is far lower than under the kernel's default
# 100 ms period (a throttled task waits up to a whole period), and the quotas of a few tenths of
# a core stay well above the kernel's 1 ms minimum. Measured: archbench/cluster/README.md.
DEFAULT_CFS_PERIOD_US = 10_000
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
    cfs_period_us: int = DEFAULT_CFS_PERIOD_US

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{k}" for k in range(1, self.nodes + 1)]


def bandwidth_bits_per_s(bandwidth: str) -> float:
    """Bits per second of a tc rate string such as `200mbit` (decimal units, as tc reads them)."""
    return Bandwidth.tc_rate(bandwidth, check_range=False).bits_per_s


def parse_cpus_per_node(text: str | float | None, nodes: int) -> float | None:
    """`--cpus-per-node`: a number of CPUs, `off`, or None for the default fair share."""
    from archbench.cluster import cgroups

    if text is None:
        return cgroups.default_cpus_per_node(nodes)
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
    cpus = parse_cpus_per_node(cpus_per_node, nodes)
    period_us = DEFAULT_CFS_PERIOD_US if cfs_period_ms is None else int(round(cfs_period_ms * 1000))
    if cpus is not None:
        from archbench.cluster import cgroups

        cgroups.check_budget(cpus, nodes, period_us)
    return ClusterSpec(
        name=name,
        nodes=nodes,
        bandwidth=bandwidth,
        prefix=prefix,
        slots=slots,
        cpus_per_node=cpus,
        cfs_period_us=period_us,
    )
