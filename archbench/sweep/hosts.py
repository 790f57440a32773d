"""Where a study's runs go: this machine, the emulated cluster, the hosts of a hostfile, or the
hosts of a Slurm allocation."""

from __future__ import annotations

import os
from dataclasses import dataclass

from archbench.errors import UsageError
from archbench.hosts import HostSlots, check_host_name, read_hostfile, total_slots
from archbench.sweep import slurm
from archbench.sweep.spec import StudySpec

LOCALHOST = "localhost"


@dataclass(frozen=True)
class ClusterTarget:
    kind: str  # localhost | emulated | slurm | hostfile
    hosts: tuple[HostSlots, ...]
    # emulated: the link rate when bandwidth is not a factor; hostfile: the rate claimed for the
    # hosts' links (not shaped: doctor measures it against this)
    bandwidth: str | None = None
    manage: bool = True  # emulated: bring it up/down around the study

    @property
    def total_slots(self) -> int:
        return total_slots(self.hosts)

    @property
    def one_host(self) -> bool:
        return len(self.hosts) == 1

    def describe(self) -> str:
        hosts = ", ".join(f"{name}:{slots}" for name, slots in self.hosts)
        link = ""
        if self.bandwidth:
            link = f", links {self.bandwidth}" + (
                " unless a run sets bandwidth" if self.kind == "emulated" else " claimed"
            )
        return f"{self.kind} ({hosts}{link})"


DEFAULT_BANDWIDTH = "1gbit"


def emulated_node_names(count: int, prefix: str = "node") -> list[str]:
    """Names of the emulated cluster's nodes, as `archbench cluster up --nodes N` creates them."""
    return [f"{prefix}{index}" for index in range(1, count + 1)]


def emulation_unavailable() -> str | None:
    """Why the emulated cluster cannot be used here (root, tools), or None."""
    try:
        # deferred: inside the ImportError guard for a build without archbench.cluster
        from archbench.cluster.preflight import cluster_unavailable_reason
    except ImportError:
        return "this build has no emulated cluster (archbench.cluster)"
    return cluster_unavailable_reason()


def _running_bandwidth(name: str) -> str | None:
    # deferred: the cluster state (fcntl) loads only for an emulated cluster
    from archbench.cluster.state import is_up, load_state

    state = load_state(name)
    return state.bandwidth.text if state is not None and is_up(state) else None


def resolve_target(
    spec: StudySpec, kind: str | None = None, env: dict[str, str] | None = None
) -> ClusterTarget:
    """The cluster for this sweep: `kind` (from --cluster) overrides the spec's cluster.kind."""
    cluster = spec.cluster
    kind = kind or cluster.kind
    if kind == "auto":
        kind = "localhost" if emulation_unavailable() else "emulated"
    if kind == "localhost":
        slots = cluster.slots or os.cpu_count() or 1
        return ClusterTarget("localhost", (HostSlots(LOCALHOST, slots),))
    if kind == "emulated":
        reason = emulation_unavailable()
        if reason:
            raise UsageError(f"--cluster emulated: {reason}; use --cluster localhost")
        slots = cluster.slots or os.cpu_count() or 1
        hosts = tuple(
            HostSlots(name, slots) for name in emulated_node_names(cluster.nodes, cluster.prefix)
        )
        bandwidth = cluster.bandwidth or _running_bandwidth(cluster.name) or DEFAULT_BANDWIDTH
        return ClusterTarget("emulated", hosts, bandwidth=bandwidth, manage=cluster.manage)
    if kind == "slurm":
        return ClusterTarget("slurm", tuple(slurm.allocation_hosts(env)))
    if kind == "hostfile":
        return ClusterTarget("hostfile", hostfile_hosts(spec), bandwidth=cluster.bandwidth)
    raise UsageError(
        f"unknown cluster kind {kind!r} (localhost, emulated, slurm, hostfile or auto)"
    )


def hostfile_hosts(spec: StudySpec) -> tuple[HostSlots, ...]:
    """The hosts of the spec's `cluster.hostfile`, each with its slots (or `cluster.slots`
    where the spec gives it)."""
    if spec.cluster.hostfile is None:
        raise UsageError(
            "--cluster hostfile: the spec names no hostfile (cluster: {kind: hostfile, "
            "hostfile: hosts.txt})"
        )
    hosts = read_hostfile(spec.cluster.hostfile)
    slots = spec.cluster.slots
    return tuple(HostSlots(check_host_name(name), slots or count) for name, count in hosts)
