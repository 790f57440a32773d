"""Where a study's runs go, as the plan and the launcher see it: the kind of cluster (its
behaviour: archbench.sweep.kinds), its hosts with their slots, and the link rate it has."""

from __future__ import annotations

from dataclasses import dataclass

from archbench.common.hosts import HostSlots, total_slots


@dataclass(frozen=True)
class ClusterTarget:
    kind: str  # a name of archbench.sweep.kinds.KINDS: localhost | emulated | slurm | hostfile
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
