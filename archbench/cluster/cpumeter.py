"""The CPU seconds a process's own threads used: what a compute window cost, besides how long it
took.

A compute pass's time on a dilated node is its CPU cost times how much of its virtual core the
process got. The two fail differently: a node whose threads do not get their virtual core
(background threads in its budget, cores shared with other nodes) is an emulation fault; a pass
whose work costs more CPU than the same pass did elsewhere (the machine slower at the time, caches
shared with nodes computing at once, a costlier engine call) is not the caps' doing. Timing the
window's CPU beside its wall time tells them apart (`timing.compute_core_share_per_rank`).

On a dilated node with armed caps the meter reads the process's own group (`vcpu/p<pid>`, which
holds its foreground threads; a communication library's background threads sit apart, in
`vcpu/b<pid>`): kernel accounting of exactly the threads whose budget the compute spends.
Elsewhere it is the process's CPU time (every thread of it).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from archbench.cluster import cgroups

_FOREGROUND_THREAD = re.compile(r"/vcpu/p\d+/t\d+$")


def own_cpu_meter() -> Callable[[], float]:
    """A reader of cumulative CPU seconds of this process's own threads (see the module's
    docstring); call it after the caps are armed, from the thread that computes. A reading the
    kernel no longer gives (the group gone) is NaN."""
    hierarchy = cgroups.detect()
    group = cgroups.thread_group_dir(hierarchy) if hierarchy is not None else None
    if hierarchy is not None and group is not None and _FOREGROUND_THREAD.search(str(group)):
        process_group = group.parent

        def group_usage() -> float:
            stats = cgroups.read_stats(process_group, hierarchy)
            usage = stats.get("usage_s") if stats else None
            return float(usage) if usage is not None else math.nan

        if (cgroups.read_stats(process_group, hierarchy) or {}).get("usage_s") is not None:
            return group_usage
    return time.process_time
