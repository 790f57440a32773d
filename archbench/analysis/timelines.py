"""Timelines: the overlap of communication with computation, observed in traced steps
(`--timeline`, or `timeline: true` in a study), per architecture, with a Gantt chart of one step
per architecture (the same step, on one time scale), and the research notes' overlap claim
checked with it (seed 002: ring-allreduce "excels by virtue of overlapping computation time and
communication time, which PS and P2P architectures fail to achieve").

Measured overlap is each run's `timeline.overlap`: the share of its workers' communication time
during which the same worker was computing. Per configuration the mean over repetitions gets a
95% Student-t interval. Ring overlaps more than p2p (or ps) where ring's interval lies above the
other's, less where it lies below; `inconclusive` where they meet.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from archbench.analysis import arch_rows, plotting
from archbench.analysis.fmt import as_percent, as_times, in_ms, pct
from archbench.analysis.gantt import draw_step, legend_handles, panel_height_in, step_extent_ms
from archbench.analysis.load import Study, format_level
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import mean_ci_halfwidth
from archbench.common.jsonl import JsonProblem, read_json

KEY, TITLE = "timelines", "Timelines: overlap observed in traced steps"
HOW_TO = (
    "add `timeline: true` to the study spec (each run then writes runs/<study>/runs/<run>/"
    "timeline.json and its record's `timeline.*`), or run `train --timeline FILE`, and sweep again"
)
HOW_TO_READ = (
    "`overlap` is the share of a run's communication time (allreduce activities, sends and "
    "receives, pushes and pulls, as the engines recorded them) during which the same worker "
    "was computing (forward, backward or update ops), mean over repetitions with its 95% "
    "interval. `exposed (traced)` is the communication no compute hid, `waits` the time the "
    "workers were blocked on others, both medians of the traced steps; `exposed (probes)` is "
    "the record's inferred `timing.exposed_comm_s` (step minus a probe's compute), which "
    "counts waits, the update and host time as communication too. `spans cover` is the "
    "least share of a traced step the spans account for; `throttled` the time a CPU budget "
    "(an emulated node's) stopped the worker in a traced step, which no engine can record, and "
    "`with throttling` the least share spans and throttling account for together. Each Gantt chart draws one traced step of "
    "one run per architecture (the same step number, one time scale): a band per rank, a lane "
    "per kind of span; communication drawn under compute in time is the overlap."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("arch", "arch"),
    Column("workers", "workers", format_level),
    Column("link", "link"),
    Column("overlap", "overlap [95% CI]"),
    Column("exposed_traced_s", "exposed (traced, ms)", in_ms),
    Column("wait_s", "waits (traced, ms)", in_ms),
    Column("exposed_probe_s", "exposed (probes, ms)", in_ms),
    Column("throttled_s", "throttled (ms)", in_ms),
    Column("span_coverage", "spans cover", as_percent),
    Column("coverage", "with throttling", as_percent),
    Column("cost", "traced ÷ timed step", as_times),
    Column("n", "reps"),
]
KEYS = ["workload", "arch", "workers", "link"]
SUBJECT = "ring"  # the claim is about ring: its overlap against that of OTHERS
OTHERS = ("p2p", "ps")


def overlap_table(traced: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, runs in traced.groupby(KEYS, dropna=False, sort=True):
        values = runs["timeline_overlap"].dropna()
        mean = values.mean() if len(values) else math.nan
        half = mean_ci_halfwidth(values.std(), len(values))
        rows.append(
            {
                **dict(zip(KEYS, key, strict=True)),
                "overlap_mean": mean,
                "ci_low": max(0.0, mean - half) if not math.isnan(half) else math.nan,
                "ci_high": min(1.0, mean + half) if not math.isnan(half) else math.nan,
                "overlap": _interval(mean, half),
                "exposed_traced_s": runs["timeline_exposed_s"].mean(),
                "wait_s": runs["timeline_wait_s"].mean(),
                "exposed_probe_s": runs["exposed_comm_s"].mean(),
                "throttled_s": runs["timeline_throttled_s"].mean(),
                "span_coverage": runs["timeline_span_coverage"].min(),
                "coverage": runs["timeline_coverage"].min(),
                "cost": runs["timeline_cost"].mean(),
                "n": len(values),
            }
        )
    return pd.DataFrame(rows)


def _interval(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "n/a (no communication)"
    if math.isnan(half):
        return f"{pct(mean)} (one repetition)"
    return f"{pct(mean)} [{pct(max(0.0, mean - half))}, {pct(min(1.0, mean + half))}]"


def claim_rows(table: pd.DataFrame) -> list[dict]:
    """Seed 002's overlap claim per workload, workers and link: ring against p2p and ps."""
    rows = []
    for key, group in table.groupby(["workload", "workers", "link"], dropna=False, sort=True):
        ring = group[group["arch"] == SUBJECT]
        if ring.empty:
            continue
        ring = ring.iloc[0]
        for other in OTHERS:
            found = group[group["arch"] == other]
            if found.empty:
                continue
            versus = found.iloc[0]
            rows.append(
                {
                    "workload": key[0],
                    "workers": key[1],
                    "link": key[2],
                    "comparison": f"ring vs {other}",
                    "ring": ring["overlap"],
                    "other": versus["overlap"],
                    "verdict": _verdict(ring, versus),
                }
            )
    return rows


