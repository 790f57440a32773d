"""Shared test fixtures: real processes launched the way users launch them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixture import emulated_cluster  # noqa: F401  (session-wide emulated cluster)
from cluster_fixture import launcher_env as launch_env  # what users have after activating
from record_files import read_records

REPO = Path(__file__).resolve().parents[1]


def launcher_prefix(launcher: str | None, np: int) -> list[str]:
    """The command words in front of `python -m archbench.train` for a launcher."""
    if launcher is None:
        return []
    oversubscribe = ["--oversubscribe"] if np > (os.cpu_count() or 1) else []
    if launcher == "mpirun":
        return ["mpirun", "-np", str(np), *oversubscribe]
    if launcher == "horovodrun":
        return ["horovodrun", "-np", str(np), "-H", f"localhost:{np}"]
    if launcher == "horovodrun-gloo":
        return ["horovodrun", "--gloo", "-np", str(np), "-H", f"localhost:{np}"]
    raise ValueError(launcher)


def run_train(
    args: list[str],
    out: Path | None = None,
    launcher: str | None = None,
    np: int = 1,
    timeout: float = 300,
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Runs `python -m archbench.train ARGS` under a launcher; returns the process and records."""
    command = [*launcher_prefix(launcher, np), sys.executable, "-m", "archbench.train", *args]
    if out is not None:
        command += ["--out", str(out)]
    proc = subprocess.run(
        command, cwd=REPO, env=launch_env(), capture_output=True, text=True, timeout=timeout
    )
    return proc, read_records(out) if out is not None else []


@pytest.fixture
def train():
    """`train(args, out=..., launcher=..., np=...)` -> (process, records)."""
    return run_train
