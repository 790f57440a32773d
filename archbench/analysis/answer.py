"""The answer the report opens with: for each workload and each measured setting (worker count,
and link or per-worker batch where the study varies them), which configuration trains fastest,
by how much over the next architecture, and how sure that is.

Candidates at a setting are each architecture's fastest configuration there (a PS placement, a
server count, a compression are choices within an architecture), and, at every setting, one
process (`single` alone, no companions): a user's first question is whether to distribute at
all. "How sure" is the 95% bootstrap interval of the throughput ratio of the winner over the
runner-up across their repetitions (`stats.ratio_of_means`): `sure` where it excludes 1,
`too close to call` where it does not, `one repetition` where there is no interval.

`archbench report runs/<study>/ --answer` prints the table as Markdown (README.md shows the
demo's, generated from the records in docs/demo-results.jsonl.gz).
"""

from __future__ import annotations

import math

import pandas as pd

from archbench.analysis import arch_rows
from archbench.analysis.fmt import plain
from archbench.analysis.load import Study
from archbench.analysis.scaling import facet_columns
from archbench.analysis.section import Column, Table, markdown_table
from archbench.analysis.stats import best_per_group, per_config, ratio_of_means
from archbench.common.archs import is_baseline

ONE_PROCESS = "one process"


def _label(row: pd.Series) -> str:
    """An architecture's configuration as a reader names it: the architecture, with what was
    chosen within it (its placement, servers, mode, compression) where it is not the default."""
    if is_baseline(row["arch"]):
        return ONE_PROCESS
    parts = [str(row["arch"])]
    for key, default in (("placement", "spread"), ("sync_mode", "sync"), ("compression", "none")):
        value = row.get(key)
        if isinstance(value, str) and value and value != default:
            parts.append(value)
    servers = row.get("num_ps")
    if isinstance(servers, float) and not math.isnan(servers) and servers > 1:
        parts.append(f"{int(servers)} servers")
    return " ".join(parts) if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


def answer_table(study: Study) -> pd.DataFrame:
    """One row per workload × setting with at least two candidates: the winner, its mean
    samples/s, the runner-up, the ratio with its 95% interval, and the verdict."""
    ok = study.ok.dropna(subset=["samples_per_s", "workers"])
    if ok.empty:
        return pd.DataFrame()
    facets = facet_columns(ok)
    single = ok[arch_rows.baseline(ok)]
    alone = single[single["load_nodes"] == 1]
    distributed = ok[arch_rows.distributed(ok) & (ok["workers"] > 1)]
    keys = ["workload", *facets, "arch", "workers"]
    summary = per_config(distributed, keys, "samples_per_s")
    best = best_per_group(summary, keys, higher_is_better=True)
    rows = []
    for setting, part in best.groupby(["workload", *facets, "workers"], dropna=False, sort=True):
        workload = setting[0]
        here = ok[ok["workload"] == workload]
        for facet, value in zip(facets, setting[1:-1], strict=True):
            here = here[here[facet] == value]
        candidates = []
        for _, row in part.iterrows():
            runs = here[here["config"] == row["config"]]
            candidates.append((_label(runs.iloc[0]), runs))
        # one process alone on its host where the study ran it so, else beside its companions
        own = alone[alone["workload"] == workload]
        if own.empty:
            own = single[single["workload"] == workload]
        for facet, value in zip(facets, setting[1:-1], strict=True):
            if facet == "batch_size":  # one process is a fair candidate at the same batch only
                own = own[own["batch_size"] == value]
        if not own.empty:
            fastest = own.groupby("config")["samples_per_s"].mean().idxmax()
            candidates.append((ONE_PROCESS, own[own["config"] == fastest]))
        if len(candidates) < 2:
            continue
        ranked = sorted(candidates, key=lambda item: -item[1]["samples_per_s"].mean())
        (winner, winner_runs), (runner_up, runner_runs) = ranked[0], ranked[1]
        ratio = ratio_of_means(
            winner_runs["samples_per_s"].tolist(), runner_runs["samples_per_s"].tolist()
        )
        rows.append(
            {
                "workload": workload,
                **dict(zip(facets, setting[1:-1], strict=True)),
                "workers": int(setting[-1]),
                "fastest": winner,
                "samples_per_s": float(winner_runs["samples_per_s"].mean()),
                "next": runner_up,
                "ratio": ratio["ratio"],
                "ci_low": ratio["ci_low"],
                "ci_high": ratio["ci_high"],
                "verdict": _verdict(ratio["ci_low"]),
                "n": min(len(winner_runs), len(runner_runs)),
            }
        )
    return pd.DataFrame(rows)


def _verdict(ci_low: float) -> str:
    if math.isnan(ci_low):
        return "one repetition"
    return "sure" if ci_low > 1 else "too close to call"


COLUMNS = [
    Column("workload", "workload"),
    Column("link", "link"),
    Column("batch_size", "per-worker batch", plain),
    Column("workers", "workers", plain),
    Column("fastest", "fastest"),
    Column("samples_per_s", "samples/s", lambda value: f"{value:,.0f}"),
    Column("margin", "over the next [95% CI]"),
    Column("next", "next"),
    Column("verdict", "verdict"),
    Column("n", "reps", plain),
]
HOW_TO_READ = (
    "For each workload and measured setting, the fastest of the architectures' best "
    "configurations and of one process, its mean throughput, and the ratio of its throughput "
    "to the next one's with a 95% bootstrap interval over repetitions: `sure` where the "
    "interval excludes 1, `too close to call` where it does not."
)


def answer_section_table(table: pd.DataFrame) -> Table:
    """The table as the report (and `report --answer`) shows it."""
    frame = table.copy()
    if not frame.empty:
        frame["margin"] = [
            f"{ratio:.2f}× [{low:.2f}, {high:.2f}]" if not math.isnan(low) else f"{ratio:.2f}×"
            for ratio, low, high in zip(frame["ratio"], frame["ci_low"], frame["ci_high"])
        ]
    return Table("answer", "The fastest configuration at each measured setting", frame, COLUMNS)


def answer_markdown(table: pd.DataFrame) -> str:
    """The table in Markdown, as README.md shows the demo's."""
    if table.empty:
        return "No setting of this study measured two candidates to compare."
    return "\n".join(markdown_table(answer_section_table(table)))