def _verdict(ring: pd.Series, other: pd.Series) -> str:
    if any(math.isnan(v) for v in (ring["ci_low"], other["ci_high"])):
        return "one repetition: no interval"
    if ring["ci_low"] > other["ci_high"]:
        return "agrees (ring overlaps more)"
    if ring["ci_high"] < other["ci_low"]:
        return "contradicts (ring overlaps less)"
    return "inconclusive (the intervals meet)"


CLAIM_COLUMNS = [
    Column("workload", "workload"),
    Column("workers", "workers", format_level),
    Column("link", "link"),
    Column("comparison", "comparison"),
    Column("ring", "ring's overlap"),
    Column("other", "the other's overlap"),
    Column("verdict", "verdict"),
]
WHY = (
    "Why, from the traces: ring's DistributedGradientTape hands each gradient to Horovod as the "
    "backward pass produces it, so an allreduce can run while earlier layers' gradients are "
    "still computed (if Horovod's cycle picks it up in time); p2p's exchange starts only after "
    "the whole backward pass (one compiled pass returns one gradient vector) and the next "
    "forward pass waits for every piece, so nothing is left to hide it behind; ps's executor "
    "pushes each gradient as soon as it exists, so a push can overlap the rest of the backward "
    "pass, but the pull waits for the chief's aggregation and token."
)


