"""What the stop sampler adds to a traced run's figures: each trace of a study summarised as its
record summarises it (`archbench.timeline.breakdown.summary`), once as traced and once with the
sampler's work taken out (no `stopped` spans; each step's throttled time left unplaced, as a
trace without the sampler has it).

It answers part of the question: what placing the stops changes in the figures the report reads
(overlap, exposed communication, waits, the share of a step the spans cover). It cannot say what
the sampler's own thread costs a traced step, nor how the spans derived at a step's edges would
differ had the stops been unknown while tracing: that needs runs with the sampler off.

Usage: python benchmarks/stop_sampler.py runs/<study>/   (a study with traced runs: runs/demo/)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

from archbench.timeline.breakdown import summary

SHOWN = ("overlap", "comm_exposed_s", "wait_s", "stopped_s", "throttled_s", "span_coverage_min")


def without_stops(trace: dict) -> dict:
    """The trace as the breakdown would read it had no stop been placed."""
    stripped = copy.deepcopy(trace)
    kept = []
    for event in stripped["traceEvents"]:
        if event.get("cat") == "stopped":
            continue
        args = event.get("args")
        if isinstance(args, dict) and "stops_sampled" in args:
            args["stops_sampled"] = False
        kept.append(event)
    stripped["traceEvents"] = kept
    return stripped


def _figure(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.2f} ms" if name.endswith("_s") else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="a study's results folder with traced runs (runs/demo/)")
    study = Path(parser.parse_args(argv).study)
    traces = sorted(study.glob("runs/*/timeline.json"))
    if not traces:
        print(f"{study}: no traced run (runs/*/timeline.json)", file=sys.stderr)
        return 2
    print(f"{'run':<22} {'':<8} " + " ".join(f"{name:>17}" for name in SHOWN))
    for path in traces:
        trace = json.loads(path.read_text())
        for label, figures in (
            ("sampled", summary(trace)),
            ("unplaced", summary(without_stops(trace))),
        ):
            cells = " ".join(f"{_figure(name, figures.get(name)):>17}" for name in SHOWN)
            print(f"{path.parent.name:<22} {label:<8} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
