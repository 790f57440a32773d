"""What every kind of cluster answers the sweep: one small interface, one module per kind."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget

SSH, SRUN = "ssh", "srun"  # how the sweep checks a kind's hosts before the first run


class ClusterManager(Protocol):
    """What brings a kind's cluster up for a sweep and down after it (the emulated cluster's:
    archbench.sweep.emulated.EmulatedCluster)."""

    def check_ready(self, bandwidths: set[str]) -> None:
        """Before the first run: it can be brought up, or is up, with these links."""

    def ensure(self, bandwidth: str | None) -> None:
        """Before each launch: up, with its links at `bandwidth`."""

    def require_healthy(self) -> None:
        """After a failed launch: StopError naming a node that is gone."""

    def close(self) -> None:
        """After the sweep: down if this sweep brought it up, its links as they were if not."""


class ClusterKind:
    """The defaults: hosts the study names, reached by ssh, with a link the sweep does not set."""

    name = ""
    # The sweep sets each run's link rate (so `bandwidth` may be a factor), and runs each rate as
    # one block.
    shapes_links = False
    # A one-process run still goes through the launcher (on this machine it need not).
    launches_single = True
    # Every rank runs on this machine's cores, whatever host it is placed on.
    on_this_machine = False
    # How a stated link rate is described in the sweep's summary line.
    link_words = " claimed"

    def resolve(self, spec: StudySpec, env: Mapping[str, str] | None) -> ClusterTarget:
        """The hosts and link of this kind of cluster for the study (`env`: where a kind reads
        its hosts from the environment, None: this process's); UsageError where it has none."""
        raise NotImplementedError

    def host_checks(self, has_user_files: bool) -> str | None:
        """How the hosts are checked before the first run (SSH, SRUN), or None: not at all."""
        return SSH

    def check_plan(self, target: ClusterTarget, spec: StudySpec) -> None:
        """Before a plan is used (a dry run too): what this kind needs to run it at all."""

    def check_up(self, target: ClusterTarget, spec: StudySpec) -> None:
        """Before its hosts are checked (`archbench doctor --study`): StopError where they are
        not there yet."""

    def manager(
        self, target: ClusterTarget, spec: StudySpec, owner_file: Path | None, log: Any
    ) -> ClusterManager | None:
        """What brings the cluster up for the sweep and down after it, or None: it is there."""
        return None

    def record_facts(self, cluster: dict[str, Any]) -> None:
        """Adds what the ranks could not see to a record's `cluster` (after the run)."""
