"""archbench's emulated cluster: nodes in network namespaces on this machine, links shaped per
run, brought up for the study and down after it (archbench.cluster)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from archbench.common.errors import StopError, UsageError
from archbench.common.hosts import HostSlots
from archbench.sweep.kinds.base import ClusterKind, ClusterManager
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget

DEFAULT_BANDWIDTH = "1gbit"


class Emulated(ClusterKind):
    name = "emulated"
    shapes_links = True
    on_this_machine = True
    link_words = " unless a run sets bandwidth"

    def resolve(self, spec: StudySpec, env: Mapping[str, str] | None) -> ClusterTarget:
        cluster = spec.cluster
        reason = emulation_unavailable()
        if reason:
            raise UsageError(f"--cluster emulated: {reason}; use --cluster localhost")
        slots = cluster.slots or os.cpu_count() or 1
        hosts = tuple(
            HostSlots(name, slots) for name in emulated_node_names(cluster.nodes, cluster.prefix)
        )
        bandwidth = cluster.bandwidth or _running_bandwidth(cluster.name) or DEFAULT_BANDWIDTH
        return ClusterTarget(self.name, hosts, bandwidth=bandwidth, manage=cluster.manage)

    def check_plan(self, target: ClusterTarget, spec: StudySpec) -> None:
        # deferred: the manager loads the emulator's modules
        from archbench.sweep.emulated import check_buildable

        check_buildable(target, spec.cluster)

    def check_up(self, target: ClusterTarget, spec: StudySpec) -> None:
        cluster = spec.cluster
        if _running_state(cluster.name) is None:
            raise StopError(
                f"the study's emulated cluster {cluster.name!r} is not up: bring it up "
                f"(archbench cluster up --name {cluster.name} --prefix {cluster.prefix} "
                f"--nodes {cluster.nodes}) and run doctor again"
            )

    def manager(
        self, target: ClusterTarget, spec: StudySpec, owner_file: Path | None, log: Any
    ) -> ClusterManager | None:
        # deferred: the manager loads the emulator's modules
        from archbench.sweep.emulated import EmulatedCluster

        cluster = spec.cluster
        return EmulatedCluster(
            target, cluster.name, cluster.prefix, owner_file=owner_file, log=log,
            dilation=cluster.dilation, vcpus_per_node=cluster.vcpus_per_node,
            vcpus_per_process=cluster.vcpus_per_process, idle_nap_us=cluster.idle_nap_us,
        )  # fmt: skip


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


def _running_state(name: str) -> Any:
    """The state of the emulated cluster `name` where it is up, else None."""
    # deferred: the cluster state (fcntl) loads only for an emulated cluster
    from archbench.cluster.state import is_up, load_state

    state = load_state(name)
    return state if state is not None and is_up(state) else None


def _running_bandwidth(name: str) -> str | None:
    """The link rate of the emulated cluster `name` where it is up, else None."""
    state = _running_state(name)
    return state.bandwidth.text if state is not None else None
