"""How long a rank's CPU budget stopped it during a traced step.

On a node with a CPU budget (the emulated cluster's nodes, a container with a quota) the kernel
stops a group's threads once its quota for the CFS period is spent: no engine records anything
then, so a throttled stretch of a step is a gap in the trace. Each group's `cpu.stat` counts that
time; read around each traced step, it says how much of the step's gap the budget explains (not
where in the step it fell). The groups read are those that can stop the thread running the step
(on a time-dilated node: its own virtual core's, its process's and its node's), found when the
step starts, since a dilated node places the thread in its group at the first timed step. None
where no budget applies."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from archbench.cluster import cgroups


@dataclass(frozen=True)
class Reading:
    groups: tuple[Path, ...]
    throttled_s: float  # summed over the groups


class Throttle:
    def __init__(self):
        self.hierarchy = None
        with contextlib.suppress(Exception):  # no cgroup support: a run without budget figures
            self.hierarchy = cgroups.detect()

    def read(self, groups: tuple[Path, ...] | None = None) -> Reading | None:
        """The throttled time so far of the calling thread's budget groups (or of `groups`)."""
        if self.hierarchy is None:
            return None

        if groups is None:
            groups = tuple(cgroups.thread_budgets(self.hierarchy))
        if not groups:
            return None
        total = 0.0
        for directory in groups:
            stats = cgroups.read_stats(directory, self.hierarchy)
            if stats is None:
                return None
            total += stats["throttled_s"]
        return Reading(groups, total)

    def since(self, start: Reading | None) -> float | None:
        """Seconds the same groups were throttled since `start`; None without a reading.
        Throttling of two groups at once is counted twice: the breakdown caps the sum at the
        step's gap."""
        if start is None:
            return None
        end = self.read(start.groups)
        return None if end is None else max(0.0, end.throttled_s - start.throttled_s)
