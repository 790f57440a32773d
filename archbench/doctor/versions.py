"""The same stack on every host as on this one: Python, TensorFlow, Horovod (and, with the full
probe, its controllers and tensor operations), MPI, mpi4py and archbench, as each host's probe
reports them (archbench.doctor.hostprobe)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archbench.doctor.hostprobe import HERE
from archbench.doctor.probe import ABSENT
from archbench.doctor.problems import Problem
from archbench.doctor.remote import is_local

# The pip package of each version compared, for the fix
PACKAGES = {"tensorflow": "tensorflow-cpu", "horovod": "horovod", "mpi4py": "mpi4py"}


def _fix(differing: list[str], here: dict[str, str]) -> str:
    fixes = []
    if "python" in differing:
        fixes.append(f"use Python {here['python']} there")
    packages = [f"{PACKAGES[key]}=={here[key]}" for key in differing if key in PACKAGES]
    if packages:
        fixes.append(f"pip install {' '.join(packages)} there (constraints.txt pins the stack)")
    if {"horovod controllers", "horovod tensor ops"} & set(differing):
        fixes.append("build Horovod there as here (HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 ...)")
    if "mpi" in differing:
        fixes.append(f"install {here['mpi']} there")
    if {"archbench", "archbench commit"} & set(differing):
        fixes.append("use the same archbench checkout there")
    return "; ".join(fixes)


def version_problems(hosts: Sequence[str], reports: dict[str, dict[str, Any]]) -> list[Problem]:
    """One line per host whose stack differs from this host's, naming each difference."""
    here = reports.get(HERE, {}).get("versions")
    if here is None:
        return []
    problems = []
    for host in hosts:
        if host not in reports or is_local(host):
            continue
        there = reports[host]["versions"]
        differing = [
            key
            for key, value in here.items()
            if there.get(key, ABSENT) != value
            # a checkout without git (a copied tree) says nothing about its commit
            and not (key == "archbench commit" and ABSENT in (value, there.get(key, ABSENT)))
        ]
        if differing:
            what = ", ".join(
                f"{key} {there.get(key, ABSENT)} (here {here[key]})" for key in differing
            )
            if {"archbench", "archbench commit"} & set(differing):
                what += f" from {reports[host]['archbench_path']}"
            problems.append(Problem(host, what, _fix(differing, here)))
    return problems


def controller_problems(
    hosts: Sequence[str], reports: dict[str, dict[str, Any]], controllers: set[str]
) -> list[Problem]:
    """Hosts whose Horovod was built without a controller the study's runs name."""
    problems = []
    for host in hosts:
        built = reports.get(host, {}).get("versions", {}).get("horovod controllers")
        if built is None:
            continue
        missing = sorted(name for name in controllers if name not in built.split(", "))
        if missing:
            flags = " ".join(f"HOROVOD_WITH_{name.upper()}=1" for name in missing)
            problems.append(Problem(
                host, f"Horovod there has no {', '.join(missing)} controller (built: {built}), "
                "which the study's ring runs use", f"rebuild Horovod there with {flags}",
            ))  # fmt: skip
    return problems


def summary(reports: dict[str, dict[str, Any]]) -> str:
    """This host's stack, as one line."""
    here = reports.get(HERE, {}).get("versions", {})
    parts = [f"{key} {value}" for key, value in here.items() if key != "archbench commit"]
    return ", ".join(parts)
