"""What a capped process's compute costs in CPU with the machine's idle cores halting, and polling.

A time-dilated node computes in bursts of 1/D of each CFS period; between them its core is idle.
This starts one process at a time in a CPU cgroup capped at 1/D of a core (period 12.5 ms, D from
--dilation), times a model's forward + backward pass (TensorFlow, one thread each for intra- and
inter-op work, as archbench's ranks run) over a few windows, and prints the CPU seconds one pass
cost (the process's CPU time over the passes) and its wall time. Runs alternate between the
machine's idle cores as it has them and polling before they halt as a dilated cluster sets them
(archbench.cluster.idlestates), --pairs times, after an uncapped run for reference; the medians
and ranges say how much halting between bursts changes what the same work costs. In the same
group, a busy loop then records each stop it sees: how much longer than the period less the
quota it waited before running again (late: the release of a cap queued behind something else
on the core) and the share of periods it ran in.

Where the machine's idle cores do not run the haltpoll cpuidle driver, polling is what a
dilated cluster does there instead: one lowest-priority process per core
(archbench.cluster.idlepollers). Needs root and cgroup v1's cpu controller or v2; refuses to run
while a dilated cluster is up. Usage:
python benchmarks/idle_states.py [--model mlp] [--pairs 4] [--dilation 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from archbench.cluster import cgroups, idlepollers, idlestates
from archbench.runtime import cgroupread

PERIOD_US = 12_500
HERE = Path(__file__).resolve().parent
PASS_CODE = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[4])  # this folder: the pass is cap_cost's
from cap_cost import model_pass
one_pass = model_pass(sys.argv[1])
for _ in range(20):
    one_pass()
group = sys.argv[3]
if group:  # capped from here on: start-up ran at full speed
    with open(group, "w") as tasks:
        tasks.write(str(os.getpid()))
    for task in os.listdir("/proc/self/task"):
        with open(group, "w") as tasks:
            tasks.write(task)
cpu, wall = [], []
for window in range(8):
    started, cpu_started, passes = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - started < float(sys.argv[2]):
        one_pass()
        passes += 1
    if window:  # the first window settles the cap's periods
        cpu.append((time.process_time() - cpu_started) / passes)
        wall.append((time.perf_counter() - started) / passes)
print(json.dumps({"cpu_s": sorted(cpu)[len(cpu) // 2], "wall_s": sorted(wall)[len(wall) // 2]}))
"""


LATE_CODE = r"""
import json, os, sys, time
with open(sys.argv[1], "w") as tasks:
    tasks.write(str(os.getpid()))
stops, last = [], time.perf_counter()
end = last + float(sys.argv[2])
while last < end:
    now = time.perf_counter()
    if now - last > 0.0005:  # stopped by the cap (a loop turn is a microsecond)
        stops.append(now - last)
    last = now
print(json.dumps(stops[3:]))
"""


def _stops(tasks_file: str, seconds: float) -> list[float]:
    result = subprocess.run(
        [sys.executable, "-c", LATE_CODE, tasks_file, str(seconds)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def _measure(model: str, window_s: float, tasks_file: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", PASS_CODE, model, str(window_s), tasks_file, str(HERE)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--dilation", type=float, default=5.0)
    args = parser.parse_args(argv)
    if idlestates.SAVED.exists() or idlepollers.pids():
        print("idle_states: a dilated cluster holds the idle cores polling; bring it down first")
        return 2
    if idlestates.poll_us() is None:  # no haltpoll: the cores poll in user space
        as_found, hold, release = "halting", idlepollers.start, idlepollers.stop
        polling = "idle cores polled by lowest-priority processes"
    else:
        as_found = f"halting after {idlestates.poll_us()} us of polling"
        hold, release, polling = idlestates.hold, idlestates.release, "idle cores polling"
    window_s = 10 * PERIOD_US / 1e6  # ten periods, as a probe's compute window
    uncapped = _measure(args.model, window_s / args.dilation, "")
    hierarchy = cgroupread.detect()
    if hierarchy is None:
        raise SystemExit("idle_states: no cgroup cpu controller on this machine")
    halting = f"idle cores as found ({as_found})"
    runs: dict[str, list[dict]] = {halting: [], polling: []}
    stops: dict[str, list[float]] = {halting: [], polling: []}
    stop_seconds = 2.0
    quota = int(PERIOD_US / args.dilation)  # a group capped at 1/D of a core
    with cgroups.capped_group(hierarchy, quota, PERIOD_US, "archbench-idle-") as directory:
        join = directory / ("tasks" if hierarchy.version == "v1" else "cgroup.procs")
        for _ in range(args.pairs):
            for label, held in ((halting, False), (polling, True)):
                if held:
                    hold()
                try:
                    runs[label].append(_measure(args.model, window_s, str(join)))
                    stops[label].extend(_stops(str(join), stop_seconds))
                finally:
                    release()
    print(f"{args.model}, batch 32; cap 1/{args.dilation:g} of a core")
    print(f"uncapped: {1000 * uncapped['cpu_s']:.3f} ms CPU a pass")
    for label, measured in runs.items():
        cpu = [1000 * run["cpu_s"] for run in measured]
        wall = [1000 * run["wall_s"] / args.dilation for run in measured]
        print(
            f"{label}: CPU a pass median {statistics.median(cpu):.3f} ms "
            f"(range {min(cpu):.3f}-{max(cpu):.3f}, {statistics.median(cpu) / (1000 * uncapped['cpu_s']):.2f}x uncapped); "
            f"wall / D median {statistics.median(wall):.3f} ms"
        )
    idle_us = PERIOD_US - quota
    for label, seen in stops.items():
        late = sorted(1000 * stop - idle_us / 1000 for stop in seen)
        ran = len(seen) / (args.pairs * stop_seconds * 1e6 / PERIOD_US)
        print(
            f"{label}: a capped busy loop ran again {statistics.median(late):.2f} ms "
            f"(p90 {late[int(0.9 * len(late))]:.2f} ms) later than {idle_us / 1000:g} ms after "
            f"its cap stopped it; it ran in {ran:.0%} of the periods"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
