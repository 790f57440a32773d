"""Running the probe (archbench.doctor.probe) on every host and on this one, and what to say
when it does not run there.

Each host runs it with the study's interpreter, in the folder doctor runs in (as mpirun starts
ranks), so it reports the archbench and the data a rank there would find.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from archbench.doctor.dataset import DataSet
from archbench.doctor.probe import MARKER
from archbench.doctor.problems import Problem
from archbench.doctor.remote import Reply, is_local, run_on_hosts

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
            return json.loads(line[len(MARKER) :])
    return None


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
