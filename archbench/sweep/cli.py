"""`archbench sweep runs/<study>.yaml`: run a design of experiments, resumably."""

from __future__ import annotations

import argparse

from archbench.sweep.driver import SweepOptions, run_sweep
from archbench.sweep.spec import CLUSTER_KINDS, load_spec


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a study (factors, levels, design) and keep one record per run",
        description=(
            "Expand the study's design, launch every run for real (mpirun, horovodrun, or a plain "
            "process) with a timeout, and keep one record per run in runs/<study>/results.jsonl. "
            "Re-running skips finished runs. Spec format: runs/README.md."
        ),
    )
    parser.add_argument("spec", help="study spec, e.g. runs/demo.yaml")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands that would run, run nothing"
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="also run again the runs recorded as failed or timeout",
    )
    parser.add_argument(
        "--cluster",
        choices=CLUSTER_KINDS,
        help="where runs go (overrides the spec's cluster.kind; auto: emulated when root, else localhost)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit status 1 unless every run of the study is ok"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    options = SweepOptions(
        dry_run=args.dry_run,
        retry_failed=args.retry_failed,
        cluster=args.cluster,
        strict=args.strict,
    )
    return run_sweep(spec, options)
