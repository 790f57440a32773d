"""How an emulated node's processes wait for messages: napping instead of spinning.

Open MPI (the `ring` MPI controller, `p2p`, the launcher's own collectives) waits by polling and
calls sched_yield() on each idle pass (`mpi_yield_when_idle`). A host of its own has a spare core
for that; an emulated node has a CPU budget, and the poll spends it: measured on four 0.45-CPU
nodes at 1 Gbit with wide_mlp at W = 3, the nodes used 99% of their budgets while waiting, and
the links reached 0.73 of their rate. The library every process of a node preloads
(`archbench.cluster.nodelib`) therefore turns an idle sched_yield() into a sleep of
`--idle-nap-us` microseconds. With it the same runs used half the budget and
reached 0.83 of the link rate, with identical results. `--idle-nap-us 0` keeps the libraries'
own spinning. The record says which way the run waited (`fidelity.idle_wait`).
"""

from __future__ import annotations

import os

from archbench.runtime.virtualtime import on_emulated_node

NAP_VARIABLE = "ARCHBENCH_IDLE_NAP_US"
DEFAULT_NAP_US = 100
MAX_NAP_US = 100_000


def current() -> dict:
    """How this process waits: {"mode": "nap", "nap_us": N} or {"mode": "spin"}."""
    if on_emulated_node():
        try:
            nap_us = int(os.environ.get(NAP_VARIABLE, DEFAULT_NAP_US))
        except ValueError:
            nap_us = DEFAULT_NAP_US
        if nap_us > 0:
            return {"mode": "nap", "nap_us": nap_us}
    return {"mode": "spin"}
