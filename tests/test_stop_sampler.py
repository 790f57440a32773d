"""The node library's stop sampler (archbench.cluster.throttle.StopSampler): a thread spinning in
a CFS group capped at a quarter of a core sees its own stops as jumps of its clock; the sampler,
reading the group's cpu.stat meanwhile, must place a stop over each jump, the stops not
overlapping and together no more than the kernel's throttled time. Needs root and a cpu controller."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.cluster import cgroups, nodelib
from archbench.runtime import cgroupread

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or cgroupread.detect() is None,
    reason="needs root and a cgroup cpu controller",
)

PERIOD_US, QUOTA_US = 10_000, 2_500
SPIN = r"""
import json, sys, threading, time
from pathlib import Path
from archbench.cluster.throttle import StopSampler, Throttle
with open(sys.argv[1], "w") as tasks:  # this thread into the capped group
    tasks.write(str(threading.get_native_id()))
throttle, sampler = Throttle(), StopSampler()
assert sampler.start(throttle.read((Path(sys.argv[2]),)))
jumps, last = [], time.time_ns()
end = last + 400_000_000
while last < end:  # a stopped thread sees its clock jump
    now = time.time_ns()
    if now - last > 4_000_000:  # longer than a wait for a core: CFS's slices are shorter
        jumps.append((last, now))
    last = now
stops = [(stop.end_ns, stop.length_ns) for stop in sampler.stop()]
print(json.dumps({"jumps": jumps, "stops": stops}))
"""


def _throttled_ns(group: Path) -> int:
    stats = cgroupread.read_stats(group, cgroupread.detect())
    return int(stats["throttled_s"] * 1e9)


def test_each_stop_of_a_capped_thread_is_placed_over_the_time_it_lost(tmp_path: Path) -> None:
    hierarchy = cgroupread.detect()
    library = nodelib.build_library(tmp_path)
    with cgroups.capped_group(hierarchy, QUOTA_US, PERIOD_US, "archbench-stops-") as group:
        join = group / hierarchy.thread_list
        before = _throttled_ns(group)
        result = subprocess.run(
            [sys.executable, "-c", SPIN, str(join), str(group)],
            capture_output=True, text=True, timeout=60, check=True,
            env={**os.environ, "LD_PRELOAD": str(library)},  # as on a node
        )  # fmt: skip
        throttled = _throttled_ns(group) - before
    measured = json.loads(result.stdout)
    jumps, stops = measured["jumps"], measured["stops"]
    assert len(jumps) >= 10, jumps  # a quarter core for 0.4 s: a stop of ~7.5 ms in most periods
    lengths = [length for _, length in stops]
    assert stops and min(lengths) > 0, stops
    assert sum(lengths) <= throttled * 1.001, (sum(lengths), throttled)
    # the thread's lost time lies under the placed stops: a jump can also be a wait for a core
    # (another process ran), which no budget explains, so the bound is on the total
    spans = [(end - length, end) for end, length in stops]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    lost = sum(high - low for low, high in jumps)
    covered = sum(max(0, min(high, b) - max(low, a)) for low, high in jumps for a, b in spans)
    assert covered >= 0.85 * lost, (covered, lost, jumps, spans)


def test_stop_sampler_off_leaves_a_traced_step_with_its_throttled_total_only(
    tmp_path: Path,
) -> None:
    # on a node (the library loaded) the tracer gets a working sampler with `--stop-sampler on`
    # and none with `off`: only the budget's throttled total is read around each traced step
    library = nodelib.build_library(tmp_path)
    probe = (
        "from archbench.runtime.emulation import step_throttle\n"
        "_, on = step_throttle(True)\n"
        "_, off = step_throttle(False)\n"
        "print(on is not None and on.library is not None, off is None)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "LD_PRELOAD": str(library)},
    )  # fmt: skip
    assert result.stdout.split() == ["True", "True"], result.stdout
