"""Reading cgroups: where the cpu controller is mounted, the CPU budget the kernel enforces on this
process or thread, and a group's counters (periods, throttled time, usage). Plain file reads any
rank may make, on an emulated node or on a real host whose job runs in a cgroup (a container's
or a batch job's budget); building and capping groups is the emulated cluster's
(`archbench.cluster.cgroups`). Both interfaces: v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`,
usage from `cpuacct` where mounted) and v2 (`cpu.max`, `cpu.stat`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path


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


def mounts(table: Path) -> list[tuple[str, Path, set[str]]]:
    """(type, mount point, options) of each line of a mount table."""
    entries = []
    with contextlib.suppress(OSError):
        for line in table.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4:
                entries.append((fields[2], Path(fields[1]), set(fields[3].split(","))))
    return entries


def _detect_in(table: Path, root: Path) -> Hierarchy | None:
    cpu_root = cpuacct_root = None
    mounted = [
        (fstype, root / str(mount).lstrip("/"), opts) for fstype, mount, opts in mounts(table)
    ]
    for fstype, mount, options in mounted:
        if fstype == "cgroup" and "cpu" in options and (mount / "cpu.cfs_quota_us").exists():
            cpu_root = mount
        if fstype == "cgroup" and "cpuacct" in options and (mount / "cpuacct.usage").exists():
            cpuacct_root = mount
    if cpu_root is not None:
        return Hierarchy("v1", cpu_root, cpuacct_root)
    for fstype, mount, _ in mounted:
        if fstype == "cgroup2":
            with contextlib.suppress(OSError):
                if "cpu" in (mount / "cgroup.controllers").read_text().split():
                    return Hierarchy("v2", mount)
    return None


def detect() -> Hierarchy | None:
    """The cgroup interface that offers the cpu controller here, or None."""
    return _detect_in(Path("/proc/self/mounts"), Path("/"))


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
