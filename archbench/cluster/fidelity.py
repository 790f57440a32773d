"""What the emulated cluster promised a run, and what the kernel reports it delivered.

The chief takes a reading of every node the run used once every rank's caps are armed (after the
first timed step) and another when training ends: each node's CPU use (its cgroup), each of its
capped threads' scheduler counters (`/proc/<tid>/schedstat`: CPU time and time spent runnable
but not running) and CFS counters (`cpu.stat` of the thread's group: time throttled by its cap),
the CPU of threads outside every cap, and the bytes on each node's link, read from the host side
of its veth in the host's network namespace (`/proc/<pid>/net/dev` of a process there). The
difference becomes the record's `fidelity` object: the dilation, caps and link rate promised
beside what the threads got. A thread that was runnable and neither running nor throttled by its
own cap waited for a core: the machine was oversubscribed, and in virtual time that thread ran
slower than a host's core (`core_wait_share`). On a real cluster (no emulated node) there is
nothing to read and the object says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from archbench.cluster import cgroups, idlepollers, idlestates, idlewait
from archbench.cluster.dilation import Dilation
from archbench.cluster.state import ClusterState, cluster_of
from archbench.runtime import cgroupread


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


def schedstat(tid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting) of a thread, from the scheduler's statistics; the
    wait includes time its CFS cap held it back (throttled)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{tid}/schedstat").read_text().split()
        return int(fields[0]), int(fields[1])
    return None


@dataclass
class ThreadReading:
    run_ns: int
    wait_ns: int
    throttled_ns: int  # its own group's cap held it back; 0 for a thread outside every cap
    # its process's group (vcpu/p<pid>) was held back by the process's cap: when a process's
    # threads together reach P/D, the process group is throttled, not the thread's own
    process_throttled_ns: int = 0
    # a library's background thread (vcpu/b<pid>/t<tid>): its own virtual core, outside its
    # process's cap
    background: bool = False


def machine_times() -> tuple[int, int] | None:
    """(idle, total) clock ticks of the whole machine so far, from /proc/stat; the idle-core
    pollers' ticks count as idle (they stand in for the kernel's own polling)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4] + idlepollers.idle_ticks()  # idle + iowait; user..steal
        return idle, sum(fields[:8])
    return None


@dataclass
class Reading:
    at: float
    machine: tuple[int, int] | None = None  # machine_times()
    node_throttled_ns: dict[str, int] = field(default_factory=dict)  # node -> its vcpu group
    cpu: dict[str, dict | None] = field(default_factory=dict)  # node -> cgroupread.read_stats
    link: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (sent, received)
    capped: dict[str, dict[int, ThreadReading]] = field(default_factory=dict)  # node -> tid -> ..
    uncapped: dict[str, dict[int, ThreadReading]] = field(default_factory=dict)


class FidelityProbe:
    """Readings of the nodes a run uses; `record()` turns two of them into the record's object."""

    def __init__(self, hosts: list[str]):
        self.hosts = hosts
        self.state = cluster_of(hosts)
        self.hierarchy = cgroupread.detect() if self.state and self.state.dilation else None
        self.nodes = sorted({host.split(".")[0] for host in hosts}) if self.state else []
        self.start: Reading | None = None

    def read(self) -> Reading:
        reading = Reading(at=time.monotonic(), machine=machine_times())
        state = self.state
        if state is None:
            return reading
        by_name = {node.name: node for node in state.nodes}
        if self.hierarchy is not None:
            for name in self.nodes:
                reading.cpu[name] = cgroupread.read_stats(
                    cgroups.node_dir(self.hierarchy, state.name, name), self.hierarchy
                )
                reading.capped[name] = self._threads(name)
                threads_group = cgroupread.read_stats(
                    cgroups.threads_dir(self.hierarchy, state.name, name), self.hierarchy
                )
                if threads_group is not None:
                    reading.node_throttled_ns[name] = int(threads_group["throttled_s"] * 1e9)
                reading.uncapped[name] = {
                    tid: ThreadReading(*counters, 0)
                    for tid in cgroups.uncapped_threads(self.hierarchy, state.name, name)
                    if (counters := schedstat(tid)) is not None
                }
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

    def _threads(self, node: str) -> dict[int, ThreadReading]:
        assert self.hierarchy is not None and self.state is not None
        threads = {}
        process_throttled: dict[Path, int] = {}  # read once per process group
        for tid, group in cgroups.thread_groups(self.hierarchy, self.state.name, node).items():
            counters = schedstat(tid)
            stats = cgroupread.read_stats(group, self.hierarchy)  # its usage: None (cpuacct apart)
            if group.parent not in process_throttled:
                process = cgroupread.read_stats(group.parent, self.hierarchy)
                process_throttled[group.parent] = (
                    int(process["throttled_s"] * 1e9) if process is not None else 0
                )
            if counters is not None and stats is not None:
                threads[tid] = ThreadReading(
                    counters[0],
                    counters[1],
                    int(stats["throttled_s"] * 1e9),
                    process_throttled[group.parent],
                    group.parent.name.startswith("b"),
                )
        return threads

    def begin(self) -> None:
        self.start = self.read()

    def record(self, steps: int) -> dict:
        """The `fidelity` object for the window since `begin()`, over `steps` training steps.
        Durations are real seconds; `window_s` is also given in virtual time."""
        state = self.state
        if state is None or self.start is None:
            return {"emulated": False}
        end = self.read()
        window_s = end.at - self.start.at
        dilation = state.dilation_spec
        nodes = {}
        for name in self.nodes:
            node: dict = {}
            cpu = cgroupread.stats_delta(self.start.cpu.get(name), end.cpu.get(name))
            if cpu is not None and dilation is not None:
                node.update(_cpu_figures(cpu, window_s, dilation))
            if name in end.capped:
                node_throttled = end.node_throttled_ns.get(
                    name, 0
                ) - self.start.node_throttled_ns.get(name, 0)
                node.update(
                    _thread_figures(
                        self.start.capped.get(name, {}), end.capped[name], window_s, node_throttled
                    )
                )
                uncapped = _deltas(self.start.uncapped.get(name, {}), end.uncapped[name])
                node["uncapped_cpu_s"] = sum(d.run_ns for d in uncapped) / 1e9
            if name in self.start.link and name in end.link and steps > 0:
                sent = end.link[name][0] - self.start.link[name][0]
                received = end.link[name][1] - self.start.link[name][1]
                node.update(
                    wire_bytes_sent_per_step=sent / steps,
                    wire_bytes_received_per_step=received / steps,
                )
            nodes[name] = node
        factor = dilation.factor if dilation is not None else 1.0
        idle_share = None
        if self.start.machine is not None and end.machine is not None:
            ticks = end.machine[1] - self.start.machine[1]
            idle_share = (end.machine[0] - self.start.machine[0]) / ticks if ticks > 0 else None
        return {
            "emulated": True,
            "cluster": state.name,
            "dilation": dilation.factor if dilation is not None else None,
            "vcpus_per_node": dilation.vcpus_per_node if dilation is not None else None,
            "vcpus_per_process": dilation.vcpus_per_process if dilation is not None else None,
            "thread_cap_cpus": 1 / dilation.factor if dilation is not None else None,
            "cfs_period_us": state.cfs_period_us,
            "cgroup": state.cgroup,
            "idle_wait": idlewait.current(),
            # how long the machine's idle cores polled before halting, between the nodes'
            # bursts (archbench.cluster.idlestates; null: no haltpoll on this machine)
            "idle_halt_poll_us": idlestates.poll_us(),
            # where there is no haltpoll: processes polling on the idle cores at the lowest
            # priority (archbench.cluster.idlepollers; 0: the idle cores halted)
            "idle_pollers": len(idlepollers.pids()),
            # the CPU of the same work capped over uncapped when the cluster came up
            # (archbench.cluster.capcost): above 1, every compute time is that much slower
            # than a host's
            "cap_cost_ratio": state.cap_cost_ratio,
            "link": state.bandwidth.text,
            "link_rate": state.link_rate.text,
            "window_s": window_s / factor,
            "window_real_s": window_s,
            # The machine's idle share over the window: a faithful cluster leaves some (the
            # caps hold the nodes' busy threads under the cores); none means the cores were
            # saturated and threads waited for one.
            "machine_idle_share": idle_share,
            "steps": steps,
            "nodes": nodes,
        }


