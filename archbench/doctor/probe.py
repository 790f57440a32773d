"""What one host has, as doctor compares it: run there by the study's interpreter,

    python -m archbench.doctor.probe [--full] [--data '[{"dataset": "fashion_mnist"}]']

and printed as one JSON line after MARKER: the versions of the stack (`--full` adds Horovod's
controllers and tensor operations as `archbench info` reports them, which imports TensorFlow)
and the problems of the data set's files there.
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
from archbench.errors import UsageError
from archbench.info import collect
from archbench.record import environment

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
    """What keeps a run from reading each data set here ({dataset, data_dir, text_file}, as
    `archbench train` names them), one line each: archbench.data owns the checks a run makes
    before it starts."""
    # deferred: archbench.data loads numpy; doctor's checks import this module for its constants
    from archbench.data import check_available

    problems = []
    for data in data_sets:
        config = SimpleNamespace(
            **{key: data.get(key) for key in ("dataset", "data_dir", "text_file")}
        )
        try:
            check_available(config)
        except UsageError as exc:
            problems += str(exc).splitlines()
    return problems


def probe(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "archbench_path": os.path.dirname(os.path.abspath(archbench.__file__)),
        "versions": versions(args.full),
        "data": data_problems(json.loads(args.data)),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m archbench.doctor.probe")
    parser.add_argument("--full", action="store_true", help="also Horovod's controllers")
    parser.add_argument("--data", default="[]", help="JSON list of the data sets to check")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    report = probe(parse_args(sys.argv[1:] if argv is None else argv))
    print(MARKER + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
