"""`archbench report runs/<study>/ [--out DIR]`: figures and a written report from run records."""

from __future__ import annotations

import argparse
from pathlib import Path

from archbench.common.errors import StopError, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write figures and a report (markdown + HTML) from a study's run records",
        description=(
            "Read the run records of a study (runs/<study>/results.jsonl, or any records file) "
            "and write report.md, report.html, PNG and SVG figures and CSV tables."
        ),
    )
    parser.add_argument("study", type=Path, help="a study folder (runs/<study>/) or a .jsonl file")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the report (default: <study folder>/report)",
    )
    parser.add_argument(
        "--answer",
        action="store_true",
        help="print only the answer table (per workload and setting: the fastest configuration, "
        "by how much over the next, how sure) as Markdown, and write nothing",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # deferred: pandas and matplotlib are only needed once the command really runs
    from archbench.analysis.answer import answer_markdown, answer_table
    from archbench.analysis.load import load_study
    from archbench.analysis.report import write_report

    if args.answer:
        print(answer_markdown(answer_table(load_study(args.study))))
        return 0
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    try:
        report = write_report(args.study, args.out)
    except OSError as exc:  # the folder was writable when checked, then stopped being so
        where = exc.filename or args.out or args.study
        raise StopError(f"could not write the report ({where}: {exc.strerror or exc})") from None
    study = report.study
    print(
        f"{len(study.ok)} of {len(study.frame)} runs usable; "
        f"{len(report.figures)} figures; {len(report.skipped)} part(s) skipped"
    )
    if report.progress:
        print(f"this report holds {report.progress}")
    for line in report.findings:
        print(f"  - {line}")
    print(f"report: {report.markdown}")
    print(f"        {report.html}")
    return 0
