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

Reading is separate from building: `process_budget()` and `read_stats()` are plain file reads
that any rank may call, on the emulated cluster or on a real host whose job runs in a cgroup.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from archbench.common.errors import RunFailed, UsageError

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


@dataclass(frozen=True)
class Hierarchy:
    """Where the cpu controller is mounted and which interface it speaks."""

    version: str  # "v1" | "v2"
    cpu_root: Path  # the cpu controller's mount (v1) or the unified mount (v2)
    cpuacct_root: Path | None = None  # v1 only: where usage is counted, when mounted apart

    @property
    def thread_list(self) -> str:
        """The file of a group that lists its threads, and that a thread joins by its id."""
        return "tasks" if self.version == "v1" else "cgroup.threads"

    def node_dir(self, cluster: str, node: str) -> Path:
        return self.cpu_root / GROUP / cluster / node

    def group_dirs(self, cluster: str, node: str) -> list[Path]:
        """Every directory a node's processes join (v1: cpu and, apart, cpuacct)."""
        dirs = [self.node_dir(cluster, node)]
        if self.cpuacct_root is not None and self.cpuacct_root != self.cpu_root:
            dirs.append(self.cpuacct_root / GROUP / cluster / node)
        return dirs

    def cluster_dirs(self, cluster: str) -> list[Path]:
        roots = [self.cpu_root]
        if self.cpuacct_root is not None and self.cpuacct_root != self.cpu_root:
            roots.append(self.cpuacct_root)
        return [root / GROUP / cluster for root in roots]


def _mounts(table: Path) -> list[tuple[str, Path, set[str]]]:
    entries = []
    with contextlib.suppress(OSError):
        for line in table.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4:
                entries.append((fields[2], Path(fields[1]), set(fields[3].split(","))))
    return entries


def _detect_in(table: Path, root: Path) -> Hierarchy | None:
    cpu_root = cpuacct_root = None
    mounts = [
        (fstype, root / str(mount).lstrip("/"), opts) for fstype, mount, opts in _mounts(table)
    ]
    for fstype, mount, options in mounts:
        if fstype == "cgroup" and "cpu" in options and (mount / "cpu.cfs_quota_us").exists():
            cpu_root = mount
        if fstype == "cgroup" and "cpuacct" in options and (mount / "cpuacct.usage").exists():
            cpuacct_root = mount
    if cpu_root is not None:
        return Hierarchy("v1", cpu_root, cpuacct_root)
    for fstype, mount, _ in mounts:
        if fstype == "cgroup2":
            with contextlib.suppress(OSError):
                if "cpu" in (mount / "cgroup.controllers").read_text().split():
                    return Hierarchy("v2", mount)
    return None


def detect() -> Hierarchy | None:
    """The cgroup interface that offers the cpu controller here, or None."""
    return _detect_in(Path("/proc/self/mounts"), Path("/"))


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
    for fstype, mount, options in _mounts(Path("/proc/self/mounts")):
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
    dirs = hierarchy.group_dirs(cluster, node)
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
    return hierarchy.node_dir(cluster, node) / THREADS_GROUP


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
    node_dir = hierarchy.node_dir(cluster, node)
    with contextlib.suppress(OSError, ValueError):
        return [int(tid) for tid in (node_dir / hierarchy.thread_list).read_text().split()]
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
    for top in hierarchy.cluster_dirs(cluster):
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
    for root in {top.parent for top in hierarchy.cluster_dirs(cluster)}:
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


# --- reading: what a process is allowed and what the kernel did ------------------------------


def _own_group(controller: str, source: str = "/proc/self/cgroup") -> str | None:
    """This process's path in the hierarchy of `controller` ('' for v2's unified line); with
    `/proc/thread-self/cgroup`, the calling thread's (a thread of a dilated node has a group of
    its own)."""
    with contextlib.suppress(OSError):
        for line in Path(source).read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(",") or (controller == "" and controllers == ""):
                return path
    return None


def process_group_dir(hierarchy: Hierarchy | None = None) -> Path | None:
    """The cpu cgroup directory this process lives in."""
    hierarchy = hierarchy or detect()
    if hierarchy is None:
        return None
    path = _own_group("cpu" if hierarchy.version == "v1" else "")
    if path is None:
        return None
    return hierarchy.cpu_root / path.lstrip("/")


