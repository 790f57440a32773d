"""CPU caps of emulated nodes, enforced by the kernel's CFS bandwidth control.

Each node gets a cgroup `archbench/<cluster>/<node>` that every process the node runs joins (its
sshd, and through it the launcher's daemons and the ranks), with the highest weight so that other
work on the machine cannot push the nodes below their caps. On a time-dilated cluster (see
`archbench.cluster.dilation`) it holds `vcpu/`, the group of the node's threads, capped at V/D of
a core when the node has V virtual cores, in it one group per process, `vcpu/p<pid>`, capped at
its virtual cores / D, and in that one group per thread, `vcpu/p<pid>/t<tid>`, capped at 1/D of a
core (made by the node's preload library, `native/nodelib.c`, as each thread is placed).
Both cgroup interfaces are supported and detected: v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`,
a thread joins through `tasks`, usage from the `cpuacct` controller when it is mounted) and v2
(`cpu.max`, threaded subgroups joined through `cgroup.threads`, usage in `cpu.stat`).

Reading is separate from building: where the controller is, a process's budget and a group's
counters are plain file reads that any rank may call, on the emulated cluster or on a real host
whose job runs in a cgroup (`archbench.runtime.cgroupread`, which this module builds on).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from archbench.common.errors import RunFailed, UsageError
from archbench.runtime.cgroupread import Hierarchy, detect, mounts

GROUP = "archbench"
THREADS_GROUP = "vcpu"  # a node's thread groups live in <node>/vcpu/p<pid>/t<tid>
# A quota only caps a node; under contention from processes outside the cluster (a build, a
# test run) the nodes would still fall below their budgets. The highest weight on archbench's
# groups makes the budget a reservation too: other work gets what the nodes leave.
V1_SHARES = 262144  # cpu.shares maximum
V2_WEIGHT = 10000  # cpu.weight maximum
# The kernel refuses quotas below 1 ms; periods above 1 s are refused as well.
MIN_QUOTA_US = 1000
MIN_PERIOD_US = 1000
MAX_PERIOD_US = 1_000_000


def node_dir(hierarchy: Hierarchy, cluster: str, node: str) -> Path:
    return hierarchy.cpu_root / GROUP / cluster / node


def group_dirs(hierarchy: Hierarchy, cluster: str, node: str) -> list[Path]:
    """Every directory a node's processes join (v1: cpu and, apart, cpuacct)."""
    dirs = [node_dir(hierarchy, cluster, node)]
    if hierarchy.cpuacct_root is not None and hierarchy.cpuacct_root != hierarchy.cpu_root:
        dirs.append(hierarchy.cpuacct_root / GROUP / cluster / node)
    return dirs


def cluster_dirs(hierarchy: Hierarchy, cluster: str) -> list[Path]:
    roots = [hierarchy.cpu_root]
    if hierarchy.cpuacct_root is not None and hierarchy.cpuacct_root != hierarchy.cpu_root:
        roots.append(hierarchy.cpuacct_root)
    return [root / GROUP / cluster for root in roots]


def node_mount_script(hierarchy: Hierarchy) -> str:
    """Shell commands that mount the host's cpu (and cpuacct) trees inside a node.

    `ip netns exec` gives a node a /sys of its own, without the cgroup trees, so its processes
    could not read their own budget or counters. Mounting the same hierarchies again (same
    controllers) shows the same groups; the mounts stay in the node's own mount namespace.
    """
    commands = []
    if hierarchy.version == "v2":
        return f"mount -t cgroup2 cgroup2 {hierarchy.cpu_root}"
    parents = {hierarchy.cpu_root.parent}
    if hierarchy.cpuacct_root is not None:
        parents.add(hierarchy.cpuacct_root.parent)
    for parent in sorted(parents):
        commands.append(f"mount -t tmpfs -o mode=755 cgroup {parent}")
    for fstype, mount, options in mounts(Path("/proc/self/mounts")):
        if fstype == "cgroup" and mount in (hierarchy.cpu_root, hierarchy.cpuacct_root):
            controllers = ",".join(sorted(options & {"cpu", "cpuacct"}))
            commands.append(f"mkdir -p {mount} && mount -t cgroup -o {controllers} cgroup {mount}")
    return " && ".join(commands)


def unavailable_reason() -> str | None:
    if detect() is None:
        return (
            "no cgroup cpu controller is mounted (cgroup v1 /sys/fs/cgroup/cpu or v2 with "
            "'cpu' in cgroup.controllers), so node CPU budgets cannot be enforced"
        )
    return None


