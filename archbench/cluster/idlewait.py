"""How an emulated node's processes wait for messages: napping instead of spinning.

Open MPI (the `ring` MPI controller, `p2p`, the launcher's own collectives) waits by polling and
calls sched_yield() on each idle pass (`mpi_yield_when_idle`). A host of its own has a spare core
for that; an emulated node has a CPU budget, and the poll spends it: measured on four 0.45-CPU
nodes at 1 Gbit with wide_mlp at W = 3, the nodes used 99% of their budgets while waiting, and
the links reached 0.73 of their rate. `cluster up` therefore builds a small library that turns an
idle sched_yield() into a sleep of `--idle-nap-us` microseconds and preloads it into every
process a node starts (through the node's sshd). With it the same runs used half the budget and
reached 0.83 of the link rate, with identical results. `--idle-nap-us 0` keeps the libraries'
own spinning. The record says which way the run waited (`fidelity.idle_wait`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from archbench.errors import RunFailed

SOURCE = Path(__file__).resolve().parent / "native" / "napyield.c"
LIBRARY_NAME = "libnapyield.so"
NAP_VARIABLE = "ARCHBENCH_IDLE_NAP_US"
DEFAULT_NAP_US = 100
MAX_NAP_US = 100_000


def build_library(directory: Path) -> Path:
    """Compiles the nap library into `directory` (a cluster's own folder); returns its path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RunFailed(
            "no C compiler (cc) to build the idle-nap library; install gcc, or bring the cluster "
            "up with --idle-nap-us 0 (waits then spin and spend the nodes' CPU budgets)"
        )
    target = directory / LIBRARY_NAME
    built = subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(target), str(SOURCE)],
        capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        reason = (built.stderr.strip().splitlines() or ["no message"])[-1]
        raise RunFailed(f"building the idle-nap library failed: {reason}")
    return target


def node_environment(library: Path | None, nap_us: int) -> dict[str, str]:
    """The variables a node's sessions get so that their processes nap (nothing when off)."""
    if library is None or nap_us <= 0:
        return {}
    return {"LD_PRELOAD": str(library), NAP_VARIABLE: str(nap_us)}


def current() -> dict:
    """How this process waits: {"mode": "nap", "nap_us": N} or {"mode": "spin"}."""
    preloaded = os.environ.get("LD_PRELOAD", "")
    if LIBRARY_NAME in preloaded:
        try:
            nap_us = int(os.environ.get(NAP_VARIABLE, DEFAULT_NAP_US))
        except ValueError:
            nap_us = DEFAULT_NAP_US
        return {"mode": "nap", "nap_us": nap_us}
    return {"mode": "spin"}
