"""CPU budgets of emulated nodes, enforced by the kernel's CFS bandwidth control.

Each node gets a cgroup `archbench/<cluster>/<node>` whose quota is `cpus x period`: every process
the node runs (its sshd, and through it the launcher's daemons and the ranks) lives in it, so a
node computes like a host with that many cores however busy the other nodes are. Both cgroup
interfaces are supported and detected: v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, usage from
the `cpuacct` controller when it is mounted) and v2 (`cpu.max`, usage in `cpu.stat`).

Reading is separate from building: `process_budget()` and `read_stats()` are plain file reads
that any rank may call, on the emulated cluster or on a real host whose job runs in a cgroup.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from archbench.errors import RunFailed, UsageError
from archbench.launch import usable_cores

GROUP = "archbench"
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


def default_cpus_per_node(nodes: int, free_cpus: float) -> float:
    """A fair share of the free CPUs that leaves a tenth to mpirun, sshd and the sweep driver."""
    return round(0.9 * max(free_cpus, 0.0) / nodes, 3)


def check_budget(cpus_per_node: float, nodes: int, period_us: int, committed: float = 0.0) -> None:
    """UsageError unless the budgets fit the machine (beside the budgets of other clusters,
    `committed` CPUs) and the kernel's limits."""
    cores = usable_cores()
    if not cpus_per_node > 0:
        raise UsageError(
            f"no CPUs left for node budgets: other emulated clusters hold {committed:g} of "
            f"this machine's {cores} (bring one down, or pass --cpus-per-node off)"
        )
    if cpus_per_node * nodes + committed > cores + 1e-9:
        held = f" beside the {committed:g} that other clusters' budgets hold" if committed else ""
        raise UsageError(
            f"--cpus-per-node {cpus_per_node:g} x {nodes} nodes = {cpus_per_node * nodes:g} "
            f"CPUs{held}, more than this machine's {cores}: the nodes would share cores"
        )
    if not MIN_PERIOD_US <= period_us <= MAX_PERIOD_US:
        raise UsageError(f"--cfs-period-ms {period_us / 1000:g} is out of range 1..1000")
    if cpus_per_node * period_us < MIN_QUOTA_US:
        raise UsageError(
            f"a budget of {cpus_per_node} CPUs per {period_us / 1000:g} ms period is a quota "
            f"under the kernel's 1 ms minimum; raise --cfs-period-ms"
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
    hierarchy: Hierarchy, cluster: str, node: str, cpus: float, period_us: int
) -> list[Path]:
    """Make the node's cgroup(s) with quota = cpus x period; returns the directories to join."""
    quota_us = max(MIN_QUOTA_US, int(round(cpus * period_us)))
    if hierarchy.version == "v2":
        _enable_cpu_controller(hierarchy.cpu_root)
    dirs = hierarchy.group_dirs(cluster, node)
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    cpu_dir = dirs[0]
    for level in (cpu_dir.parent.parent, cpu_dir.parent, cpu_dir):
        if hierarchy.version == "v1":
            _write(level / "cpu.shares", str(V1_SHARES))
        else:
            if level != cpu_dir:
                _enable_cpu_controller(level)
            _write(level / "cpu.weight", str(V2_WEIGHT))
    if hierarchy.version == "v1":
        _write(cpu_dir / "cpu.cfs_period_us", str(period_us))
        _write(cpu_dir / "cpu.cfs_quota_us", str(quota_us))
    else:
        _write(cpu_dir / "cpu.max", f"{quota_us} {period_us}")
    return dirs


def join_groups(dirs: list[Path], pid: int = 0) -> None:
    """Move a process (0: this one) into the node's groups; its children inherit them."""
    for directory in dirs:
        (directory / "cgroup.procs").write_text(str(pid or os.getpid()))


def _pids_in(directory: Path) -> list[int]:
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
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True) + [top]:
            deadline = time.monotonic() + timeout_s
            while directory.exists():
                try:
                    directory.rmdir()
                except OSError as exc:
                    if time.monotonic() > deadline:
                        pids = _pids_in(directory)
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


def _own_group(controller: str) -> str | None:
    """This process's path in the hierarchy of `controller` ('' for v2's unified line)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
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