def claim_findings(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    tally: dict[str, int] = {}
    for row in rows:
        word = row["verdict"].split(" (")[0]
        tally[word] = tally.get(word, 0) + 1
    counts = ", ".join(f"{n} {verdict}" for verdict, n in tally.items())
    detail = "; ".join(
        f"{r['workload']}, {format_level(r['workers'])} workers: {r['comparison']} "
        f"{r['ring']} vs {r['other']}"
        for r in rows
    )
    return [
        "Claim 'ring-allreduce overlaps computation and communication, PS and P2P fail to' "
        f"(research notes, seed 002), measured in traced steps over {len(rows)} comparisons: "
        f"{counts} ({detail})."
    ]


def trace_path(row: pd.Series) -> Path | None:
    """A run's trace: the path its record names, else beside its record in the run folder."""
    named = row.get("timeline_file")
    candidates = [Path(named)] if isinstance(named, str) else []
    if isinstance(row.get("file"), str | Path) and row.get("run_id"):
        candidates.append(Path(row["file"]).parent / "runs" / str(row["run_id"]) / "timeline.json")
    return next((path for path in candidates if path.is_file()), None)


def plot_gantts(traced: pd.DataFrame, fig_dir: Path) -> FigureFile | None:
    """One Gantt per architecture: the most traced workload and worker count, the same step."""
    counts = traced.groupby(["workload", "workers"]).size()
    workload, workers = counts.idxmax()
    chosen = traced[(traced["workload"] == workload) & (traced["workers"] == workers)]
    traces = {}
    for arch, runs in chosen.sort_values("run_id").groupby("arch", sort=False):
        for _, row in runs.iterrows():
            path = trace_path(row)
            if path is None:
                continue
            try:
                traces[arch] = read_json(path)
            except (OSError, JsonProblem):
                continue  # a trace that does not read (nested past bounds, cut): the next run's
            break
    if not traces:
        return None
    steps = set.intersection(*(set(t["otherData"]["traced_steps"]) for t in traces.values()))
    if not steps:
        return None
    step = sorted(steps)[(len(steps) - 1) // 2]
    order = sorted(traces, key=plotting.arch_sort_key)
    scale = max(step_extent_ms(traces[arch], step) for arch in order) * 1.02
    ranks = max(len(traces[a]["otherData"]["dilation_factor_per_rank"]) for a in order)
    fig, axes = plotting.new_figure(len(order), ncols=1, panel_size=(9.0, panel_height_in(ranks)))
    for ax, arch in zip(axes, order, strict=True):
        draw_step(ax, traces[arch], step, xmax_ms=scale)
        plotting.panel_title(ax, f"{arch}: step {step}")
    fig.legend(handles=legend_handles(), loc="outside lower center", ncol=3, frameon=False)
    plotting.set_title(
        fig, f"One traced step per architecture ({workload}, {format_level(workers)} workers)"
    )
    stem = "timeline_gantt"
    caption = f"Step {step} of one run per architecture, on one time scale"
    return FigureFile(stem, caption, plotting.save(fig, fig_dir, stem))


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    traced = study.ok[study.ok["timeline_overlap"].notna() | study.ok["timeline_step_s"].notna()]
    if traced.empty:
        return section.skip("Timelines", f"no run of this study was traced: {HOW_TO}")
    traced = traced.assign(link=traced["link"].map(lambda v: v if isinstance(v, str) else "n/a"))
    table = overlap_table(traced)
    section.tables.append(
        Table("timeline_overlap", "Overlap observed in traced steps", table, COLUMNS)
    )
    rows = claim_rows(table)
    if rows:
        claims = pd.DataFrame(rows)
        section.tables.append(
            Table("timeline_claim", "Seed 002's overlap claim, checked", claims, CLAIM_COLUMNS)
        )
        section.findings += claim_findings(rows)
        section.notes.append(WHY)
    else:
        section.skip(
            "Seed 002's overlap claim",
            "it needs traced ring runs beside traced p2p or ps runs of one workload",
        )
    figure = plot_gantts(traced, fig_dir)
    if figure is None:
        section.skip("Gantt charts", "no trace file of the traced runs was found")
    else:
        section.figures.append(figure)
    if arch_rows.with_horovod(table).any():
        section.notes.append(
            "A traced ring run runs Horovod with HOROVOD_TIMELINE=DYNAMIC from start-up (it is "
            "read only then): rank 0's coordinator works harder every cycle, so the run's "
            "timed steps are slower than an untraced run's where cores are scarce (measured: "
            "`benchmarks/timeline_cost.py`); compare ring's speed on untraced runs."
        )
    low = table[table["span_coverage"] < 0.95]
    if len(low):
        section.notes.append(
            "Spans account for less than 95% of some traced step of "
            + ", ".join(f"{r['arch']} ({r['workload']})" for _, r in low.iterrows())
            + ": the rest is time no engine recorded: a CPU budget stopping the node "
            "(`throttled`), a process waiting for a core on a busy host, Python between calls."
        )
    return section
