"""`archbench submit runs/<study>.yaml`: a batch job that runs the study, then its report, inside a
Slurm allocation.

The script is written beside the study's results (`runs/<study>/<study>.sbatch`) so it can be
read before it runs (`--dry-run` writes and prints it, and submits nothing). Inside the job the
sweep reads the allocation (`--cluster slurm`) and, being resumable, carries on where an earlier
job of the same study stopped: a job cancelled mid-study and submitted again loses and repeats no
finished run.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from archbench.common.errors import StopError, UsageError
from archbench.common.hosts import HostSlots
from archbench.common.safe_text import one_line, plain_word
from archbench.sweep import preflight
from archbench.sweep.spec import StudySpec, load_spec
from archbench.sweep.target import ClusterTarget

# Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|\d+-\d+")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="submit a study to Slurm: an sbatch job that runs the sweep, then the report",
        description=(
            "Write an sbatch script that runs `archbench sweep SPEC --cluster slurm` and then "
            "`archbench report` inside the allocation, and submit it with sbatch. The script is "
            "kept beside the study's results. Submitting again resumes the study."
        ),
    )
    parser.add_argument("spec", help="study spec, e.g. runs/demo.yaml")
    parser.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="nodes to allocate (default: the most hosts one run of the study spreads over)",
    )
    parser.add_argument("--partition", default=None, help="Slurm partition (default: Slurm's)")
    parser.add_argument(
        "--time", default=None, help="time limit, as sbatch reads it (e.g. 30, 1:00:00, 1-12)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="write and print the script, submit nothing"
    )
    parser.set_defaults(func=run)


def nodes_needed(spec: StudySpec) -> int:
    """The most hosts any run of the study uses with one slot per node (spread placements put
    one rank on each)."""
    # deferred: the sweep's planner loads only when submit runs, not for --help
    from archbench.sweep.plan import build_plan

    hosts = tuple(HostSlots(f"n{index}", 1) for index in range(1, 257))
    plan = build_plan(spec, ClusterTarget("slurm", hosts))
    return max(len(run.layout) for run in plan.runs)


def check_time(text: str | None) -> None:
    if text is not None and not _TIME.fullmatch(text):
        raise UsageError(
            f"--time {text!r} is not a Slurm time limit (minutes, HH:MM:SS, or D-HH:MM:SS)"
        )


def _slurm_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise StopError(f"{name} is not on PATH: archbench submit needs Slurm's client commands")
    return path


def partitions(env: dict[str, str] | None = None) -> list[str]:
    """The partitions Slurm knows; StopError when Slurm does not answer."""
    try:
        result = subprocess.run(
            [_slurm_tool("sinfo"), "-h", "-o", "%R"],
            capture_output=True, text=True, timeout=30, env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise StopError("sinfo did not answer within 30 s; is slurmctld running?") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise StopError(
            f"sinfo failed: {lines[-1] if lines else result.returncode} (is SLURM_CONF set?)"
        )
    return sorted({line.strip() for line in result.stdout.splitlines() if line.strip()})


def check_partition(name: str | None, env: dict[str, str] | None = None) -> None:
    if name is None:
        return
    if not _PARTITION.fullmatch(name):
        raise UsageError(f"--partition {name!r} is not a partition name")
    known = partitions(env)
    if name not in known:
        raise UsageError(
            f"--partition {name}: Slurm has no such partition (it has: {', '.join(known) or 'none'})"
        )


def script_path(spec: StudySpec) -> Path:
    return spec.results_dir.resolve() / f"{spec.name}.sbatch"


def script_text(
    spec: StudySpec,
    nodes: int,
    partition: str | None,
    time_limit: str | None,
    python: str,
    workdir: Path,
) -> str:
    """The batch script. Every path in it is checked first (UsageError naming it): sbatch reads an
    `#SBATCH` line's value as plain words, and a line break anywhere would start a command."""
    results = plain_word(str(spec.results_dir.resolve()), "the study's results folder")
    spec_path = one_line(str(Path(spec.path).resolve()), "the study spec's path")
    package_root = one_line(str(Path(__file__).resolve().parents[2]), "archbench's folder")
    one_line(python, "the interpreter")
    options = [
        f"--job-name=archbench-{plain_word(spec.name, 'the study name')}",
        f"--nodes={nodes}",
        f"--output={results}/slurm-%j.out",
        f"--chdir={plain_word(str(workdir), 'the working folder')}",
    ]
    if partition:
        options.append(f"--partition={partition}")
    if time_limit:
        options.append(f"--time={time_limit}")
    quoted = shlex.quote
    lines = [
        "#!/bin/bash",
        *(f"#SBATCH {option}" for option in options),
        f"# Study {spec.name}: its runs on the allocated nodes, then its report.",
        f"# Written by `archbench submit {quoted(str(spec.path))}`. Submit it again (or run that",
        "# command again) to resume the study: finished runs are kept and not run twice.",
        "set -u",
        f"export PYTHONPATH={quoted(package_root)}${{PYTHONPATH:+:$PYTHONPATH}}",
        'echo "archbench: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
        "sweep=0 report=0",
        f"{quoted(python)} -m archbench.cli sweep {quoted(spec_path)} --cluster slurm || sweep=$?",
        f"{quoted(python)} -m archbench.cli report {quoted(results)} || report=$?",
        '[ "$sweep" -ne 0 ] && exit "$sweep"',
        'exit "$report"',
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    if args.nodes is not None and not 1 <= args.nodes <= 4096:
        raise UsageError(f"--nodes {args.nodes} is out of range 1..4096")
    check_time(args.time)
    nodes = args.nodes or nodes_needed(spec)
    sbatch = None if args.dry_run else _slurm_tool("sbatch")
    if args.partition is not None:
        check_partition(args.partition)
    python = spec.python or sys.executable or "python3"
    preflight.check_python(python, from_spec=spec.python is not None)
    text = script_text(spec, nodes, args.partition, args.time, python, Path.cwd())
    path = script_path(spec)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    except OSError as exc:
        raise StopError(f"cannot write {path}: {exc.strerror or exc}") from None
    if args.dry_run:
        print(text, end="")
        print(f"archbench submit: wrote {path}; submit it with: sbatch {path}", file=sys.stderr)
        return 0
    result = subprocess.run(
        [sbatch, "--parsable", str(path)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise StopError(f"sbatch {path} failed: {lines[-1] if lines else result.returncode}")
    job = result.stdout.strip().split(";")[0]
    print(
        f"submitted job {job} ({nodes} nodes): {path}; its output: "
        f"{spec.results_dir.resolve()}/slurm-{job}.out; records: "
        f"{spec.results_dir.resolve()}/results.jsonl"
    )
    return 0


if __name__ == "__main__":
    from archbench.cli import main

    sys.exit(main(["submit", *sys.argv[1:]]))
