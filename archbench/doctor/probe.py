"""What one host has, as doctor compares it: run there by the study's interpreter,

    python -m archbench.doctor.probe [--full] [--data '[{"dataset": "fashion_mnist"}]']
                                     [--models '["examples/transformer.py:build"]']

and printed as one JSON line after MARKER: the versions of the stack (`--full` adds Horovod's
controllers and tensor operations as `archbench info` reports them, which imports TensorFlow),
the problems of a built-in data set's files there, and the sha256 of the user's model and data
files there (archbench.doctor.files compares them with this machine's).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from types import SimpleNamespace
from typing import Any

import archbench
from archbench.common.errors import UsageError
from archbench.info import collect
from archbench.runtime.environment import environment
from archbench.workloads.files import readable_file_problem, sha256_of

MARKER = "archbench-doctor-probe:"
# A value a host lacks (a package not installed, a git-less checkout) reads as this.
ABSENT = "not installed"


def versions(full: bool) -> dict[str, str]:
    """The versions doctor compares between hosts (archbench.info owns how they are read)."""

    if full:
        info = collect()
    else:
        info = {"environment": environment()}
    env = info["environment"]
    found = {
        "python": env["python"],
        "tensorflow": env["tensorflow"],
        "horovod": env["horovod"],
        "mpi": env["mpi"],
        "mpi4py": env["mpi4py"],
        "archbench": env["archbench"],
        "archbench commit": env["git_commit"],
    }
    if full:
        horovod = info["horovod"]
        if "error" not in horovod:
            found["horovod controllers"] = ", ".join(horovod["controllers"]) or "none"
            found["horovod tensor ops"] = ", ".join(horovod["tensor_operations"])
    return {key: str(value) if value else ABSENT for key, value in found.items()}


def data_problems(data_sets: list[dict[str, str | None]]) -> list[str]:
    """What keeps a run from reading each built-in data set here ({dataset, data_dir,
    text_file}, as `archbench train` names them), one line each: archbench.workloads.data owns the checks a
    run makes before it starts. A user's data is compared by its files' sha256 (`user_files`)."""
    # deferred: archbench.workloads.data loads numpy; doctor's checks import this module for its constants
    from archbench.workloads.data import check_available
    from archbench.workloads.user_data import parse_user_data

    problems = []
    for data in data_sets:
        if parse_user_data(str(data.get("dataset"))) is not None:
            continue
        config = SimpleNamespace(
            **{key: data.get(key) for key in ("dataset", "data_dir", "text_file")}
        )
        try:
            check_available(config)
        except UsageError as exc:
            problems += str(exc).splitlines()
    return problems


def _file_facts(kind: str, spec: str, path: str | None, problem: str | None = None) -> dict:
    """One file's entry: its path and sha256, or what keeps it from being read here."""
    digest = None
    if problem is None and path is not None:
        unreadable = readable_file_problem(path)
        if unreadable:
            problem = f"{path}: {unreadable}"
        else:
            try:
                digest = sha256_of(path)
            except OSError as exc:
                problem = f"{path}: cannot be read ({exc.strerror or exc})"
    return {"kind": kind, "spec": spec, "file": path, "sha256": digest, "problem": problem}


def user_files(models: list[str], data_sets: list[dict[str, str | None]]) -> list[dict]:
    """The files a run here would read for the user's models and data sets, with their sha256."""
    if not models and not data_sets:
        return []  # the sweep's quick probe stays as light as it was
    # deferred: these load numpy; doctor's checks import this module for its constants
    from archbench.workloads.models import model_source
    from archbench.workloads.user_data import parse_user_data

    entries = []
    for spec in models:
        try:
            source = model_source(spec)
            file = source.file  # a module's file as this host's interpreter finds it
        except UsageError as exc:
            entries.append(_file_facts("model", spec, None, str(exc).split(": ", 1)[-1]))
            continue
        if source.user:
            missing = None if file else f"no module {source.module} here"
            entries.append(_file_facts("model", spec, file, missing))
    for spec in dict.fromkeys(str(data.get("dataset")) for data in data_sets):
        found = parse_user_data(spec)
        if found is None:
            continue
        if found.form == "npy" and not os.path.isdir(found.path):
            # one line for a missing folder, not one per array in it
            entries.append(_file_facts("data", spec, found.path, f"no such folder {found.path}"))
            continue
        entries += [_file_facts("data", spec, path) for path in found.files()]
    return entries


def probe(args: argparse.Namespace) -> dict[str, Any]:
    data_sets = json.loads(args.data)
    return {
        "hostname": socket.gethostname(),
        "slurm_node": os.environ.get("SLURMD_NODENAME"),  # set in a task srun started
        "archbench_path": os.path.dirname(os.path.abspath(archbench.__file__)),
        "versions": versions(args.full),
        "data": data_problems(data_sets),
        "files": user_files(json.loads(args.models), data_sets),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m archbench.doctor.probe")
    parser.add_argument("--full", action="store_true", help="also Horovod's controllers")
    parser.add_argument("--data", default="[]", help="JSON list of the data sets to check")
    parser.add_argument("--models", default="[]", help="JSON list of the user's --model values")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    report = probe(parse_args(sys.argv[1:] if argv is None else argv))
    print(MARKER + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
