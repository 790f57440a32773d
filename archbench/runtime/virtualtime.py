"""Virtual time as a rank reads it from its node's environment: the dilation factor D, real <->
virtual seconds, the node's virtual cores and its caps' period, whether the node library is
loaded, and the cores the process may run on. A leaf: the emulated cluster (archbench.cluster) sets these names on its nodes, and the run
path reads them through archbench.runtime.emulation; off an emulated node D is 1 and nothing is set.
"""

from __future__ import annotations

import math
import os

# What a node's sshd puts in the environment of every process it starts (archbench.cluster.nodelib).
DILATION_VARIABLE = "ARCHBENCH_DILATION"
VCPUS_VARIABLE = "ARCHBENCH_VCPUS"
PROCESS_VCPUS_VARIABLE = "ARCHBENCH_PROCESS_VCPUS"
PERIOD_VARIABLE = "ARCHBENCH_CFS_PERIOD_US"
LIBRARY_NAME = "libarchbench-node.so"  # the library every process of a node preloads
# How often the node library's sampler reads the budget groups during a traced step (real time).
STOP_SAMPLE_INTERVAL_US = 200


def crowded(processes: int, vcpus_per_node: float, vcpus_per_process: float = 1.0) -> bool:
    """Whether a dilated node holding `processes` processes, each capped at `vcpus_per_process`
    virtual cores, is crowded past its `vcpus_per_node`: it cannot give each the cores the
    dilation promised, as a host of that many cores could not."""
    return processes * vcpus_per_process > vcpus_per_node


def factor() -> float:
    """This process's dilation factor D (1.0 where it runs in real time)."""
    text = os.environ.get(DILATION_VARIABLE)
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        return 1.0
    return value if math.isfinite(value) and value >= 1.0 else 1.0


def virtual(seconds: float | None, dilation: float | None = None) -> float | None:
    """A real duration in virtual seconds (real / D); None stays None."""
    if seconds is None:
        return None
    return seconds / (dilation if dilation is not None else factor())


def _count(variable: str) -> int | None:
    text = os.environ.get(variable, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def node_vcpus() -> int | None:
    """The virtual cores of this process's node (V), where the node declares them."""
    return _count(VCPUS_VARIABLE)


def process_vcpus() -> int | None:
    """The virtual cores one process may use on this node (P), where the node declares them."""
    return _count(PROCESS_VCPUS_VARIABLE)


def cap_period_s() -> float | None:
    """The CFS period of this node's thread caps, in real seconds (None off a capped node)."""
    text = os.environ.get(PERIOD_VARIABLE, "")
    return int(text) / 1e6 if text.isdigit() and int(text) > 0 else None


def node_library_path() -> str | None:
    """The node library this process preloads (None off an emulated node): the one reader of
    LD_PRELOAD."""
    for path in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if os.path.basename(path) == LIBRARY_NAME:
            return path
    return None


def on_emulated_node() -> bool:
    """Whether this process runs on an emulated node (it preloads the node library)."""
    return node_library_path() is not None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a launcher or cgroup can
    narrow), not merely the cores the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1
