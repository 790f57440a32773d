"""What a stop costs a capped thread on this machine, measured when a dilated cluster comes up.

A dilated node's thread runs period / D of every CFS period and is stopped for the rest; a host
of its own never stops it. Where the machine's last-level cache is shared with other work (a
virtual machine's neighbours on the same hardware), the thread's lines leave it during each
stop and every burst begins by refilling them, so the same work costs more CPU capped than
uncapped, and virtual time runs slower than the host it stands for (`benchmarks/cap_cost.py`
measures it at several periods and with a model's pass).

`measure` gives the ratio for a random gather over a 2 MB working set, at the cluster's own
period and quota: a child process alternates windows uncapped and in a temporary capped group,
so the machine's speed of the moment is in both sides. `cluster up` keeps it
(`ClusterState.cap_cost_ratio`), `cluster status` says it, and every record carries it
(`fidelity.cap_cost_ratio`): a ratio near 1 says the nodes' compute costs what a host's would,
one well above it says every compute time of the cluster is that much slower (by the neighbours'
use of the cache at the time, which changes from minute to minute). It is the cluster's
condition when it came up, not a run's.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from archbench.cluster import cgroups
from archbench.cluster.dilation import Dilation
from archbench.runtime import cgroupread

WORKING_SET_MB = 2.0
ROUNDS = 5
UNCAPPED_WINDOW_S = 0.04  # real seconds of work per uncapped window; a capped one is D times it
TIMEOUT_S = 60.0


def gather_work(megabytes: float) -> Callable[[], None]:
    """One unit: every element of a `megabytes` working set (int64 data and int64 indices
    together) read once, the data in a random order."""
    import numpy as np  # deferred: `cluster up` loads it only in the measuring child

    count = max(1, int(megabytes * 2**20 / 16))
    rng = np.random.default_rng(1)
    data = rng.integers(0, 2**31, size=count)
    order = rng.permutation(count)
    sink = np.empty(count, dtype=data.dtype)
    return lambda: np.take(data, order, out=sink)


def move_to(hierarchy: cgroupread.Hierarchy, group: Path) -> None:
    """Every thread of this process into `group` (v2: the whole process)."""
    if hierarchy.version == "v2":
        (group / "cgroup.procs").write_text(str(os.getpid()))
        return
    for thread in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            (group / hierarchy.thread_list).write_text(thread)


def cpu_per_unit(work: Callable[[], None], wall_s: float) -> float:
    """CPU seconds of this process per unit of `work`, repeated for `wall_s` of real time."""
    work()  # the first unit after a move pays for the move
    started, cpu_started, units = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - started < wall_s:
        work()
        units += 1
    return (time.process_time() - cpu_started) / units


def alternate(
    hierarchy: cgroupread.Hierarchy,
    work: Callable[[], None],
    groups: dict[float, Path],
    dilation: float,
    rounds: int,
    window_s: float,
) -> tuple[list[float], dict[float, list[float]]]:
    """(uncapped CPU per unit, {key: capped CPU per unit}), one of each per round and group, the
    windows alternating; a capped window lasts D times an uncapped one (the same CPU). Every
    thread is back in the root group afterwards."""
    for _ in range(20):
        work()  # warm: allocations, first touches
    uncapped, capped = [], {key: [] for key in groups}
    try:
        for _ in range(rounds):
            for key, group in groups.items():
                move_to(hierarchy, hierarchy.cpu_root)
                uncapped.append(cpu_per_unit(work, window_s))
                move_to(hierarchy, group)
                capped[key].append(cpu_per_unit(work, window_s * dilation))
    finally:
        move_to(hierarchy, hierarchy.cpu_root)
    return uncapped, capped


def measure(dilation: float, period_us: int, parent: Path | None = None) -> float | None:
    """CPU of the gather capped at 1/`dilation` of a core per `period_us` over its CPU uncapped
    (medians over the rounds); None where it could not be measured (no cgroup controller, the
    child failed). The capped group is made in `parent` (a cluster's own group: its `down`
    removes one a killed `up` left), else at the top of the hierarchy."""
    hierarchy = cgroupread.detect()
    if hierarchy is None or dilation <= 1:
        return None
    quota_us = max(cgroups.MIN_QUOTA_US, Dilation(dilation, 1, period_us).thread_quota_us)
    try:
        with cgroups.capped_group(
            hierarchy, quota_us, period_us, "archbench-capcost-", parent
        ) as group:
            child = subprocess.run(
                [sys.executable, "-m", "archbench.cluster.capcost", str(group), str(dilation)],
                capture_output=True, text=True, timeout=TIMEOUT_S,
            )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return float(child.stdout.strip().splitlines()[-1]) if child.returncode == 0 else None
    except (IndexError, ValueError):
        return None


def main() -> int:
    """The child: prints the ratio for the capped group argv[1] at dilation argv[2]."""
    hierarchy = cgroupread.detect()
    if hierarchy is None:
        return 2
    group, dilation = Path(sys.argv[1]), float(sys.argv[2])
    uncapped, capped = alternate(
        hierarchy, gather_work(WORKING_SET_MB), {0: group}, dilation, ROUNDS, UNCAPPED_WINDOW_S
    )
    print(f"{statistics.median(capped[0]) / statistics.median(uncapped):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
