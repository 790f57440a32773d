"""The run record: one JSON object per line, appended atomically (see README, 'Run record')."""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import json
import os
import platform
import subprocess
import sys
import uuid

from archbench.launch import usable_cores

SCHEMA = "archbench.run/1"

# The contract (README, "Run record"): keys every record carries; more may be added, none renamed.
REQUIRED_KEYS = {
    "": (
        "schema",
        "run_id",
        "study",
        "status",
        "started_at",
        "finished_at",
        "config",
        "cluster",
        "env",
        "model_stats",
        "timing",
        "comm",
        "result",
        "error",
    ),
    "config": (
        "arch",
        "model",
        "dataset",
        "batch_size",
        "global_batch_size",
        "epochs",
        "steps",
        "lr",
        "optimizer",
        "seed",
        "sync",
        "num_ps",
        "ps_sharding",
        "controller",
        "fusion_threshold_mb",
        "cycle_time_ms",
        "compression",
    ),
    "cluster": (
        "world_size",
        "num_workers",
        "num_ps",
        "hosts",
        "roles",
        "launcher",
        "hostfile",
        "link",
    ),
    "env": (
        "python",
        "tensorflow",
        "horovod",
        "mpi",
        "mpi4py",
        "numpy",
        "cpu",
        "cores",
        "gpu",
        "archbench",
        "git_commit",
        "load_avg_start",
        "load_avg_end",
    ),
    "model_stats": ("params", "param_bytes"),
    "timing": (
        "wall_s",
        "train_s",
        "step_s_median",
        "step_s_p90",
        "compute_s_median",
        "comm_s_median",
        "samples_per_s",
        "epochs",
    ),
    "comm": ("bytes_sent_per_step", "bytes_total"),
    "result": ("final_loss", "test_accuracy", "param_norm", "target_accuracy", "time_to_target_s"),
}


def missing_keys(record: dict) -> list[str]:
    """Contract keys absent from a record ("section.key"); empty for a complete ok record."""
    missing = []
    for section, keys in REQUIRED_KEYS.items():
        holder = record if not section else record.get(section)
        if not isinstance(holder, dict):
            missing.append(section)
            continue
        missing.extend(f"{section}.{key}" if section else key for key in keys if key not in holder)
    return missing


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def append_record(path: str, record: dict) -> None:
    """Appends one line with a single write under an exclusive lock, then fsyncs.

    Readers therefore see either the whole line or none of it; a line cut by a crash mid-write
    (it cannot be, short of a kernel crash) would be detected on load as invalid JSON.
    """
    line = (json.dumps(record, sort_keys=False, default=_json_default) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_default(value):
    import numpy as np

    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def read_records(path: str) -> list[dict]:
    """Every complete record of a JSON-lines file; a cut or corrupt line is skipped."""
    records = []
    if not os.path.exists(path):
        return records
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                records.append(value)
    return records


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
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    system does not report it."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def environment(gpus: list[str] | None = None) -> dict:
    """Versions and hardware: what a reader needs to reproduce or discount a number."""
    import archbench

    return {
        "python": platform.python_version(),
        "tensorflow": _package_version("tensorflow-cpu") or _package_version("tensorflow"),
        "horovod": _package_version("horovod"),
        "mpi": mpi_version(),
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
