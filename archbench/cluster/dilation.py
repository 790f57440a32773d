"""Virtual time on a time-dilated emulated cluster.

A machine with fewer cores than the emulated hosts would have runs the cluster slowed down by a
dilation factor D (as in time-warped network emulation): every thread of a node is capped at 1/D
of a core (a virtual core), each process at P/D (P virtual cores per process, one by default),
the node's threads together at V/D (V virtual cores per node, four by default), and every link
at B/D. In virtual time (real time / D) the nodes are then separate hosts with V whole cores and
links of B. Records hold virtual durations beside D and the real ones.

Why a cap per process as well as per thread: CFS caps a thread's share per period, not each of
its bursts, and a training process's threads hand work to each other (Python, TensorFlow's
executor, the input pipeline), so with only a core for each thread such a chain got through up to
1.4 virtual cores of work where a real host does one (benchmarks/dilation_reference.py, steps
0.71-0.75 of the reference's with per-thread caps alone, 0.98-1.07 with one core per process).

A process learns D from its node's environment (`ARCHBENCH_DILATION`, set by the node's sshd),
through `archbench.runtime.emulation`, the run path's one door to this package; everywhere else (a real
cluster, localhost, an undilated cluster) D is 1 and virtual time is real time.

`auto` picks the smallest D for which the nodes' busy threads fill at most half of this machine's
cores left beside a reserve for the host side (the sweep driver, mpirun, the nodes' sshd):
D = nodes x min(V, busy threads per node) / ((cores - reserve) x CAPPED_SHARE), rounded up to a
half. The busy threads per node are measured (`BUSY_THREADS_PER_NODE`, see its comment); the
other half of the cores is for what a run costs outside every cap (see `CAPPED_SHARE`). It sizes
a cluster for the machine alone: clusters that run at the same time share its cores, and every
run's record says whether its threads waited for one (`archbench.cluster.fidelity`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archbench.common.errors import UsageError

AUTO = "auto"
OFF = "off"
# Virtual cores a training node keeps busy at once: its one training process, capped at a core
# (a co-located server adds little: measured with `python benchmarks/busy_threads.py`).
BUSY_THREADS_PER_NODE = 1.0
# Cores kept for what runs on the host outside the nodes: the sweep driver, mpirun or
# horovodrun, the nodes' sshd and the kernel's network work for the shaped links.
HOST_RESERVE_CPUS = 0.3
# The share of those cores the nodes' capped threads may fill. The rest serves what a run costs
# outside every cap: the kernel's work for the shaped links (softirq, charged to no group), orted
# and sshd, and the nodes' threads waking at the same moment (every rank starts its step when
# the exchange ends). Measured on 2 cores: with the capped threads filling the free cores (D = 3
# for five nodes) 20 of the demo's 33 runs had threads waiting for a core; at half (D = 5 for
# four nodes, runs/fidelity.yaml) 1 of 22.
CAPPED_SHARE = 0.5
MAX_DILATION = 100.0
# Virtual cores per node (a small host: a parameter server beside a worker, or every process of
# a two-worker job on one host, each get a core of their own) and per process (see above).
DEFAULT_VCPUS = 4
DEFAULT_PROCESS_VCPUS = 1
MAX_VCPUS = 64
# The CFS period of the caps: 10 ms delivers a quarter-core cap in full (measured: four threads
# capped at 2.5 ms per 10 ms, all spinning at once on 2 cores, got 0.99-1.00 of it; at 1 ms per
# 4 ms they got 0.89-0.95); longer only where the quota, period / D, would fall under 2.5 ms.
DEFAULT_PERIOD_US = 10_000
MIN_THREAD_QUOTA_US = 2_500


@dataclass(frozen=True)
class Dilation:
    """How a cluster is slowed down: D, the virtual cores per node and the CFS period."""

    factor: float  # D >= 1
    vcpus_per_node: int  # V: the node's threads together get at most V/D of a core
    cfs_period_us: int
    vcpus_per_process: int = DEFAULT_PROCESS_VCPUS  # each process's threads: at most this / D

    @property
    def thread_quota_us(self) -> int:
        return int(round(self.cfs_period_us / self.factor))

    @property
    def process_quota_us(self) -> int:
        return int(round(self.vcpus_per_process * self.cfs_period_us / self.factor))

    @property
    def node_quota_us(self) -> int:
        return int(round(self.vcpus_per_node * self.cfs_period_us / self.factor))

    @property
    def node_cpus(self) -> float:
        """Real cores a node may use at most (V / D)."""
        return self.vcpus_per_node / self.factor

    def describe(self) -> str:
        def cores(count: int) -> str:
            return f"{count} virtual core{'' if count == 1 else 's'}"

        return (
            f"dilation {self.factor:g}: every thread at 1/{self.factor:g} of a core "
            f"({self.thread_quota_us / 1000:g} ms per {self.cfs_period_us / 1000:g} ms), "
            f"{cores(self.vcpus_per_process)} per process, {cores(self.vcpus_per_node)} per node "
            f"({self.node_cpus:.3g} of a core)"
        )


def period_for(dilation: float) -> int:
    """The default CFS period for D: 10 ms, longer where period / D would fall under 2.5 ms."""
    return max(DEFAULT_PERIOD_US, int(math.ceil(dilation * MIN_THREAD_QUOTA_US / 500.0)) * 500)


def needed(nodes: int, vcpus_per_node: int, free_cpus: float) -> float:
    """The smallest D (in halves) at which `nodes` training nodes fill at most `CAPPED_SHARE` of
    `free_cpus` cores."""
    busy = min(BUSY_THREADS_PER_NODE, float(vcpus_per_node))
    usable = free_cpus * CAPPED_SHARE
    if usable <= 0:
        return math.inf
    return max(1.0, math.ceil(2.0 * nodes * busy / usable - 1e-9) / 2.0)


def parse(
    text: str | float | None,
    nodes: int,
    vcpus_per_node: int | None,
    cores: float,
    period_ms: float | None = None,
    vcpus_per_process: int | None = None,
) -> Dilation | None:
    """`--dilation auto|X|off` (None means auto) for a cluster of `nodes` nodes on `cores`
    cores; None for off (no caps at all)."""
    word = AUTO if text is None else str(text).strip().lower()
    if word == OFF:
        return None
    vcpus = DEFAULT_VCPUS if vcpus_per_node is None else vcpus_per_node
    if not 1 <= vcpus <= MAX_VCPUS:
        raise UsageError(f"--vcpus-per-node {vcpus} is out of range 1..{MAX_VCPUS}")
    per_process = DEFAULT_PROCESS_VCPUS if vcpus_per_process is None else vcpus_per_process
    if not 1 <= per_process <= vcpus:
        raise UsageError(
            f"--vcpus-per-process {per_process} is out of range 1..{vcpus} (the node's virtual cores)"
        )
    free = cores - HOST_RESERVE_CPUS
    if word == AUTO:
        value = needed(nodes, vcpus, free)
        if not math.isfinite(value) or value > MAX_DILATION:
            raise UsageError(
                f"no dilation up to {MAX_DILATION:g} fits {nodes} nodes in the {max(free, 0):.2g} "
                "free cores of this machine: use fewer nodes"
            )
    else:
        try:
            value = float(word)
        except ValueError:
            raise UsageError(
                f"--dilation {text!r} is not a factor (e.g. 4), 'auto' or 'off'"
            ) from None
        if not (math.isfinite(value) and 1.0 <= value <= MAX_DILATION):
            raise UsageError(f"--dilation {text} is out of range 1..{MAX_DILATION:g}")
    period_us = int(round(period_ms * 1000)) if period_ms is not None else period_for(value)
    return Dilation(value, vcpus, period_us, per_process)
