"""What the emulated cluster promised a run, and what the kernel reports it delivered.

The chief takes a reading of every node the run used when training starts and another when it
ends: each node's CPU-budget group (`cpu.stat`: periods, throttled periods and time, CPU used)
and the bytes on each node's link, read from the host side of its veth in the host's network
namespace (`/proc/<pid>/net/dev` of a process there). The difference becomes the record's
`fidelity` object: the budget and link rate promised beside the CPU share each node got and the
bytes each node sent and received per step, so a report can tell a run that the emulation
carried faithfully from one it did not. On a real cluster (no emulated node) there is nothing to
read and the object says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from archbench.cluster import cgroups, idlewait
from archbench.cluster.state import ClusterState, cluster_of


def _netns_inode(pid: int | str) -> int | None:
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    return None


def _host_netns_pid(state: ClusterState) -> int | None:
    """A process in the network namespace that holds the cluster's bridge (usually pid 1)."""
    wanted = state.host_netns
    if wanted is None:
        return None
    if _netns_inode(1) == wanted:
        return 1
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _netns_inode(entry.name) == wanted:
            return int(entry.name)
    return None


def interface_bytes(pid: int) -> dict[str, tuple[int, int]]:
    """{interface: (received bytes, sent bytes)} in the network namespace of `pid`."""
    counters = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
            name, _, rest = line.partition(":")
            fields = rest.split()
            if len(fields) >= 9:
                counters[name.strip()] = (int(fields[0]), int(fields[8]))
    return counters


@dataclass
class Reading:
    at: float
    cpu: dict[str, dict | None] = field(default_factory=dict)  # node -> cgroups.read_stats
    link: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (sent, received)


class FidelityProbe:
    """Readings of the nodes a run uses; `record()` turns two of them into the record's object."""

    def __init__(self, hosts: list[str]):
        self.hosts = hosts
        self.state = cluster_of(hosts)
        self.hierarchy = cgroups.detect() if self.state and self.state.cpus_per_node else None
        self.nodes = sorted({host.split(".")[0] for host in hosts}) if self.state else []
        self.start: Reading | None = None

    def read(self) -> Reading:
        reading = Reading(at=time.monotonic())
        state = self.state
        if state is None:
            return reading
        by_name = {node.name: node for node in state.nodes}
        if self.hierarchy is not None:
            for name in self.nodes:
                reading.cpu[name] = cgroups.read_stats(
                    self.hierarchy.node_dir(state.name, name), self.hierarchy
                )
        pid = _host_netns_pid(state)
        if pid is not None:
            counters = interface_bytes(pid)
            for name in self.nodes:
                veth = by_name[name].host_veth
                if veth in counters:
                    received_by_host, sent_by_host = counters[veth]
                    # The host end receives what the node sends, and sends what it receives.
                    reading.link[name] = (received_by_host, sent_by_host)
        return reading

    def begin(self) -> None:
        self.start = self.read()

    def record(self, steps: int) -> dict:
        """The `fidelity` object for the window since `begin()`, over `steps` training steps."""
        state = self.state
        if state is None or self.start is None:
            return {"emulated": False}
        end = self.read()
        window_s = end.at - self.start.at
        quota_s = (state.cpus_per_node or 0) * (state.cfs_period_us or 0) / 1e6
        nodes = {}
        for name in self.nodes:
            node: dict = {}
            cpu = cgroups.stats_delta(self.start.cpu.get(name), end.cpu.get(name))
            if cpu is not None:
                node.update(
                    usage_s=cpu["usage_s"],
                    throttled_s=cpu["throttled_s"],
                    nr_periods=cpu["nr_periods"],
                    nr_throttled=cpu["nr_throttled"],
                    # Share of the promised budget the node used over the window (<= 1; low
                    # when its processes waited on the network or sat idle).
                    budget_used=(
                        cpu["usage_s"] / (window_s * state.cpus_per_node)
                        if cpu["usage_s"] is not None and window_s > 0 and state.cpus_per_node
                        else None
                    ),
                    # What the kernel gave in the periods the node wanted CPU: its use over the
                    # quota of those periods (1 when the budget was delivered in full).
                    quota_delivered=(
                        cpu["usage_s"] / (cpu["nr_periods"] * quota_s)
                        if cpu["usage_s"] is not None and cpu["nr_periods"] and quota_s
                        else None
                    ),
                )
            if name in self.start.link and name in end.link and steps > 0:
                sent = end.link[name][0] - self.start.link[name][0]
                received = end.link[name][1] - self.start.link[name][1]
                node.update(
                    wire_bytes_sent_per_step=sent / steps,
                    wire_bytes_received_per_step=received / steps,
                )
            nodes[name] = node
        return {
            "emulated": True,
            "cluster": state.name,
            "cpus_per_node": state.cpus_per_node,
            "cfs_period_us": state.cfs_period_us,
            "cgroup": state.cgroup,
            "idle_wait": idlewait.current(),
            "link": state.bandwidth,
            "window_s": window_s,
            "steps": steps,
            "nodes": nodes,
        }
