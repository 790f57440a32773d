"""Where a running emulated cluster is described: one JSON state file per cluster.

The state lives under /run/archbench/clusters/<name>/ (a tmpfs, so a reboot, which also
drops the namespaces, forgets it) next to the cluster's keys and sshd configurations. Ranks
inside the nodes read it too (`current_link`), because network namespaces share the host's
file system.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from archbench.cluster.dilation import Dilation
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, read_json
from archbench.common.safe_text import shown

RUN_DIR = Path(os.environ.get("ARCHBENCH_RUN_DIR", "/run/archbench"))
NETNS_DIR = Path("/run/netns")
STATE_FILE = "state.json"
MAX_STATE_BYTES = 1 << 20  # a state file is a few KiB per node


def clusters_dir() -> Path:
    return RUN_DIR / "clusters"


def cluster_dir(name: str) -> Path:
    """The state folder of cluster `name`, checked to be a cluster name: the one place a name
    becomes a path, so `../../../tmp/x` cannot reach outside the clusters' folder from any
    caller (`cluster`, `init --cluster`, a study's `cluster: {name: ...}`)."""
    # deferred: archbench.cluster.spec imports this module's neighbours (cgroups, dilation)
    from archbench.cluster.spec import check_name

    return clusters_dir() / check_name(name)


@dataclass
class NodeState:
    name: str  # host name and network namespace name
    address: str
    host_veth: str  # the veth end on the host, enslaved to the bridge
    sshd_pid: int | None = None
    cgroup_dirs: list[str] = field(default_factory=list)  # the CPU budget's groups it joins


@dataclass
class ClusterState:
    name: str
    status: str  # "starting" while `up` runs, then "up"
    bandwidth: Bandwidth  # virtual time; its text in the state file
    prefix: str
    slots: int
    subnet_index: int
    subnet: str
    bridge: (
        str  # ab-<prefix>; also every node's interface name, so Horovod sees one name everywhere
    )
    bridge_address: str
    nodes: list[NodeState] = field(default_factory=list)
    hostfiles: list[str] = field(default_factory=list)
    hosts_file: str = "/etc/hosts"
    ssh_config: str = ""
    mca_params: str = ""
    created_at: str = ""
    # Time dilation (archbench.cluster.dilation): D, virtual cores per node (None: no total),
    # the caps' CFS period; None: no caps (the nodes share the machine's cores).
    dilation: float | None = None
    vcpus_per_node: int | None = None
    vcpus_per_process: int | None = None
    cfs_period_us: int | None = None
    cgroup: str | None = None  # "v1" | "v2": the interface that enforces the caps
    host_netns: int | None = None  # inode of the host's network namespace (link counters)
    idle_nap_us: int = 0  # how long an idle wait on a node sleeps (0: it spins)
    node_library: str | None = None  # preloaded into the nodes' processes (naps, thread caps)
    # how long the machine's idle cores poll before halting while this cluster is up (ns; None:
    # left as they were, archbench.cluster.idlestates)
    idle_poll_ns: int | None = None
    # where the kernel cannot poll: the processes keeping the machine's cores busy at the lowest
    # priority while this cluster is up (archbench.cluster.idlepollers; 0: none)
    idle_pollers: int = 0
    # the CPU of a 2 MB gather capped at 1/D of a core over uncapped, measured at `up`
    # (archbench.cluster.capcost; None: not measured)
    cap_cost_ratio: float | None = None
    # Slurm on the nodes (`up --slurm`): None without; its configuration, controller, partition
    # and daemon pids once started (an empty dict while `up` runs)
    slurm: dict | None = None

    @property
    def node_names(self) -> list[str]:
        return [node.name for node in self.nodes]

    @property
    def dilation_spec(self) -> Dilation | None:
        if self.dilation is None or self.cfs_period_us is None:
            return None
        return Dilation(
            self.dilation, self.vcpus_per_node or 1, self.cfs_period_us, self.vcpus_per_process or 1
        )

    @property
    def link_rate(self) -> Bandwidth:
        """What tc shapes each link to: the virtual bandwidth / D."""
        return link_rate(self.bandwidth, self.dilation)

    @property
    def directory(self) -> Path:
        return cluster_dir(self.name)

    def as_dict(self) -> dict[str, Any]:
        """The state as its file holds it: plain JSON values, the bandwidth as its text."""
        return {**asdict(self), "bandwidth": self.bandwidth.text}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> ClusterState:
        """The state a file holds; the one place its bandwidth text is read (no range check:
        what was up must still be read)."""
        fields: dict[str, Any] = {**data, "nodes": [NodeState(**n) for n in data.get("nodes", [])]}
        if "bandwidth" in data:  # without it the constructor names what is missing
            fields["bandwidth"] = Bandwidth.tc_rate(data["bandwidth"], check_range=False)
        return cls(**fields)


def link_rate(bandwidth: Bandwidth, dilation: float | None) -> Bandwidth:
    """The tc rate of a link of `bandwidth` in virtual time on a cluster dilated by D: B / D,
    in whole kbit (what tc is given is what its bucket is sized for)."""
    if not dilation or dilation == 1:
        return bandwidth
    kbit = max(1, int(round(bandwidth.bits_per_s / dilation / 1000)))
    return Bandwidth(kbit * 1e3, f"{kbit}kbit")


def save_state(state: ClusterState) -> None:
    """Write the state atomically (readers in other processes never see half a file)."""
    state.directory.mkdir(parents=True, exist_ok=True)
    target = state.directory / STATE_FILE
    scratch = target.with_suffix(".tmp")
    scratch.write_text(state.to_json())
    os.chmod(scratch, 0o644)
    os.replace(scratch, target)


def load_state(name: str) -> ClusterState | None:
    """The state of cluster `name`, None when it has none; UsageError (one line) when its state
    file is not one `cluster up` wrote."""
    path = cluster_dir(name) / STATE_FILE
    try:
        return ClusterState.from_dict(read_json(path, max_bytes=MAX_STATE_BYTES))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cluster {name}: cannot read {path} ({exc.strerror or exc})") from None
    except (JsonProblem, ValueError, TypeError, KeyError, AttributeError) as exc:
        problem = exc if isinstance(exc, JsonProblem) else f"{type(exc).__name__}: {exc}"
        raise UsageError(
            f"cluster {name}: {path} is not a state file `cluster up` wrote "
            f"({shown(str(problem))[:200]}); remove {path.parent} if no cluster of that name is up"
        ) from None


def list_states() -> list[ClusterState]:
    """Every cluster with a state file, in name order (unreadable files are skipped)."""
    states = []
    try:
        names = sorted(p.name for p in clusters_dir().iterdir() if p.is_dir())
    except FileNotFoundError:
        return []
    for name in names:
        with contextlib.suppress(OSError, ValueError, TypeError, UsageError):
            state = load_state(name)
            if state is not None:
                states.append(state)
    return states


def namespace_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def is_up(state: ClusterState) -> bool:
    """Up: `cluster up` finished and every node's namespace is still there."""
    return state.status == "up" and all(namespace_exists(n) for n in state.node_names)


@contextlib.contextmanager
def cluster_lock() -> Iterator[None]:
    """Serialise `up` and `down` across processes (pytest sessions may race each other)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "cluster.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cluster_of(hostnames: list[str]) -> ClusterState | None:
    """The emulated cluster that is up and has every one of these hosts as a node, or None
    (a real cluster, a single machine, or a mix)."""
    short_names = {hostname.split(".")[0] for hostname in hostnames if hostname}
    if not short_names:
        return None
    try:
        for state in list_states():
            if short_names <= set(state.node_names) and is_up(state):
                return state
    except OSError:
        return None
    return None


def current_link(hostnames: list[str]) -> str | None:
    """The link bandwidth in virtual time (e.g. "200mbit": tc shapes it to 200mbit / D) when
    every hostname is a node of one emulated cluster that is up; None otherwise (a real cluster,
    a single machine, or a mix)."""
    state = cluster_of(hostnames)
    return state.bandwidth.text if state is not None else None
