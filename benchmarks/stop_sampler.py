"""Does the stop sampler earn its place? Traced runs with it on (`--stop-sampler on`, the
default: a thread of the node library notes where each stop of the CPU budget fell, drawn as a
span) and off (each traced step's throttled total only), interleaved in one study.

Runs the study `runs/stop-sampler.yaml` (resumable: a second call only prints) and prints, per
architecture and for each figure the report reads from a trace, the ratio of its mean with the
sampler on to its mean with it off, with its 95% bootstrap interval
(`archbench.analysis.stats.ratio_of_means`), and the spread of the runs without it (relative
standard deviation): an interval that holds 1 says the sampler did not move that figure past the
noise of this study. The figures: what tracing costs a step (`timeline.cost.ratio`, a traced
step's median over the same run's timed one: the sampler's thread runs in traced steps only, and
the ratio within a run leaves the machine's drift out), the untraced steps as a control
(`timing.step_s_median`), the overlap, the exposed communication and the waits, and the share of
the worst traced step its spans cover (the rest is a gap the chart leaves blank; the median step's
is 0.999 either way).

Usage: python benchmarks/stop_sampler.py [--study runs/stop-sampler.yaml] [--no-run]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from study_run import run_study

from archbench.analysis.stats import ratio_of_means
from archbench.record import RunRecord, read_lines, study_files
from archbench.record.schema import number_or_none

FIGURES = (
    ("timeline.cost.ratio", "traced ÷ timed step"),
    ("timing.step_s_median", "untraced step"),
    ("timeline.overlap", "overlap"),
    ("timeline.comm_exposed_s", "exposed comm"),
    ("timeline.wait_s", "waits"),
    ("timeline.span_coverage_min", "worst step's spans"),
)


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/stop_sampler.py", "runs/stop-sampler.yaml", argv)
    if folder is None:
        return 2
    records = [RunRecord(r) for r in read_lines(study_files(folder)).records]
    runs: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
    for record in records:
        if record.get("status") == "ok" and record.get("timeline"):
            runs[(record.arch, record.config.get("stop_sampler", "on"))].append(record)
    print(
        f"{'arch':<5} {'figure':<20} {'on':>10} {'off':>10}  {'on ÷ off [95%]':>20}  off's spread"
    )
    for arch in sorted({arch for arch, _ in runs}):
        on, off = runs.get((arch, "on"), []), runs.get((arch, "off"), [])
        if len(on) < 2 or len(off) < 2:
            print(f"{arch:<5} fewer than two traced runs at a level: nothing to compare")
            continue
        for path, label in FIGURES:
            a = [v for v in (number_or_none(r.get(path)) for r in on) if v is not None]
            b = [v for v in (number_or_none(r.get(path)) for r in off) if v is not None]
            if len(a) < 2 or len(b) < 2 or statistics.mean(b) == 0:
                print(f"{arch:<5} {label:<20} {'-':>10} {'-':>10}")
                continue
            ratio = ratio_of_means(a, b)
            interval = f"{ratio['ratio']:.3f} [{ratio['ci_low']:.3f}, {ratio['ci_high']:.3f}]"
            spread = statistics.stdev(b) / abs(statistics.mean(b))
            print(
                f"{arch:<5} {label:<20} {statistics.mean(a):>10.4g} {statistics.mean(b):>10.4g}  "
                f"{interval:>20}  {spread:.1%} over {len(b)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