def _deltas(start: dict[int, ThreadReading], end: dict[int, ThreadReading]) -> list[ThreadReading]:
    """Each thread's counters over the window (threads seen at both ends)."""
    return [
        ThreadReading(
            after.run_ns - start[tid].run_ns,
            after.wait_ns - start[tid].wait_ns,
            after.throttled_ns - start[tid].throttled_ns,
            after.process_throttled_ns - start[tid].process_throttled_ns,
            after.background,
        )
        for tid, after in end.items()
        if tid in start
    ]


def _cpu_figures(cpu: dict, window_s: float, dilation: Dilation) -> dict:
    """A node's CPU over the window: real CPU seconds, and in virtual time the busy cores."""
    usage = cpu["usage_s"]
    return {
        "usage_s": usage,
        # CPU seconds per second of virtual time: 1.0 = one thread busy all the time on its
        # virtual core.
        "busy_vcpus": usage * dilation.factor / window_s
        if usage is not None and window_s
        else None,
        "nr_periods": cpu["nr_periods"],
    }


def _thread_figures(
    start: dict[int, ThreadReading],
    end: dict[int, ThreadReading],
    window_s: float,
    node_throttled_ns: int = 0,
) -> dict:
    """What the node's capped threads got over the window: CPU, time held back by their own caps
    or the node's (throttled), and time they waited for a core beyond that (oversubscription)."""
    deltas = _deltas(start, end)
    run = sum(d.run_ns for d in deltas) / 1e9
    throttled = sum(d.throttled_ns for d in deltas) / 1e9
    # Runnable, not running, held back neither by its own cap nor its process's nor the node's:
    # waiting for a core (the scheduler counts a throttled thread as waiting). A thread may not
    # have been runnable through all of its process's or node's throttled time, so this is a
    # lower bound (never negative: the counters are read a moment apart).
    core_wait = (
        sum(
            max(
                0,
                d.wait_ns
                - d.throttled_ns
                - max(0, d.process_throttled_ns)
                - max(0, node_throttled_ns),
            )
            for d in deltas
        )
        / 1e9
    )
    return {
        "threads": len(deltas),
        "capped_cpu_s": run,
        "throttled_s": throttled,
        "node_throttled_s": max(0, node_throttled_ns) / 1e9,
        "core_wait_s": core_wait,
        # Waiting for a core per second of CPU: what the node's threads lost to an oversubscribed
        # machine (a few percent is the scheduler's wake-up latency).
        "core_wait_share": core_wait / run if run > 0 else None,
        # libraries' background threads (Horovod's, MPI's), each on a virtual core of its own
        "background_threads": sum(d.background for d in deltas),
        "background_cpu_s": sum(d.run_ns for d in deltas if d.background) / 1e9,
        "busiest_thread_cpus": max((d.run_ns / 1e9 / window_s for d in deltas), default=None)
        if window_s > 0
        else None,
    }
