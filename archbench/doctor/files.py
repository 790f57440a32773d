"""The user's model file and data files the same on every host as on this machine: each host's
probe reports the sha256 of the files it would read (archbench.doctor.probe's `user_files`), and
doctor compares them with this machine's. A run reads its host's own copy, so a copy that differs
trains another model, or on other data, without a word."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archbench.doctor.hostprobe import HERE
from archbench.doctor.problems import Problem
from archbench.workloads.files import short_digest

FLAG = {"model": "--model", "data": "--dataset"}


def _key(entry: dict[str, Any]) -> tuple:
    # a model is one file wherever its module lies; a data set's files lie at the same paths
    return (entry["kind"], entry["spec"], entry["file"] if entry["kind"] == "data" else "")


def file_problems(
    hosts: Sequence[str], reports: dict[str, dict[str, Any]], kind: str
) -> list[Problem]:
    """One line per file of `kind` ("model" or "data") missing on a host or differing from this
    machine's; a file missing here is said once, for this host."""
    here = {_key(e): e for e in reports.get(HERE, {}).get("files", []) if e["kind"] == kind}
    fix = "fix the path (it is read from the folder the study runs in)"
    problems = [
        Problem("this host", f"{FLAG[kind]} {e['spec']}: {e['problem']}", fix)
        for e in here.values()
        if e["problem"]
    ]
    for host in hosts:
        report = reports.get(host)
        if report is None or report is reports.get(HERE):
            continue  # no probe there (said elsewhere), or this machine itself
        for entry in report.get("files", []):
            if entry["kind"] != kind:
                continue
            what = f"{FLAG[kind]} {entry['spec']}"
            if entry["problem"]:
                problems.append(Problem(
                    host, f"{what}: {entry['problem']}",
                    f"copy this machine's file to the same path on {host} (every host reads "
                    "its own copy)",
                ))  # fmt: skip
                continue
            mine = here.get(_key(entry), {}).get("sha256")
            if mine and entry["sha256"] != mine:
                problems.append(Problem(
                    host,
                    f"{what}: {entry['file']} differs from this machine's (sha256 "
                    f"{short_digest(mine)} here, {short_digest(entry['sha256'])} there)",
                    f"copy this machine's file to {host} (every host must read the same bytes)",
                ))  # fmt: skip
    return problems


def described(kind: str, reports: dict[str, dict[str, Any]]) -> str:
    """The files of `kind` compared, for the check's passed line."""
    entries = [e for e in reports.get(HERE, {}).get("files", []) if e["kind"] == kind]
    return ", ".join(
        f"{e['file']} (sha256 {short_digest(e['sha256'])})" for e in entries if e["sha256"]
    )
