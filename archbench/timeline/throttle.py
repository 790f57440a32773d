"""How long a rank's CPU budget stopped it during a traced step.

On a node with a CPU budget (the emulated cluster's nodes, a container with a quota) the kernel
stops every thread of the group once its quota for the CFS period is spent: no engine records
anything then, so a throttled stretch of a step is a gap in the trace. The group's `cpu.stat`
counts that time; read around each traced step, it says how much of the step's gap the budget
explains (not where in the step it fell). None where the process has no budget."""

from __future__ import annotations

import contextlib
from pathlib import Path


class Throttle:
    def __init__(self):
        self.read = _no_budget
        with contextlib.suppress(Exception):  # no cgroup support: a run without budget figures
            from archbench.cluster import cgroups

            hierarchy, budget = cgroups.detect(), cgroups.process_budget()
            if hierarchy is not None and budget is not None:
                directory = Path(hierarchy.cpu_root) / budget.group.lstrip("/")

                def read() -> float | None:
                    stats = cgroups.read_stats(directory, hierarchy)
                    return stats["throttled_s"] if stats else None

                self.read = read

    def seconds(self) -> float | None:
        """The budget group's throttled time so far (s), or None."""
        return self.read()


def _no_budget() -> None:
    return None
