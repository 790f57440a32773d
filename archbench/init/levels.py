"""The levels of the starter design that fit the hosts: worker counts the slots hold, placements
of the parameter server only where a spare host exists, and exclusions for the rest.

Every level is tried with the sweep's own planner (`normalise`, then `layout_for`, which places
the ranks on the hosts), so the design the spec gets is one the sweep accepts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archbench.common.archs import has_servers
from archbench.common.errors import UsageError
from archbench.sweep.commands import layout_for
from archbench.sweep.plan import normalise
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget

ARCHS = ("single", "ring", "p2p", "ps")
# Doubling worker counts, as scaling is read; a starter stops at 8 (add levels to go further).
CANDIDATE_WORKERS = (2, 4, 8)
PLACEMENTS = ("dedicated", "colocated")


@dataclass
class Design:
    workers: list[int]
    placements: list[str]  # empty on one host: every rank is there whatever the policy
    exclude: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a level is not in the design


def _fits(point: dict[str, Any], spec: StudySpec, target: ClusterTarget) -> bool:
    try:
        layout_for(normalise(point, spec, target), target)
    except UsageError:
        return False
    return True


def fit(spec: StudySpec, target: ClusterTarget) -> Design:
    """The design's levels for `target`; UsageError when no distributed run fits at all."""
    workers = [
        count
        for count in CANDIDATE_WORKERS
        if _fits({"arch": "ring", "workers": count}, spec, target)
    ]
    if not workers:
        raise UsageError(
            f"{len(target.hosts)} host(s) with {target.total_slots} slot(s) in all: a distributed "
            "run needs at least 2 (give a host slots=2, or add a host)"
        )
    design = Design(workers, [])
    if not target.one_host:
        design.placements = [
            placement
            for placement in PLACEMENTS
            if any(
                _fits({"arch": "ps", "workers": count, "placement": placement}, spec, target)
                for count in workers
            )
        ]
        if "dedicated" not in design.placements:
            design.notes.append(
                "dedicated (the server on a host of its own) needs a spare host beyond the "
                "workers' hosts"
            )
        if "colocated" not in design.placements:
            design.notes.append(
                "colocated (the server beside a worker) needs a worker host with a slot to spare "
                "(slots=2)"
            )
    for count in workers:
        for arch in ARCHS:
            placements = design.placements if has_servers(arch) and design.placements else [None]
            for placement in placements:
                point: dict[str, Any] = {"arch": arch, "workers": count}
                if placement is not None:
                    point["placement"] = placement
                if not _fits(point, spec, target):
                    design.exclude.append(point)
    return design
