"""The CPU seconds a process's own threads used: what a compute window cost, besides how long it
took.

A compute pass's time on a dilated node is its CPU cost times how much of its virtual core the
process got. The two fail differently: a node whose threads do not get their virtual core
(cores shared with other nodes, other threads in the process's budget) is an emulation fault; a
pass whose work costs more CPU than the same pass did elsewhere (the machine slower at the time,
caches shared with nodes computing at once, a costlier engine call) is not the caps' doing.
Timing the window's CPU beside its wall time tells them apart
(`timing.compute_core_share_per_rank`).

The process's own threads are its foreground ones: on a dilated node a communication library's
background threads (Horovod's loop, Open MPI's progress thread) run on virtual cores of their own
(`vcpu/b<pid>`), outside the process's budget, as on a host they would run on another core. So
the meter is the process's CPU time less its background threads' (each thread's time on a CPU,
/proc/self/task/<tid>/schedstat; the threads found once, when the meter is made). Where the process's own group counts its usage (cgroup v2, or
v1 with cpu and cpuacct mounted together) the meter reads that group instead: kernel accounting
of exactly the threads whose budget the compute spends. Off a dilated node there are no
background threads, and the meter is the process's CPU time.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

from archbench.cluster import threadcaps
from archbench.runtime import cgroupread

_FOREGROUND_THREAD = re.compile(r"/vcpu/p\d+/t\d+$")


def _thread_cpu_s(tid: int) -> float:
    """Seconds the thread has run on a CPU (0 once it is gone)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0]) / 1e9
    return 0.0


def foreground_meter(background: list[int]) -> Callable[[], float]:
    """The process's CPU seconds less those of the threads `background` (see the module). The
    list is taken once, when the meter is made: a communication library starts its threads when
    it starts, before the first compute window, so a reading costs a file per such thread."""

    def foreground_cpu_s() -> float:
        return time.process_time() - sum(_thread_cpu_s(tid) for tid in background)

    return foreground_cpu_s


def own_cpu_meter() -> Callable[[], float]:
    """A reader of cumulative CPU seconds of this process's own threads (see the module's
    docstring); call it after the caps are armed, from the thread that computes. A reading the
    kernel no longer gives (the group gone) is NaN."""
    hierarchy = cgroupread.detect()
    group = cgroupread.thread_group_dir(hierarchy) if hierarchy is not None else None
    if hierarchy is not None and group is not None and _FOREGROUND_THREAD.search(str(group)):
        process_group = group.parent

        def group_usage() -> float:
            stats = cgroupread.read_stats(process_group, hierarchy)
            usage = stats.get("usage_s") if stats else None
            return float(usage) if usage is not None else math.nan

        if not math.isnan(group_usage()):
            return group_usage
    return foreground_meter(threadcaps.background_thread_ids())
