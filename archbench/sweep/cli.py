"""`archbench sweep runs/<study>.yaml`: run a design of experiments, resumably."""

from __future__ import annotations

import argparse
from typing import Any

from archbench.common.errors import UsageError
from archbench.runtime.settings import LevelError, setting
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
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="SETTING=LEVEL",
        help="run only the runs with this level (repeatable: --only arch=ring --only arch=p2p --only workers=2 is ring or p2p, with 2 workers)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="give every run a launch of its own (by default runs that share a process layout "
        "share one launch, run after run; the spec's `warm: false` does the same)",
    )
    parser.set_defaults(func=run)


def parse_only(items: list[str]) -> dict[str, list[Any]]:
    """`arch=ring` words as typed levels of known settings; UsageError otherwise.

    Levels of one setting are alternatives (arch=ring arch=p2p: either); settings all must match.
    """
    import yaml

    only: dict[str, list[Any]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--only {item!r}: expected SETTING=LEVEL, e.g. arch=ring")
        try:
            only.setdefault(name, []).append(setting(name).coerce(yaml.safe_load(text)))
        except (LevelError, yaml.YAMLError) as exc:
            raise UsageError(f"--only {item}: {exc}") from None
    return only


def run(args: argparse.Namespace) -> int:
    only = parse_only(args.only)
    spec = load_spec(args.spec)
    options = SweepOptions(
        dry_run=args.dry_run,
        retry_failed=args.retry_failed,
        cluster=args.cluster,
        strict=args.strict,
        only=only,
        cold=args.cold,
    )
    return run_sweep(spec, options)
