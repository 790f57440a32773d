"""How long a rank's CPU budget stopped it during a traced step.

On a node with a CPU budget (the emulated cluster's nodes, a container with a quota) the kernel
stops a group's threads once its quota for the CFS period is spent: no engine records anything
then, so a throttled stretch of a step is a gap in the trace. Each group's `cpu.stat` counts that
time; read around each traced step, it says how much of the step's gap the budget explains. The
groups read are those that can stop the thread running the step (on a time-dilated node: its own
virtual core's, its process's and its node's), found when the step starts, since a dilated node
places the thread in its group at the first timed step. None where no budget applies. The run
path reaches it through `archbench.runtime.emulation.step_throttle`.

Where the emulated node's library is loaded (`native/nodelib.c`), `StopSampler` also says where
each stop fell: the kernel adds a stop's length to a group's throttled time when the stop ends,
and the library's sampler thread reads the same groups every `STOP_SAMPLE_INTERVAL_US` during the step,
noting each increase with the wall-clock time it saw it. A stop is then a span ending there (its
end known within the interval). Its length: the increase, which sums the group's queues on every
CPU (measured on 2 cores: up to 2.4 periods in one period of a single thread), bounded by the time
since the same group's previous stop ended (or the sampling began), since its stops do not
overlap; the longest over the groups that counted it at that moment. A stop can outlast its
period (a thread capped at 2.5 ms per 10 ms was seen stopped for up to 17.4 ms: a refresh pays off
what the group overran first), so no tighter bound holds; a stop may therefore be drawn up to
the group's quota too early, where the group ran before it. It claims only time no other span
covers."""

from __future__ import annotations

import contextlib
import ctypes
import time
from dataclasses import dataclass
from pathlib import Path

from archbench.cluster import threadcaps
from archbench.runtime import cgroupread
from archbench.runtime.virtualtime import STOP_SAMPLE_INTERVAL_US

MAX_STOPS = 4096


@dataclass(frozen=True)
class Reading:
    groups: tuple[Path, ...]
    throttled_s: float  # summed over the groups


class Throttle:
    def __init__(self):
        self.hierarchy = None
        with contextlib.suppress(Exception):  # no cgroup support: a run without budget figures
            self.hierarchy = cgroupread.detect()

    def read(self, groups: tuple[Path, ...] | None = None) -> Reading | None:
        """The throttled time so far of the calling thread's budget groups (or of `groups`)."""
        if self.hierarchy is None:
            return None

        if groups is None:
            groups = tuple(cgroupread.thread_budgets(self.hierarchy))
        if not groups:
            return None
        total = 0.0
        for directory in groups:
            stats = cgroupread.read_stats(directory, self.hierarchy)
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


@dataclass(frozen=True)
class Stop:
    end_ns: int  # when the sampler saw it had ended (CLOCK_REALTIME, as the trace's spans)
    length_ns: int


class StopSampler:
    """Where a traced step's CPU-budget stops fell (see the module's docstring); inactive where
    the node library is not loaded (a real host, localhost): the step-level reading stays."""

    def __init__(self):
        self.library = threadcaps.node_library()
        self.groups = 0
        self.started_ns = 0
        self.running = False
        if self.library is not None:
            self.library.archbench_stops_start.argtypes = [ctypes.c_char_p, ctypes.c_long]
            self.library.archbench_stops_stop.restype = ctypes.c_long
            self.library.archbench_stops_stop.argtypes = [
                ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_longlong),
                ctypes.POINTER(ctypes.c_int), ctypes.c_long,
            ]  # fmt: skip

    def start(self, reading: Reading | None) -> bool:
        """Samples the groups of `reading` from now on; False where it cannot."""
        if self.library is None or reading is None or self.running:
            return False
        self.groups, self.started_ns = len(reading.groups), time.time_ns()
        paths = "\n".join(str(directory / "cpu.stat") for directory in reading.groups)
        self.running = (
            self.library.archbench_stops_start(paths.encode(), STOP_SAMPLE_INTERVAL_US) == 0
        )
        return self.running

    def stop(self) -> list[Stop] | None:
        """The stops seen since `start` (None where it did not run)."""
        if not self.running:
            return None
        self.running = False
        seen = (ctypes.c_longlong * MAX_STOPS)()
        added = (ctypes.c_longlong * MAX_STOPS)()
        group = (ctypes.c_int * MAX_STOPS)()
        count = self.library.archbench_stops_stop(seen, added, group, MAX_STOPS)
        if count < 0:
            return None
        previous = [self.started_ns] * self.groups  # each group's last stop's end
        longest: dict[int, int] = {}  # end -> the stop's length
        for i in range(count):
            end, which = int(seen[i]), group[i]
            length = min(int(added[i]), end - previous[which])
            previous[which] = end
            longest[end] = max(longest.get(end, 0), length)
        return [Stop(end, length) for end, length in sorted(longest.items())]
