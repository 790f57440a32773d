"""The emulated cluster during a sweep: up with the bandwidth a run needs, down when the sweep ends.

The sweep only brings down a cluster it brought up itself. A bandwidth change (a `bandwidth`
factor) re-shapes the links of the live cluster; a cluster that was already up gets its own
bandwidth back at the end. With `manage: false` the cluster must be up, at the study's bandwidth.
"""

from __future__ import annotations

import sys
from pathlib import Path

from archbench.cluster.preflight import require_cluster_support
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import StopError, UsageError
from archbench.sweep.target import ClusterTarget


def node_spec(
    target: ClusterTarget,
    name: str,
    prefix: str,
    bandwidth: str,
    dilation: float | str | None = None,
    vcpus_per_node: int | None = None,
    vcpus_per_process: int | None = None,
    idle_nap_us: int | None = None,
):
    """The `cluster up` a sweep asks for its target (archbench.cluster.spec.make_spec);
    UsageError naming what this machine cannot build."""
    # deferred: the cluster modules load only for an emulated cluster
    from archbench.cluster.spec import make_spec

    slots = max(slots for _, slots in target.hosts)
    return make_spec(
        name, len(target.hosts), bandwidth, prefix, min(slots, 64), dilation, vcpus_per_node,
        idle_nap_us=idle_nap_us, vcpus_per_process=vcpus_per_process,
    )  # fmt: skip


def check_buildable(target: ClusterTarget, cluster) -> None:
    """Before a plan is used (a dry run too): a cluster the sweep would bring up is one this
    machine can build. `cluster` is the spec's."""
    # deferred: the cluster modules load only for an emulated cluster
    from archbench.cluster.spec import DEFAULT_BANDWIDTH
    from archbench.cluster.state import is_up, load_state

    state = load_state(cluster.name)
    if not target.manage or (state is not None and is_up(state)):
        return  # nothing to build: it is up (check_ready judges its nodes), or must already be
    try:
        node_spec(
            target, cluster.name, cluster.prefix, target.bandwidth or DEFAULT_BANDWIDTH,
            cluster.dilation, cluster.vcpus_per_node, cluster.vcpus_per_process,
            cluster.idle_nap_us,
        )  # fmt: skip
    except UsageError as exc:
        raise UsageError(
            f"this machine cannot build the emulated cluster of {len(target.hosts)} nodes the "
            f"study asks for (cluster:): {exc}"
        ) from None


