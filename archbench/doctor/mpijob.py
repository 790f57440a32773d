"""A trivial job across every host, started as a study's runs are (archbench.common.mpirun's
mpirun line): it shows that mpirun reaches each host, that a rank starts there, and that the
ports a parameter server listens on are reachable between the hosts."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from archbench.common.hosts import HostSlots
from archbench.common.jsonl import loads
from archbench.common.mpirun import mpirun_argv
from archbench.common.process_group import run_in_group
from archbench.doctor.problems import Problem
from archbench.doctor.ranks import MARKER
from archbench.ps.cluster_spec import PORT_RANGE
from archbench.runtime.launch import root_mpi_env

JOB_TIMEOUT_S = 120.0


def job_argv(hosts: Sequence[str], python: str) -> list[str]:
    """One rank per host, in hostfile order."""
    blocks = [HostSlots(host, 1) for host in hosts]
    return mpirun_argv(len(blocks), blocks, [python, "-m", "archbench.doctor.ranks"])


def _telling_line(output: str) -> str:
    """The line of mpirun's output that says most (Open MPI frames its messages with dashes)."""
    lines = [line.strip() for line in output.splitlines() if line.strip().strip("-")]
    for line in lines:
        lowered = line.lower()
        if any(word in lowered for word in ("error", "unable", "not found", "refused", "failed")):
            return line
    return lines[-1] if lines else "no output"


def mpi_problems(hosts: Sequence[str], python: str, cwd: str) -> list[Problem]:
    """What keeps a job from running across `hosts` (nothing: an empty list)."""
    everyone = ",".join(hosts)
    if shutil.which("mpirun") is None:
        return [Problem("this host", "mpirun is not on PATH",
                        "install openmpi-bin or activate the environment that has it")]  # fmt: skip
    argv = job_argv(hosts, python)
    env = {**os.environ, **root_mpi_env()}
    try:
        done = run_in_group(argv, timeout_s=JOB_TIMEOUT_S, env=env, cwd=cwd, merge_stderr=True)
    except subprocess.TimeoutExpired:
        return [Problem(everyone, f"mpirun across every host did not finish within {JOB_TIMEOUT_S:g} s",
                        f"run `{' '.join(argv[:5])} hostname` to see which host hangs")]  # fmt: skip
    report = next(
        (
            _parsed(line[len(MARKER) :])
            for line in done.stdout.splitlines()
            if line.startswith(MARKER)
        ),
        None,
    )
    if done.returncode != 0 or report is None:
        said = _telling_line(done.stdout)
        # Open MPI names the host on a line of its own ("Node: h1") below what went wrong
        named = [host for host in hosts if host in done.stdout.split()] or list(hosts)
        return [Problem(",".join(named), f"mpirun across every host failed ({said})",
                        f"run `{' '.join(argv[:5])} hostname` to see it whole")]  # fmt: skip
    problems = [
        Problem(
            rank["host"],
            f"no free port for a parameter server ({rank['error']})",
            f"free ports in {PORT_RANGE[0]}..{PORT_RANGE[1]} there",
        )  # fmt: skip
        for rank in report["ranks"]
        if rank["error"]
    ]
    for source, target, address, why in report["unreachable"]:
        problems.append(Problem(
            target, f"a parameter server's port there ({address}) cannot be reached from "
            f"{source} ({why})", f"let TCP ports {PORT_RANGE[0]}..{PORT_RANGE[1]} through between "
            "the hosts (firewall), or set ARCHBENCH_PS_ADDRESS on it to an address the others reach",
        ))  # fmt: skip
    return problems


def _parsed(text: str) -> dict | None:
    """The job's report as its ranks printed it (bounded; None when it is not one)."""
    try:
        value = loads(text)
    except ValueError:
        return None
    ok = isinstance(value, dict) and isinstance(value.get("ranks"), list)
    return value if ok and isinstance(value.get("unreachable"), list) else None
