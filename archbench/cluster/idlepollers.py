"""Keeping the machine's cores busy between a dilated node's bursts where the kernel cannot poll.

Where the machine's idle cores do not run haltpoll (`idlestates`: the cpuidle driver is another,
or none, and an idle core halts at once), nothing in the kernel can be told to poll. There the
cluster polls in user space: one process per core, pinned to it, at the lowest priority the
scheduler has (SCHED_IDLE, in a CPU group marked idle), calling sched_yield() in a loop, so a
core waiting for a node's next period never halts. The yield is what makes it a poll: a node's
thread released by its cap's next period is queued without a wake-up, and only a yield (or the
next tick) lets it take the core; a poller that merely spins keeps the core for up to a tick.
`python benchmarks/idle_states.py` measures both: the CPU one capped pass costs, and how late a
capped thread runs after its period starts.

The pollers live in one group for every dilated cluster on the machine: the first dilated `up`
starts them, the last `down` stops them (every process in the group, so a `down` after a killed
`up` stops them too). Their CPU time is idle time to the fidelity probe (`idle_ticks`), so a
machine's idle share reads as it would with the cores polling in the kernel.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from archbench.cluster import cgroups
from archbench.runtime import cgroupread

GROUP = "archbench-idle-pollers"  # beside archbench's node groups, not under their weight
POLL_CODE = "import os\nwhile True:\n    os.sched_yield()"
# the pollers this process started (reaped when it stops them; others' are reaped by init)
_STARTED: list[subprocess.Popen] = []


def group_dir(hierarchy: cgroupread.Hierarchy | None = None) -> Path | None:
    hierarchy = hierarchy or cgroupread.detect()
    return None if hierarchy is None else hierarchy.cpu_root / GROUP


def pids(hierarchy: cgroupread.Hierarchy | None = None) -> list[int]:
    """The pollers running now (none: no dilated cluster holds the cores)."""
    directory = group_dir(hierarchy)
    return [] if directory is None else cgroups.pids_in(directory)


def _make_group(directory: Path, hierarchy: cgroupread.Hierarchy) -> None:
    directory.mkdir(exist_ok=True)
    # the group idle too: a node's group entity preempts it on wake-up at the top level
    with contextlib.suppress(OSError):
        (directory / "cpu.idle").write_text("1")
    weight = ("cpu.shares", "2") if hierarchy.version == "v1" else ("cpu.weight", "1")
    with contextlib.suppress(OSError):
        (directory / weight[0]).write_text(weight[1])


def start(hierarchy: cgroupread.Hierarchy | None = None) -> int:
    """One poller per core the machine has, unless a cluster started them already: how many
    run now (0 where there is no cgroup cpu controller to hold them apart)."""
    hierarchy = hierarchy or cgroupread.detect()
    directory = group_dir(hierarchy)
    if directory is None or hierarchy is None:
        return 0
    running = pids(hierarchy)
    if running:
        return len(running)
    try:
        _start_in(directory, hierarchy)
    except (OSError, subprocess.SubprocessError):  # not ours to do here: the cores halt
        with contextlib.suppress(OSError):
            stop(hierarchy)
        return 0
    return len(pids(hierarchy))


def _start_in(directory: Path, hierarchy: cgroupread.Hierarchy) -> None:
    _make_group(directory, hierarchy)
    procs = directory / "cgroup.procs"
    for core in sorted(os.sched_getaffinity(0)):

        def placed(core: int = core) -> None:
            # in the group, on its core, at the lowest priority, before the loop starts
            procs.write_text(str(os.getpid()))
            os.sched_setaffinity(0, {core})
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

        poller = subprocess.Popen(
            [sys.executable, "-c", POLL_CODE],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=placed, start_new_session=True, close_fds=True,
        )  # fmt: skip
        _STARTED.append(poller)


def stop(hierarchy: cgroupread.Hierarchy | None = None, timeout_s: float = 5.0) -> None:
    """Stops every poller and removes their group. Safe to repeat."""
    directory = group_dir(hierarchy)
    if directory is None or not directory.exists():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in pids(hierarchy):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            directory.rmdir()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    while _STARTED:
        with contextlib.suppress(subprocess.TimeoutExpired):
            _STARTED.pop().wait(timeout=timeout_s)


def idle_ticks(hierarchy: cgroupread.Hierarchy | None = None) -> int:
    """The pollers' CPU so far, in the clock ticks of /proc/stat: time the cores would have
    spent idle."""
    ticks = 0
    for pid in pids(hierarchy):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks
