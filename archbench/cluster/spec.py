"""What a cluster is asked to be: validated name, node names, bandwidth, slots and dilation."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from archbench.cluster import cgroups
from archbench.cluster import dilation as dilation_of
from archbench.cluster.dilation import Dilation
from archbench.cluster.idlewait import DEFAULT_NAP_US, MAX_NAP_US
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError
from archbench.runtime import virtualtime

DEFAULT_NAME = "emulated"
DEFAULT_PREFIX = "node"
DEFAULT_BANDWIDTH = "1gbit"
MAX_NODES = 64
# Whole-string patterns (fullmatch): a name that ends in a newline would reach sshd_config.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
PREFIX_PATTERN = re.compile(r"[a-z][a-z-]{0,9}")


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    nodes: int
    bandwidth: Bandwidth  # a tc rate (Bandwidth.tc_rate), its text as the user wrote it, normalised
    prefix: str = DEFAULT_PREFIX
    slots: int = 1
    # How the nodes are slowed down (None: no caps at all, an explicitly unfaithful cluster
    # whose nodes share the machine's cores).
    dilation: Dilation | None = None
    # Microseconds an idle wait of the nodes' processes sleeps instead of spinning (0: spin).
    idle_nap_us: int = DEFAULT_NAP_US
    slurm: bool = False  # munged, slurmctld and a slurmd per node (`up --slurm`)

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{k}" for k in range(1, self.nodes + 1)]


def check_name(name: str) -> str:
    """`name` when it is a cluster name; UsageError otherwise."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"cluster name {name!r} must be 1-40 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
        )
    return name


def make_spec(
    name: str,
    nodes: int,
    bandwidth: str,
    prefix: str,
    slots: int,
    dilation: str | float | None = None,
    vcpus_per_node: int | None = None,
    cfs_period_ms: float | None = None,
    idle_nap_us: int | None = None,
    slurm: bool = False,
    vcpus_per_process: int | None = None,
) -> ClusterSpec:
    """Validate the `cluster up` arguments; raise UsageError naming the first bad one.
    `dilation` None means auto; "off" means no caps."""
    check_name(name)
    if not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"--nodes {nodes} is out of range 1..{MAX_NODES}")
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise UsageError(f"node prefix {prefix!r} must be 1-10 lower-case letters or '-'")
    if not 1 <= slots <= 64:
        raise UsageError(f"--slots {slots} is out of range 1..64")
    rate = Bandwidth.tc_rate(bandwidth)
    nap_us = DEFAULT_NAP_US if idle_nap_us is None else idle_nap_us
    if not 0 <= nap_us <= MAX_NAP_US:
        raise UsageError(f"--idle-nap-us {nap_us} is out of range 0..{MAX_NAP_US} (0: waits spin)")

    if cfs_period_ms is not None and not (
        math.isfinite(cfs_period_ms)  # NaN passes every comparison's `not`
        and cgroups.MIN_PERIOD_US <= cfs_period_ms * 1000 <= cgroups.MAX_PERIOD_US
    ):
        raise UsageError(
            f"--cfs-period-ms {cfs_period_ms:g} is out of range "
            f"{cgroups.MIN_PERIOD_US // 1000}..{cgroups.MAX_PERIOD_US // 1000}"
        )
    slowdown = dilation_of.parse(
        dilation,
        nodes,
        vcpus_per_node,
        virtualtime.usable_cores(),
        cfs_period_ms,
        vcpus_per_process,
    )
    if slowdown is None and (
        vcpus_per_node is not None or vcpus_per_process is not None or cfs_period_ms is not None
    ):
        raise UsageError(
            "--vcpus-per-node, --vcpus-per-process and --cfs-period-ms need caps: not with "
            "--dilation off"
        )
    if slowdown is not None:
        cgroups.check_period(slowdown.cfs_period_us, slowdown.thread_quota_us)
    return ClusterSpec(
        name=name,
        nodes=nodes,
        bandwidth=rate,
        prefix=prefix,
        slots=slots,
        dilation=slowdown,
        idle_nap_us=nap_us,
        slurm=slurm,
    )