class EmulatedCluster:
    def __init__(
        self,
        target: ClusterTarget,
        name: str,
        prefix: str,
        owner_file: Path | None = None,
        log=None,
        dilation: float | str | None = None,
        vcpus_per_node: int | None = None,
        vcpus_per_process: int | None = None,
        idle_nap_us: int | None = None,
    ):
        self.target = target
        self.name = name
        self.prefix = prefix
        # how the nodes are slowed down when this sweep brings the cluster up
        self.dilation = dilation
        self.vcpus_per_node = vcpus_per_node
        self.vcpus_per_process = vcpus_per_process
        self.idle_nap_us = idle_nap_us
        # Names the cluster a sweep of this study brought up, so a sweep that was killed before
        # it could bring the cluster down has it brought down by the next one.
        self.owner_file = owner_file
        self.owned = False  # brought up by this sweep, so ours to bring down
        self.restore: Bandwidth | None = None  # bandwidth to give back to a cluster we found up
        self.log = log or (
            lambda line: print(f"archbench sweep: {line}", file=sys.stderr, flush=True)
        )

    def _state(self):
        # deferred: the cluster modules load only for an emulated cluster
        from archbench.cluster.state import is_up, load_state

        state = load_state(self.name)
        return state if state is not None and is_up(state) else None

    def check_ready(self, bandwidths: set[str]) -> None:
        """Before any run: refuse what cannot work (not up and not managed, wrong nodes, ...)."""

        require_cluster_support()
        state = self._state()
        if self.owner_file is not None and self.owner_file.exists():
            if state is not None and self.owner_file.read_text().strip() == self.name:
                self.owned = True
                self.log(
                    f"emulated cluster {self.name!r} was left up by an earlier sweep; reusing it"
                )
            else:
                self.owner_file.unlink()
        wanted = [host for host, _ in self.target.hosts]
        if state is None:
            if not self.target.manage:
                raise UsageError(
                    f"emulated cluster {self.name!r} is not up (cluster.manage is false): run "
                    f"`archbench cluster up --name {self.name} --nodes {len(wanted)} "
                    f"--prefix {self.prefix}` first"
                )
            return
        self.require_healthy()
        if state.node_names != wanted:
            raise UsageError(
                f"emulated cluster {self.name!r} is up with nodes {', '.join(state.node_names)}, "
                f"the study wants {', '.join(wanted)}; bring it down or change cluster.nodes"
            )
        other = sorted(b for b in bandwidths if b != state.bandwidth.text)
        if other and not self.target.manage:
            raise UsageError(
                f"emulated cluster {self.name!r} is up at {state.bandwidth} and the study needs "
                f"{', '.join(other)}, but cluster.manage is false: set it true to let the sweep "
                "re-shape the links (it restores them at the end)"
            )

    def require_healthy(self) -> None:
        """Raises StopError naming the nodes whose sshd is gone (as `archbench cluster status`
        reports them): no run can start there, so trying again only wastes the study's time."""
        # deferred: the cluster modules load only for an emulated cluster
        from archbench.cluster.cli import healthy
        from archbench.cluster.sshd import pid_is_sshd

        state = self._state()
        if state is None or healthy(state):
            return
        dead = [node.name for node in state.nodes if not pid_is_sshd(node.sshd_pid)]
        raise StopError(
            f"emulated cluster {self.name!r} has a dead node ({', '.join(dead) or 'unknown'}: "
            f"its sshd is not running; see `archbench cluster status`): bring it down with "
            f"`archbench cluster down --name {self.name}` and run the sweep again"
        )

    def ensure(self, bandwidth: str | None) -> None:
        """The cluster is up with links at `bandwidth`: brought up, or its links re-shaped.
        None (a run without a link setting, such as `single` on one node): up at the study's
        link rate, or as it is."""
        # deferred: the lifecycle (subprocess, node tools) loads only for an emulated cluster
        from archbench.cluster.lifecycle import bring_up, set_bandwidth
        from archbench.cluster.spec import DEFAULT_BANDWIDTH

        state = self._state()
        if bandwidth is None:
            if state is not None:
                return
            bandwidth = self.target.bandwidth or DEFAULT_BANDWIDTH
        if state is None:
            self.log(
                f"bringing up emulated cluster {self.name!r} ({len(self.target.hosts)} nodes, {bandwidth})"
            )
            spec = node_spec(
                self.target, self.name, self.prefix, bandwidth, self.dilation,
                self.vcpus_per_node, self.vcpus_per_process, self.idle_nap_us,
            )  # fmt: skip
            if self.owner_file is not None:
                self.owner_file.write_text(self.name + "\n")
            bring_up(spec)
            self.owned = True
            return
        if state.bandwidth.text == bandwidth:
            return
        if not self.target.manage:
            raise UsageError(
                f"emulated cluster {self.name!r} is up at {state.bandwidth}, not {bandwidth}"
            )
        if not self.owned and self.restore is None:
            self.restore = state.bandwidth
        self.log(f"re-shaping the links of emulated cluster {self.name!r} to {bandwidth}")
        # a study's levels were checked as tc rates when the study was read
        set_bandwidth(self.name, Bandwidth.tc_rate(bandwidth, check_range=False))

    def close(self) -> None:
        if self.owned:
            # deferred: the lifecycle (subprocess, node tools) loads only for an emulated cluster
            from archbench.cluster.lifecycle import tear_down

            self.log(f"bringing down emulated cluster {self.name!r}")
            tear_down(self.name)
            self.owned = False
            if self.owner_file is not None:
                self.owner_file.unlink(missing_ok=True)
        elif self.restore is not None and self._state() is not None:
            # deferred: the lifecycle (subprocess, node tools) loads only for an emulated cluster
            from archbench.cluster.lifecycle import set_bandwidth

            self.log(f"restoring the links of emulated cluster {self.name!r} to {self.restore}")
            set_bandwidth(self.name, self.restore)
            self.restore = None