def check_period(period_us: int, quota_us: int) -> None:
    """UsageError unless the kernel accepts this period and quota."""
    if not MIN_PERIOD_US <= period_us <= MAX_PERIOD_US:
        raise UsageError(f"--cfs-period-ms {period_us / 1000:g} is out of range 1..1000")
    if quota_us < MIN_QUOTA_US:
        raise UsageError(
            f"a cap of {quota_us / period_us:.3g} of a core per {period_us / 1000:g} ms period is "
            "a quota under the kernel's 1 ms minimum; raise --cfs-period-ms"
        )


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise RunFailed(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


def _enable_cpu_controller(directory: Path) -> None:
    # v2: a child gets cpu.max only when every ancestor lists +cpu in cgroup.subtree_control.
    control = directory / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        _write(control, "+cpu")


def create_node_group(
    hierarchy: Hierarchy,
    cluster: str,
    node: str,
    node_quota_us: int | None,
    period_us: int,
) -> list[Path]:
    """Make the node's cgroup(s) and its group of thread groups; returns the directories its
    processes join. `node_quota_us` caps the node's threads together (V virtual cores), None
    leaves them only their per-thread caps."""
    if hierarchy.version == "v2":
        _enable_cpu_controller(hierarchy.cpu_root)
    dirs = group_dirs(hierarchy, cluster, node)
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    cpu_dir = dirs[0]
    threads_dir = cpu_dir / THREADS_GROUP
    threads_dir.mkdir(exist_ok=True)
    for level in (cpu_dir.parent.parent, cpu_dir.parent, cpu_dir):
        if hierarchy.version == "v1":
            _write(level / "cpu.shares", str(V1_SHARES))
        else:
            if level != cpu_dir:
                _enable_cpu_controller(level)
            _write(level / "cpu.weight", str(V2_WEIGHT))
    if hierarchy.version == "v1":
        _write(threads_dir / "cpu.shares", str(V1_SHARES))
    else:
        # A thread may sit apart from its process only in a threaded subtree.
        _write(threads_dir / "cgroup.type", "threaded")
        _enable_cpu_controller(cpu_dir)
        _enable_cpu_controller(threads_dir)
    _write_cap(threads_dir, hierarchy, node_quota_us, period_us)
    return dirs


def _write_cap(directory: Path, hierarchy: Hierarchy, quota_us: int | None, period_us: int) -> None:
    """A group's CFS cap: `quota_us` per `period_us` (None: no quota)."""
    if hierarchy.version == "v1":
        _write(directory / "cpu.cfs_period_us", str(period_us))
        _write(directory / "cpu.cfs_quota_us", str(quota_us) if quota_us is not None else "-1")
    else:
        _write(directory / "cpu.max", f"{quota_us if quota_us is not None else 'max'} {period_us}")


@contextlib.contextmanager
def capped_group(
    hierarchy: Hierarchy, quota_us: int, period_us: int, prefix: str, parent: Path | None = None
) -> Iterator[Path]:
    """A temporary group capped at `quota_us` per `period_us`, removed afterwards (measurements
    of a cap alone: benchmarks, tests, `up`); every thread put in it must be gone. In `parent`
    (a cluster's group, whose `down` removes what a killed measurement left), else at the top."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent or hierarchy.cpu_root))
    try:
        _write_cap(directory, hierarchy, quota_us, period_us)
        yield directory
    finally:
        directory.rmdir()


def threads_dir(hierarchy: Hierarchy, cluster: str, node: str) -> Path:
    """Where a node's thread groups are made (`<node>/vcpu`)."""
    return node_dir(hierarchy, cluster, node) / THREADS_GROUP


def thread_groups(hierarchy: Hierarchy, cluster: str, node: str) -> dict[int, Path]:
    """{thread id: its group} for every thread group of the node (`vcpu/p<pid>/t<tid>`, and a
    background thread's `vcpu/b<pid>/t<tid>`; a group may outlive its thread until it is
    pruned)."""
    groups = {}
    with contextlib.suppress(OSError):
        for process in threads_dir(hierarchy, cluster, node).glob("[pb]*"):
            for entry in process.glob("t*"):
                if entry.name[1:].isdigit() and entry.is_dir():
                    groups[int(entry.name[1:])] = entry
    return groups


def uncapped_threads(hierarchy: Hierarchy, cluster: str, node: str) -> list[int]:
    """Threads that live in the node's own group, outside every thread cap (sshd, and any
    thread of a process that has not placed it)."""
    directory = node_dir(hierarchy, cluster, node)
    with contextlib.suppress(OSError, ValueError):
        return [int(tid) for tid in (directory / hierarchy.thread_list).read_text().split()]
    return []


def join_groups(dirs: list[Path], pid: int = 0) -> None:
    """Move a process (0: this one) into the node's groups; its children inherit them."""
    for directory in dirs:
        (directory / "cgroup.procs").write_text(str(pid or os.getpid()))


def pids_in(directory: Path) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        return [int(pid) for pid in (directory / "cgroup.procs").read_text().split()]
    return []


def remove_cluster_groups(
    hierarchy: Hierarchy | None, cluster: str, timeout_s: float = 5.0
) -> None:
    """rmdir every group of the cluster (deepest first). Processes must be gone; a group whose
    last process is still exiting is retried until `timeout_s`, then reported."""
    if hierarchy is None:
        return
    leftovers: list[str] = []
    for top in cluster_dirs(hierarchy, cluster):
        if not top.exists():
            continue
        # Deepest first: thread groups, then each node's `vcpu`, then the nodes.
        groups = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for directory in groups + [top]:
            deadline = time.monotonic() + timeout_s
            while directory.exists():
                try:
                    directory.rmdir()
                except OSError as exc:
                    if time.monotonic() > deadline:
                        pids = pids_in(directory)
                        leftovers.append(f"{directory} ({exc.strerror}; pids {pids})")
                        break
                    time.sleep(0.05)
    for root in {top.parent for top in cluster_dirs(hierarchy, cluster)}:
        with contextlib.suppress(OSError):  # other clusters may still have groups there
            root.rmdir()
    if leftovers:
        raise RunFailed("cgroups not removed: " + "; ".join(leftovers))


def leftover_groups(hierarchy: Hierarchy | None) -> list[Path]:
    """archbench's groups still in the tree (for `down --all` and the tests)."""
    if hierarchy is None:
        return []
    found = []
    for root in {hierarchy.cpu_root, hierarchy.cpuacct_root} - {None}:
        top = root / GROUP  # type: ignore[operator]
        if top.exists():
            found.extend(sorted(p for p in top.rglob("*") if p.is_dir()) or [top])
    return found
