"""Hosts of one's own, named by an Open MPI hostfile, with the link rate the spec states."""

from __future__ import annotations

from collections.abc import Mapping

from archbench.common.errors import UsageError
from archbench.common.hosts import HostSlots, check_host_name, read_hostfile
from archbench.sweep.kinds.base import ClusterKind
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget


class Hostfile(ClusterKind):
    name = "hostfile"

    def resolve(self, spec: StudySpec, env: Mapping[str, str] | None) -> ClusterTarget:
        return ClusterTarget(self.name, hostfile_hosts(spec), bandwidth=spec.cluster.bandwidth)


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
