"""The one door between the training core and the emulated cluster.

A rank on a time-dilated node (`archbench.cluster`) learns D and its caps from its node's
environment, which the node's sshd sets. The run path (train, loop, trainers, timeline, the
performance model's measuring ranks, the record) asks this module, and only this one, about them:
the dilation factor and real <-> virtual time, the node's virtual cores, arming and disarming
this process's thread caps, the meter of its own threads' CPU, the chief's fidelity probe, the
CPU budget a process runs under, and how long that budget stopped a traced step. Off an emulated
node the answers are trivial (D = 1, no caps, the process's CPU time) and come from the
environment alone: a rank on real hosts does not import the emulator to learn that D is 1, nor
to read its container's CPU budget (`cgroupread`, plain file reads). Where an answer needs the
emulator's machinery (a capped node, a traced step's stops), it is imported here, when asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from archbench.runtime.virtualtime import (
    DILATION_VARIABLE,
    LIBRARY_NAME,
    PERIOD_VARIABLE,
    PROCESS_VCPUS_VARIABLE,
    STOP_SAMPLE_INTERVAL_US,
    VCPUS_VARIABLE,
    cap_period_s,
    factor,
    node_vcpus,
    on_emulated_node,
    process_vcpus,
    usable_cores,
    virtual,
)

# The interface, whichever module defines each name.
__all__ = [
    "DILATION_VARIABLE", "LIBRARY_NAME", "PERIOD_VARIABLE", "PROCESS_VCPUS_VARIABLE",
    "STOP_SAMPLE_INTERVAL_US", "VCPUS_VARIABLE", "arm_caps", "cap_period_s", "disarm_caps",
    "factor", "fidelity_probe", "idle_poller_count", "node_vcpus", "on_emulated_node",
    "own_cpu_meter", "process_budget", "process_vcpus", "step_throttle", "usable_cores",
    "virtual",
]  # fmt: skip


def arm_caps() -> Any:
    """Caps every thread of this process at its node's 1/D (archbench.cluster.threadcaps);
    None off a capped node."""
    if not on_emulated_node():
        return None
    # deferred: the emulator loads only on an emulated node (this whole module's rule)
    from archbench.cluster import threadcaps

    return threadcaps.arm()


def disarm_caps() -> Any:
    """Moves every thread back to its node's own group; None off a capped node."""
    if not on_emulated_node():
        return None
    # deferred: only on an emulated node
    from archbench.cluster import threadcaps

    return threadcaps.disarm()


def own_cpu_meter() -> Callable[[], float]:
    """A reader of the cumulative CPU seconds of this process's own threads: on a dilated node
    less its background threads' (archbench.cluster.cpumeter), elsewhere the process's CPU time.
    Call it after the caps are armed, from the thread that computes."""
    if not on_emulated_node():
        return time.process_time
    # deferred: only on an emulated node
    from archbench.cluster.cpumeter import own_cpu_meter as node_meter

    return node_meter()


def fidelity_probe(hosts: list[str]) -> Any:
    """The chief's probe of the machine and of the emulated nodes among `hosts`
    (archbench.cluster.fidelity), or None where it cannot be made: a missing or stale cluster
    state must not fail a run."""
    try:
        # deferred: the probe loads only on a run's chief
        from archbench.cluster.fidelity import FidelityProbe

        return FidelityProbe(hosts)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def idle_poller_count() -> int:
    """The emulator's idle-core pollers running on this machine (they run at the lowest priority
    and wait for nothing, so a load average should not count them); 0 where none run."""
    # deferred: the cgroup reader loads only when a load average is taken
    from archbench.cluster import idlepollers

    return len(idlepollers.pids())


def process_budget() -> Any:
    """The CPU budget (cgroup quota) this process runs under: an emulated node's, or a
    container's; None where none applies. A plain read of cgroup files, nothing of the
    emulator's."""
    # deferred: the cgroup reader loads only when a budget is asked for
    from archbench.runtime.cgroupread import process_budget as budget

    return budget()


def step_throttle(sample_stops: bool = True) -> tuple[Any, Any]:
    """(Throttle, StopSampler): how long, and where, the CPU budget stopped a traced step
    (archbench.cluster.throttle); both answer None where no budget applies. Without
    `sample_stops` the StopSampler is None: each step's throttled total alone."""
    # deferred: the readers load only for a traced run
    from archbench.cluster.throttle import StopSampler, Throttle

    return Throttle(), StopSampler() if sample_stops else None
