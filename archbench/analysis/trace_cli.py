"""`archbench timeline FILE [--step N] [--out-dir DIR]`: one traced step's breakdown per rank
(compute, communication hidden and exposed, waits, update, host, the time a CPU budget stopped
the rank, unaccounted), its critical path, and its Gantt chart (PNG and SVG).

FILE is a trace `--timeline` wrote. Without --step the median traced step is shown (the one
whose slowest rank's time is the median). A file that is not such a trace gets one line and
exit status 2.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from archbench.analysis.fmt import as_percent, num
from archbench.common.archs import SERVER_ROLE
from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, read_json
from archbench.common.output_folder import folder_problem
from archbench.common.safe_text import file_token, shown
from archbench.timeline.traceformat import archbench_problems, problems

COLUMNS = (  # (header, StepBreakdown attribute)
    ("step ms", "step_s"),
    ("compute", "compute"),
    ("comm hidden", "comm_hidden"),
    ("comm exposed", "comm_exposed"),
    ("waits", "wait"),
    ("update", "update"),
    ("host", "host"),
    ("stopped", "stopped"),
    ("throttled", "throttled"),
    ("unaccounted", "unaccounted"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "timeline",
        help="a traced step's breakdown per rank and its Gantt chart, from a --timeline trace",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("file", type=Path, help="a trace written by train --timeline")
    parser.add_argument("--step", type=int, default=None, help="the traced step to show")
    parser.add_argument(
        "--out-dir", type=Path, default=None, help="where to draw the Gantt (default: beside FILE)"
    )
    parser.set_defaults(func=run)


def read_trace(path: Path) -> dict:
    """The trace at `path`; UsageError (one line) when it is not a --timeline trace."""
    where = shown(str(path))
    try:
        trace = read_json(path)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except JsonProblem as exc:
        raise UsageError(f"{where}: {exc}") from None
    found = problems(trace, limit=1)
    if found:
        raise UsageError(f"{where}: not a valid Trace Event Format file ({shown(found[0])})")
    if not isinstance(trace, dict) or "archbench" not in str(trace.get("otherData", {})):
        raise UsageError(f"{where}: a trace, but not one archbench --timeline wrote")
    found = archbench_problems(trace, limit=1)
    if found:
        raise UsageError(f"{where}: not a trace archbench --timeline wrote ({shown(found[0])})")
    return trace


def run(args: argparse.Namespace) -> int:
    # deferred: the breakdowns (statistics) load only when a trace is read
    from archbench.timeline.breakdown import breakdowns, critical_path, median_step

    trace = read_trace(args.file)
    out_dir = args.out_dir or args.file.parent
    # checked before anything is printed or drawn: an out-dir that is a file (or /dev/null)
    problem = folder_problem(out_dir, parents=False)
    if problem:
        raise UsageError(f"--out-dir {shown(str(out_dir))}: {problem}")
    rows = breakdowns(trace)
    steps = sorted({row.step for row in rows})
    if not steps:
        raise UsageError(f"{shown(str(args.file))}: the trace holds no traced step")
    step = args.step if args.step is not None else median_step(rows)
    if step not in steps:
        raise UsageError(f"--step {step}: the trace holds steps {', '.join(map(str, steps))}")
    meta = trace.get("otherData", {})
    print(
        f"{meta.get('arch', '?')} {meta.get('model', '?')}, step {step} of traced steps "
        f"{', '.join(map(str, steps))}; ms of virtual time (D = {meta.get('dilation_factor_D', 1)})"
    )
    print(_table([row for row in rows if row.step == step]))
    path = critical_path(trace, step)
    if path:
        print("critical path (last span first; each waited on the next):")
        for link in path:
            print(
                f"  rank {link['rank']}: {shown(str(link['name']))} ({shown(str(link['cat']))}, "
                f"ends {link['end_ms']} ms)"
            )
    # The files' names: a token of the trace file's stem and the step (an integer the trace's
    # check vouched for), never the trace's text as it is.
    stem = file_token(f"{args.file.stem}-step{int(step)}", fallback=f"timeline-step{int(step)}")
    figure = _gantt(trace, step, out_dir, stem, meta)
    print(f"gantt: {figure.paths[0]}\n       {figure.paths[1]}")
    return 0


def _table(rows) -> str:
    headers = ["rank", "role", *(h for h, _ in COLUMNS), "overlap", "spans cover", "+ throttled"]
    lines = [headers]
    for row in rows:
        cells = [str(row.rank), row.role]
        cells += [num(1000 * getattr(row, attr)) for _, attr in COLUMNS]
        cells += [as_percent(row.overlap), as_percent(row.span_coverage), as_percent(row.coverage)]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in lines)


def _gantt(trace: dict, step: int, out_dir: Path, stem: str, meta: dict):
    # deferred: the Gantt chart loads matplotlib and pandas
    from archbench.analysis.gantt import plot_step
    from archbench.timeline.breakdown import breakdowns

    rows = [r for r in breakdowns(trace) if r.step == step and r.role != SERVER_ROLE]
    comm = sum(r.comm for r in rows)
    hidden = sum(r.comm_hidden for r in rows) / comm if comm else None
    title = f"{meta.get('arch', '?')} {meta.get('model', '')}, step {step}: " + (
        f"{100 * hidden:.0f}% of the workers' communication ran while they computed"
        if hidden is not None
        else "no communication"
    )
    made = not out_dir.exists()
    out_dir.mkdir(exist_ok=True)
    try:
        return plot_step(trace, step, out_dir, stem, title, f"Step {step}")
    except BaseException:
        if made:  # a folder this command made and could not fill is not left behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
