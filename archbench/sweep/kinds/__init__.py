"""The kinds of cluster a study runs on, chosen in one place: this machine (`localhost`), the
emulated cluster, the hosts of a hostfile, or the nodes of a Slurm allocation. Each is a module
with the same small interface (archbench.sweep.kinds.base.ClusterKind): its hosts and link, how
they are checked, what brings them up and down, and what it adds to a record."""

from __future__ import annotations

from collections.abc import Mapping

from archbench.common.errors import UsageError
from archbench.sweep.kinds.base import SRUN, SSH, ClusterKind
from archbench.sweep.kinds.emulated import Emulated, emulation_unavailable
from archbench.sweep.kinds.hostfile import Hostfile
from archbench.sweep.kinds.localhost import Localhost
from archbench.sweep.kinds.slurm import Slurm
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget

KINDS: dict[str, ClusterKind] = {
    kind.name: kind for kind in (Localhost(), Emulated(), Hostfile(), Slurm())
}
AUTO = "auto"  # emulated where this machine can build it (root), else localhost

__all__ = [
    "KINDS", "SRUN", "SSH", "ClusterKind", "describe", "emulation_unavailable", "kind_of",
    "resolve_target",
]  # fmt: skip


def kind_of(target: ClusterTarget) -> ClusterKind:
    return KINDS[target.kind]


def resolve_target(
    spec: StudySpec, kind: str | None = None, env: Mapping[str, str] | None = None
) -> ClusterTarget:
    """The cluster for this sweep: `kind` (from --cluster) overrides the spec's cluster.kind."""
    name = kind or spec.cluster.kind
    if name == AUTO:
        name = "localhost" if emulation_unavailable() else "emulated"
    if name not in KINDS:
        raise UsageError(f"unknown cluster kind {name!r} ({', '.join(KINDS)} or {AUTO})")
    return KINDS[name].resolve(spec, env)


def describe(target: ClusterTarget) -> str:
    """'emulated (node1:5, node2:5, links 1gbit unless a run sets bandwidth)'."""
    hosts = ", ".join(f"{name}:{slots}" for name, slots in target.hosts)
    link = f", links {target.bandwidth}{kind_of(target).link_words}" if target.bandwidth else ""
    return f"{target.kind} ({hosts}{link})"
