"""What a run record says about where and when it ran: ids, times, versions, hardware, load."""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import subprocess
import sys
import uuid

import archbench
from archbench.runtime import mpitransport
from archbench.runtime.emulation import idle_poller_count, usable_cores


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _package_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def mpi_version() -> str | None:
    try:
        output = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = output.stdout.strip().splitlines()
    return first[0] if first else None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} x{os.cpu_count()}"


def git_commit() -> str | None:
    folder = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        output = subprocess.run(
            ["git", "-C", folder, "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return output.stdout.strip() or None


def load_average() -> float | None:
    """This host's 1-minute load average: processes running or waiting for a core, averaged over
    about the last minute (so it lags, and it counts the run's own processes); None where the
    system does not report it. The emulated cluster's idle-core pollers always run, at the
    lowest priority, and wait for nothing: they are not counted."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    return round(max(load - idle_poller_count(), 0.0), 2)


def environment(gpus: list[str] | None = None) -> dict:
    """Versions and hardware: what a reader needs to reproduce or discount a number."""
    # deferred: archbench.runtime.stack loads importlib.metadata, which is slow to import
    from archbench.runtime.stack import stack

    return {
        "python": platform.python_version(),
        "tensorflow": _package_version("tensorflow-cpu") or _package_version("tensorflow"),
        "horovod": _package_version("horovod"),
        "mpi": mpi_version(),
        "mpi_transport": mpitransport.settings(),
        "mpi4py": _package_version("mpi4py"),
        "numpy": _package_version("numpy"),
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "gpu": gpus or [],
        "archbench": archbench.__version__,
        "git_commit": git_commit(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "command": " ".join(sys.argv),
        # every direct dependency's version, and how the stack differs from constraints.txt
        **stack(),
    }


def run_environment(
    env: dict,
    load_avg_start: float | None,
    load_avg_end: float | None,
    gpus: list[str] | None = None,
) -> dict:
    """A training run's `env`: `environment()` plus the machine load at the start and at the end
    of training, so that a run measured on a busy machine can be recognised (load above
    `cores`)."""
    return {
        **env,
        **({"gpu": gpus} if gpus is not None else {}),
        "load_avg_start": load_avg_start,
        "load_avg_end": load_avg_end,
    }
