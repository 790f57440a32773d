"""One virtual core per thread, from inside a rank: arming and disarming this process's caps.

On a time-dilated node the preloaded node library (`native/nodelib.c`) keeps every thread in a
CFS group of its own capped at 1/D of a core. archbench's own processes start with their caps
off, so that importing TensorFlow and building graphs are not slowed D times, and arm them here
before their first timed step: every thread that exists is placed then, and every thread started
afterwards places itself before it runs. `disarm()` moves them back to the node's group (between
the runs of a warm group, for instance). Off a dilated node both are no-ops.
"""

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass

from archbench.runtime import cgroupread
from archbench.runtime.virtualtime import factor, node_library_path

_THREAD_GROUP = re.compile(r"/vcpu/[pb]\d+/t\d+$")
_BACKGROUND_GROUP = re.compile(r"/vcpu/b\d+/t\d+$")


@dataclass(frozen=True)
class ArmResult:
    placed: int  # threads placed by this call (or moved back, for disarm)
    failures: int  # placements that failed since the process started (those threads run uncapped)


def node_library() -> ctypes.CDLL | None:
    """The node library loaded in this process (None off an emulated node)."""
    path = node_library_path()
    if path is None:
        return None
    try:
        return ctypes.CDLL(path)  # the copy already loaded: the same handle
    except OSError:
        return None


def _call(name: str) -> int | None:
    library = node_library()
    if library is None:
        return None
    result = getattr(library, name)()
    return None if result < 0 else int(result)


def arm() -> ArmResult | None:
    """Caps every thread of this process at its node's 1/D; None off a capped node."""
    placed = _call("archbench_caps_arm")
    if placed is None:
        return None
    return ArmResult(placed, failures())


def disarm() -> ArmResult | None:
    """Moves every thread back to the node's own group; None off a capped node."""
    moved = _call("archbench_caps_disarm")
    if moved is None:
        return None
    return ArmResult(moved, failures())


def failures() -> int:
    library = node_library()
    if library is None:
        return 0
    library.archbench_caps_failures.restype = ctypes.c_long
    return int(library.archbench_caps_failures())


def background() -> int:
    """Background threads this process started (a communication library's own: placed on a
    virtual core of their own, outside the process's cap)."""
    library = node_library()
    if library is None:
        return 0
    library.archbench_caps_background.restype = ctypes.c_long
    return int(library.archbench_caps_background())


def armed() -> bool:
    library = node_library()
    return bool(library is not None and library.archbench_caps_armed())


def placement() -> dict[int, str]:
    """{thread id: its cpu cgroup} for every thread of this process (v1's cpu line, or v2's)."""
    groups = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            lines = open(f"/proc/self/task/{tid}/cgroup").read().splitlines()
        except OSError:
            continue
        cpu = [
            line for line in lines if ":cpu," in line or ":cpu:" in line or line.startswith("0::")
        ]
        if cpu:
            groups[int(tid)] = cpu[0].split(":", 2)[2]
    return groups


def background_thread_ids(groups: dict[int, str] | None = None) -> list[int]:
    """This process's threads placed as background threads (`.../vcpu/b<pid>/t<tid>`)."""
    groups = placement() if groups is None else groups
    return [tid for tid, group in groups.items() if _BACKGROUND_GROUP.search(group)]


def _capped(groups: dict[int, str]) -> int:
    """Threads in a capped group of their own (`.../vcpu/p<pid>/t<tid>`, or a background
    thread's `.../vcpu/b<pid>/t<tid>`)."""
    return sum(bool(_THREAD_GROUP.search(group)) for group in groups.values())


SHORT_LIVED = 20  # threads `main` starts one after another


def _own_group_count(thread_group: str) -> int:
    """Thread groups (`t*`) in this process's group, found from one of its threads' group."""
    process_group = cgroupread.detect().cpu_root / thread_group.lstrip("/").rsplit("/", 1)[0]
    return sum(1 for entry in process_group.glob("t*") if entry.is_dir())


def main() -> int:
    """`python -m archbench.cluster.threadcaps` on a node: how many of this process's threads
    sit in a capped group of their own before arming (none: archbench's processes start outside
    the caps), after arming (all), and after disarming (none)."""
    import json
    import threading
    import time

    started = threading.Event()
    worker = threading.Thread(target=started.wait, daemon=True)  # a thread born before arming
    worker.start()
    before = placement()
    armed_result = arm()
    after = placement()
    late = threading.Thread(target=lambda: None)  # born armed: places itself
    late_groups: dict[int, str] = {}

    def born_armed() -> None:
        late_groups.update({threading.get_native_id(): placement()[threading.get_native_id()]})

    late = threading.Thread(target=born_armed)
    late.start()
    late.join()
    # Threads that come and go (TensorFlow's distributed session starts one per run): each is
    # capped in a group named after it, and the groups of those that ended are reused.
    short_lived: list[bool] = []

    def lives_briefly() -> None:
        tid = threading.get_native_id()
        short_lived.append(placement().get(tid, "").endswith(f"/t{tid}"))

    for _ in range(SHORT_LIVED):
        brief = threading.Thread(target=lives_briefly)
        brief.start()
        brief.join()
        time.sleep(0.005)  # its start routine returns (and frees its group) after join's wake-up
    groups_kept = _own_group_count(placement()[threading.get_native_id()])
    disarm()
    after_disarm = placement()
    started.set()
    print(
        json.dumps(
            {
                "dilation": factor(),
                "threads": len(before),
                "capped_before": _capped(before),
                "armed": armed_result is not None,
                "capped_after_arm": _capped(after),
                "born_armed_capped": _capped(late_groups),
                "short_lived": len(short_lived),
                "short_lived_capped": sum(short_lived),
                "threads_now": len(placement()),
                "thread_groups_kept": groups_kept,
                "capped_after_disarm": _capped(after_disarm),
                "failures": failures(),
                # Python's threads are the process's own: none of them is a background thread
                "background": background(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
