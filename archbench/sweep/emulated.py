"""The emulated cluster during a sweep: up with the bandwidth a run needs, down when the sweep ends.

The sweep only brings down a cluster it brought up itself. A cluster that was already up is used
as it is; changing its bandwidth (a `bandwidth` factor) needs a cluster the sweep manages.
"""

from __future__ import annotations

import sys

from archbench.errors import UsageError
from archbench.sweep.hosts import ClusterTarget


class EmulatedCluster:
    def __init__(self, target: ClusterTarget, name: str, prefix: str, log=None):
        self.target = target
        self.name = name
        self.prefix = prefix
        self.owned = False  # brought up by this sweep, so ours to change and bring down
        self.bandwidth: str | None = None
        self.log = log or (
            lambda line: print(f"archbench sweep: {line}", file=sys.stderr, flush=True)
        )

    def _state(self):
        from archbench.cluster.state import is_up, load_state

        state = load_state(self.name)
        return state if state is not None and is_up(state) else None

    def check_ready(self, bandwidths: set[str]) -> None:
        """Before any run: refuse what cannot work (not up and not managed, wrong nodes, ...)."""
        from archbench.cluster.preflight import require_cluster_support

        require_cluster_support()
        state = self._state()
        wanted = [host for host, _ in self.target.hosts]
        if state is None:
            if not self.target.manage:
                raise UsageError(
                    f"emulated cluster {self.name!r} is not up (cluster.manage is false): run "
                    f"`archbench cluster up --name {self.name} --nodes {len(wanted)} "
                    f"--prefix {self.prefix}` first"
                )
            return
        if state.node_names != wanted:
            raise UsageError(
                f"emulated cluster {self.name!r} is up with nodes {', '.join(state.node_names)}, "
                f"the study wants {', '.join(wanted)}; bring it down or change cluster.nodes"
            )
        other = sorted(b for b in bandwidths if b != state.bandwidth)
        if other:
            raise UsageError(
                f"emulated cluster {self.name!r} is already up at {state.bandwidth}, and the study "
                f"needs {', '.join(other)}: bring it down (archbench cluster down --name {self.name}) "
                "so the sweep can set the bandwidth itself"
            )

    def ensure(self, bandwidth: str) -> None:
        """The cluster is up with links at `bandwidth` (re-created when the sweep owns it)."""
        if self.bandwidth == bandwidth and self._state() is not None:
            return
        from archbench.cluster.lifecycle import bring_up, tear_down
        from archbench.cluster.spec import make_spec

        state = self._state()
        if state is not None and state.bandwidth == bandwidth:
            self.bandwidth = bandwidth
            return
        if state is not None:
            if not self.owned:
                raise UsageError(
                    f"emulated cluster {self.name!r} is up at {state.bandwidth}, not {bandwidth}"
                )
            self.log(f"re-creating emulated cluster {self.name!r} at {bandwidth}")
            tear_down(self.name)
        else:
            self.log(
                f"bringing up emulated cluster {self.name!r} ({len(self.target.hosts)} nodes, {bandwidth})"
            )
        slots = max(slots for _, slots in self.target.hosts)
        spec = make_spec(self.name, len(self.target.hosts), bandwidth, self.prefix, min(slots, 64))
        bring_up(spec)
        self.owned = True
        self.bandwidth = bandwidth

    def close(self) -> None:
        if not self.owned:
            return
        from archbench.cluster.lifecycle import tear_down

        self.log(f"bringing down emulated cluster {self.name!r}")
        tear_down(self.name)
        self.owned = False
