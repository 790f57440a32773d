"""Where the starter study's runs go: the hosts of a hostfile, of the Slurm allocation `init`
runs in, or of an emulated cluster that is up; each as the spec's `cluster:` block names it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from archbench.common.errors import UsageError
from archbench.common.hosts import HostSlots, check_host_name, read_hostfile
from archbench.sweep.slurm import allocation_hosts


@dataclass
class Hosts:
    """The hosts and their slots, and the `cluster:` keys that reach them from a spec."""

    kind: str  # hostfile | slurm | emulated
    hosts: list[HostSlots]
    cluster: dict[str, object] = field(default_factory=dict)  # the spec's cluster: block
    source: str = ""  # for the comments and the summary
    bandwidth: str | None = None  # emulated: the rate its links are shaped to

    @property
    def total_slots(self) -> int:
        return sum(slots for _, slots in self.hosts)


def from_hostfile(path: str) -> Hosts:
    hosts = [HostSlots(check_host_name(name), slots) for name, slots in read_hostfile(path)]
    return Hosts("hostfile", hosts, {"kind": "hostfile", "hostfile": path}, f"hostfile {path}")


def from_allocation(env: Mapping[str, str]) -> Hosts:
    job = env.get("SLURM_JOB_ID", "?")
    return Hosts("slurm", allocation_hosts(env), {"kind": "slurm"}, f"Slurm job {job}")


def from_emulated(name: str) -> Hosts:
    """An emulated cluster that is up, reached as the sweep reaches it (by name)."""
    # deferred: the cluster state loads only for an emulated cluster
    from archbench.cluster.state import is_up, load_state

    state = load_state(name)
    if state is None or not is_up(state):
        raise UsageError(
            f"--cluster {name}: no emulated cluster of that name is up "
            f"(archbench cluster up --name {name} --nodes 3)"
        )
    hosts = [HostSlots(node.name, state.slots) for node in state.nodes]
    cluster = {
        "kind": "emulated",
        "name": state.name,
        "prefix": state.prefix,
        "nodes": len(hosts),
        "slots": state.slots,
        "manage": False,
    }
    return Hosts("emulated", hosts, cluster, f"emulated cluster {name}", state.bandwidth.text)


def resolve(hostfile: str | None, cluster: str | None, env: Mapping[str, str]) -> Hosts:
    """The hosts named on the command line, else the allocation's; UsageError when none is."""
    if hostfile:
        return from_hostfile(hostfile)
    if cluster:
        return from_emulated(cluster)
    if env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"):
        return from_allocation(env)
    raise UsageError(
        "name the hosts: --hostfile FILE or --cluster NAME (or run inside a Slurm allocation)"
    )