def thread_group_dir(hierarchy: Hierarchy | None = None) -> Path | None:
    """The cpu cgroup directory the calling thread lives in (on a dilated node, once its caps
    are armed, a group of its own)."""
    hierarchy = hierarchy or detect()
    if hierarchy is None:
        return None
    path = _own_group("cpu" if hierarchy.version == "v1" else "", "/proc/thread-self/cgroup")
    return None if path is None else hierarchy.cpu_root / path.lstrip("/")


def thread_budgets(hierarchy: Hierarchy | None = None) -> list[Path]:
    """The groups whose quota can stop the calling thread: its own group and each ancestor with
    a quota (on a dilated node: the thread's, its process's and its node's)."""
    hierarchy = hierarchy or detect()
    current = thread_group_dir(hierarchy) if hierarchy is not None else None
    if hierarchy is None or current is None:
        return []
    budgets = []
    while True:
        if _quota_of(current, hierarchy.version) is not None:
            budgets.append(current)
        if current == hierarchy.cpu_root or current.parent == current:
            return budgets
        current = current.parent


def _quota_of(directory: Path, version: str) -> tuple[int, int] | None:
    """(quota_us, period_us) set on this group itself, or None when unlimited."""
    try:
        if version == "v1":
            quota = int((directory / "cpu.cfs_quota_us").read_text())
            period = int((directory / "cpu.cfs_period_us").read_text())
        else:
            quota_text, period_text = (directory / "cpu.max").read_text().split()
            if quota_text == "max":
                return None
            quota, period = int(quota_text), int(period_text)
    except (OSError, ValueError):
        return None
    return (quota, period) if quota > 0 else None


@dataclass(frozen=True)
class Budget:
    cpus: float  # quota / period of the tightest group on the way to the root
    quota_us: int
    period_us: int
    group: str  # the group that sets it, relative to the hierarchy's root
    cgroup: str  # "v1" | "v2"


def process_budget() -> Budget | None:
    """The CPU budget the kernel enforces on this process (the tightest ancestor), or None."""
    hierarchy = detect()
    directory = process_group_dir(hierarchy)
    if hierarchy is None or directory is None:
        return None
    best: Budget | None = None
    current = directory
    while True:
        quota = _quota_of(current, hierarchy.version)
        if quota is not None:
            cpus = quota[0] / quota[1]
            if best is None or cpus < best.cpus:
                relative = "/" + str(current.relative_to(hierarchy.cpu_root)).strip(".")
                best = Budget(cpus, quota[0], quota[1], relative, hierarchy.version)
        if current == hierarchy.cpu_root or current.parent == current:
            break
        current = current.parent
    return best


def read_stats(directory: Path, hierarchy: Hierarchy) -> dict[str, float] | None:
    """Kernel counters of one group: periods, throttled periods, throttled and used CPU seconds."""
    try:
        fields = dict(
            (line.split()[0], int(line.split()[1]))
            for line in (directory / "cpu.stat").read_text().splitlines()
            if len(line.split()) == 2
        )
    except (OSError, ValueError):
        return None
    stats: dict[str, float] = {
        "nr_periods": fields.get("nr_periods", 0),
        "nr_throttled": fields.get("nr_throttled", 0),
    }
    if hierarchy.version == "v1":
        stats["throttled_s"] = fields.get("throttled_time", 0) / 1e9
        usage = None
        if hierarchy.cpuacct_root is not None:
            relative = directory.relative_to(hierarchy.cpu_root)
            with contextlib.suppress(OSError, ValueError):
                usage = int((hierarchy.cpuacct_root / relative / "cpuacct.usage").read_text()) / 1e9
        stats["usage_s"] = usage  # type: ignore[assignment]
    else:
        stats["throttled_s"] = fields.get("throttled_usec", 0) / 1e6
        stats["usage_s"] = fields.get("usage_usec", 0) / 1e6
    return stats


def stats_delta(before: dict | None, after: dict | None) -> dict | None:
    if before is None or after is None:
        return None
    delta = {}
    for key, value in after.items():
        if value is None or before.get(key) is None:
            delta[key] = None
        else:
            delta[key] = value - before[key]
    return delta
