"""Running the probe (archbench.doctor.probe) on every host (over ssh, or through srun on the
nodes of a Slurm allocation) and on this one, and what to say when it does not run there.

Each host runs it with the study's interpreter, in the folder doctor runs in (as mpirun starts
ranks), so it reports the archbench and the data a rank there would find.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from archbench.common.jsonl import loads
from archbench.doctor.dataset import DataSet
from archbench.doctor.probe import MARKER
from archbench.doctor.problems import Problem
from archbench.doctor.remote import Reply, is_local, run_on, run_on_hosts

# A probe imports archbench (and with --full TensorFlow and Horovod) on a host that may be busy.
PROBE_TIMEOUT_S = 120.0
HERE = "localhost"


def probe_argv(
    python: str, full: bool, data_sets: Sequence[DataSet] = (), models: Sequence[str] = ()
) -> list[str]:
    program = [python, "-m", "archbench.doctor.probe", *(["--full"] if full else [])]
    if data_sets:
        program += ["--data", json.dumps([asdict(data) for data in data_sets])]
    if models:
        program += ["--models", json.dumps(list(models))]
    return program


def _report(reply: Reply) -> dict[str, Any] | None:
    for line in reply.stdout.splitlines():
        if line.startswith(MARKER):
            return _parsed(line[len(MARKER) :])
    return None


def _parsed(text: str) -> dict[str, Any] | None:
    """A probe's report as another host printed it (bounded; None when it is not one)."""
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("hostname"), str) else None


def _probe_problem(host: str, python: str, reply: Reply) -> Problem:
    """Why the probe printed nothing on `host`."""
    said = reply.stderr.strip()
    if reply.status is None:
        return Problem(host, f"{python} -m archbench.doctor.probe did not finish within "
                       f"{PROBE_TIMEOUT_S:g} s", f"check the load and the file systems of {host}")  # fmt: skip
    if reply.status == 127 or "no such file or directory" in said.lower():
        return Problem(host, f"the study's interpreter {python} does not exist there",
                       "create the same environment there, or name another with --python")  # fmt: skip
    if "No module named 'archbench.doctor'" in said or "No module named archbench.doctor" in said:
        return Problem(host, "its archbench is another version (it has no archbench.doctor)",
                       f"install this archbench on {host} (the same checkout, pip install -e .)")  # fmt: skip
    if "No module named" in said and "archbench" in said:
        return Problem(host, f"{python} cannot import archbench there",
                       f"install archbench on {host} (pip install -e . in the same checkout)")  # fmt: skip
    last = said.splitlines()[-1] if said else f"status {reply.status}"
    return Problem(host, f"{python} -m archbench.doctor.probe failed ({last})",
                   f"run it on {host} by hand to see why")  # fmt: skip


def probe_hosts(
    hosts: Sequence[str],
    python: str,
    full: bool,
    data_sets: Sequence[DataSet],
    cwd: str,
    models: Sequence[str] = (),
) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """Every host's report, this host's under HERE; a problem for each host whose probe did not
    run. This host's probe is run as the hosts' are, at the same time (the user's model and
    data files are compared with what it finds)."""
    asked = [HERE, *(host for host in hosts if not is_local(host))]
    replies = run_on_hosts(
        asked, lambda _: probe_argv(python, full, data_sets, models), PROBE_TIMEOUT_S, cwd
    )
    reports, problems = {}, []
    for host, reply in replies.items():
        report = _report(reply)
        if report is None:
            problems.append(_probe_problem(host if host != HERE else "this host", python, reply))
        else:
            reports[host] = report
    for host in hosts:  # a host that is this machine has this machine's report
        if is_local(host) and HERE in reports:
            reports[host] = reports[HERE]
    return reports, problems


def srun_argv(nodes: Sequence[str], command: Sequence[str]) -> list[str]:
    """srun running `command` once on each of `nodes`, a step of the allocation it runs in; a
    task that fails leaves the others running (each node's report is wanted)."""
    count = len(nodes)
    return [
        "srun", f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}", "--kill-on-bad-exit=0", *command,
    ]  # fmt: skip


def _srun_problem(node: str, python: str, reply: Reply) -> Problem:
    """Why `node` sent no report through srun."""
    if reply.status is None:
        return Problem(node, f"srun {python} -m archbench.doctor.probe did not finish within "
                       f"{PROBE_TIMEOUT_S:g} s", f"check the allocation (squeue) and {node}")  # fmt: skip
    # srun's stderr mixes every task's; its own lines name the node whose task failed
    return _probe_problem(node, python, reply)


def probe_allocation(
    nodes: Sequence[str],
    python: str,
    full: bool,
    data_sets: Sequence[DataSet],
    cwd: str,
    models: Sequence[str] = (),
) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """probe_hosts for the nodes of the Slurm allocation this runs in, reached through srun (one
    task per node) rather than ssh, which a site may refuse to its nodes; mpirun starts a study's
    ranks there the same way. Each report is filed under the node Slurm ran it on."""
    if shutil.which("srun") is None:
        return {}, [Problem("this host", "srun is not on PATH",
                            "run it inside the Slurm allocation (salloc or sbatch)")]  # fmt: skip
    command = probe_argv(python, full, data_sets, models)
    with ThreadPoolExecutor(max_workers=2) as pool:
        mine = pool.submit(run_on, HERE, command, PROBE_TIMEOUT_S, cwd)
        theirs = pool.submit(run_on, HERE, srun_argv(nodes, command), PROBE_TIMEOUT_S, cwd)
        here, reply = mine.result(), theirs.result()
    reports, problems = {}, []
    report = _report(here)
    if report is None:
        problems.append(_probe_problem("this host", python, here))
    else:
        reports[HERE] = report
    for line in reply.stdout.splitlines():
        found = _parsed(line[len(MARKER) :]) if line.startswith(MARKER) else None
        if found is not None:
            # Slurm's name for the node (its host name may differ, a domain added, say)
            reports[found.get("slurm_node") or found["hostname"]] = found
    problems += [_srun_problem(node, python, reply) for node in nodes if node not in reports]
    return reports, problems
