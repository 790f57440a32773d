"""Optima and transfer: the fastest configuration per workload, and whether the configurations
that are fast on one workload (model/data set) are fast on another; both are its findings."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from archbench.analysis import plotting
from archbench.analysis.fmt import as_percent, as_times, num, plus_minus
from archbench.analysis.load import Study
from archbench.analysis.quality import RMSE
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import correlations, per_config, top_fraction_count

KEY, TITLE = "transfer", "Optima and transfer across workloads"

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")
TOP_FRACTION = 0.10
MAX_PAIR_PANELS = 6

HOW_TO_READ = (
    "A configuration is one combination of the study's factor levels other than the workload; "
    "its time is the mean time per epoch (`timing.epoch_s`: the data set's samples at the "
    "median step's throughput) over repetitions, so configurations that processed different "
    "numbers of samples compare on equal work. The first table names the "
    "fastest configuration of each workload. For each pair of workloads, over the "
    "configurations measured on both: Pearson r (linear) and Spearman ρ (rank) correlation of "
    "their times per epoch; the overlap of the two top-10% sets (at least one configuration "
    "each); and where each workload's optimum ranks on the other (1 = also the best there) "
    "with its slowdown there (its time ÷ that workload's best time; 1.00× = optimal). In the "
    "scatter each point is a configuration; points on a rising line mean the ranking transfers."
)
BEST_COLUMNS = [
    Column("workload", "workload"),
    Column("config", "fastest configuration"),
    Column("epoch_s", "time per epoch (s)"),
    Column("epoch_s_std", "± std"),
    Column("n", "reps"),
    Column("test_accuracy", "test accuracy", as_percent),
    Column("test_rmse", "test RMSE (lower is better)", RMSE.cell),  # regression workloads
    Column("configs_measured", "configurations"),
    Column("runner_up_slowdown", "runner-up slowdown", as_times),
]
TRANSFER_COLUMNS = [
    Column("workload_a", "A"),
    Column("workload_b", "B"),
    Column("matched", "matched configs"),
    Column("pearson_r", "Pearson r"),
    Column("spearman_rho", "Spearman ρ"),
    Column("top_overlap", "top-10% overlap"),
    Column("top_k", "of"),
    Column("a_best_rank_in_b", "A's best: rank in B"),
    Column("a_best_slowdown_in_b", "A's best: slowdown in B", as_times),
    Column("b_best_rank_in_a", "B's best: rank in A"),
    Column("b_best_slowdown_in_a", "B's best: slowdown in A", as_times),
]


def config_times(study: Study) -> pd.DataFrame:
    """Mean time per epoch per workload × configuration."""
    summary = per_config(study.ok, ["workload"], "epoch_s", extra=("test_accuracy", "test_rmse"))
    return summary.rename(columns={"mean": "epoch_s", "std": "epoch_s_std"})


def best_table(times: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for workload, part in times.groupby("workload", sort=True):
        part = part.sort_values(["epoch_s", "config"])
        best = part.iloc[0]
        row = {
            "workload": workload,
            "config": best["config"],
            "epoch_s": best["epoch_s"],
            "epoch_s_std": best["epoch_s_std"],
            "n": int(best["n"]),
            "test_accuracy": best["test_accuracy"],
            "test_rmse": best["test_rmse"],
            "configs_measured": len(part),
        }
        if len(part) > 1:
            row["runner_up"] = part.iloc[1]["config"]
            row["runner_up_slowdown"] = part.iloc[1]["epoch_s"] / best["epoch_s"]
        rows.append(row)
    return pd.DataFrame(rows)


def pair_row(times: pd.DataFrame, a: str, b: str) -> dict[str, object]:
    left = times[times["workload"] == a].set_index("config")["epoch_s"]
    right = times[times["workload"] == b].set_index("config")["epoch_s"]
    matched = sorted(set(left.index) & set(right.index))
    ta, tb = left.loc[matched], right.loc[matched]
    k = top_fraction_count(len(matched), TOP_FRACTION)
    # Ties broken by configuration label so the result does not depend on row order.
    top_a = set(sorted(matched, key=lambda c: (ta[c], c))[:k])
    top_b = set(sorted(matched, key=lambda c: (tb[c], c))[:k])
    best_a = min(matched, key=lambda c: (ta[c], c))
    best_b = min(matched, key=lambda c: (tb[c], c))
    rank_b = tb.rank(method="min")
    rank_a = ta.rank(method="min")
    return {
        "workload_a": a,
        "workload_b": b,
        "matched": len(matched),
        **correlations(ta.to_numpy(), tb.to_numpy()),
        "top_k": k,
        "top_overlap": len(top_a & top_b),
        "top_overlap_frac": len(top_a & top_b) / k,
        "a_best": best_a,
        "b_best": best_b,
        "a_best_rank_in_b": int(rank_b[best_a]),
        "a_best_slowdown_in_b": float(tb[best_a] / tb[best_b]),
        "b_best_rank_in_a": int(rank_a[best_b]),
        "b_best_slowdown_in_a": float(ta[best_b] / ta[best_a]),
    }


def transfer_table(times: pd.DataFrame) -> pd.DataFrame:
    workloads = sorted(times["workload"].unique())
    rows = []
    for a, b in itertools.combinations(workloads, 2):
        shared = set(times.loc[times["workload"] == a, "config"]) & set(
            times.loc[times["workload"] == b, "config"]
        )
        if shared:
            rows.append(pair_row(times, a, b))
    return pd.DataFrame(rows)


def plot_pairs(times: pd.DataFrame, pairs: pd.DataFrame, fig_dir: Path) -> FigureFile:
    shown = pairs.head(MAX_PAIR_PANELS)
    size = (5.6, 4.6) if len(shown) == 1 else (4.4, 4.0)
    fig, axes = plotting.new_figure(len(shown), ncols=min(len(shown), 3), panel_size=size)
    for ax, (_, pair) in zip(axes, shown.iterrows(), strict=True):
        a, b = pair["workload_a"], pair["workload_b"]
        left = times[times["workload"] == a].set_index("config")
        right = times[times["workload"] == b].set_index("config")
        matched = sorted(set(left.index) & set(right.index))
        x, y = left.loc[matched, "epoch_s"], right.loc[matched, "epoch_s"]
        ax.errorbar(
            x,
            y,
            xerr=left.loc[matched, "epoch_s_std"].fillna(0.0),
            yerr=right.loc[matched, "epoch_s_std"].fillna(0.0),
            fmt="o",
            color="#4c72b0",
            alpha=0.8,
            capsize=2,
            label="configuration (mean ± std)",
        )
        ax.plot(
            x[pair["a_best"]],
            y[pair["a_best"]],
            marker="*",
            markersize=16,
            linestyle="none",
            color="#d95f02",
            label=f"fastest on {a}" if len(shown) == 1 else "fastest on the x-axis workload",
        )
        ax.plot(
            x[pair["b_best"]],
            y[pair["b_best"]],
            marker="D",
            markersize=9,
            linestyle="none",
            mfc="none",
            mew=2,
            color="#1b9e77",
            label=f"fastest on {b}" if len(shown) == 1 else "fastest on the y-axis workload",
        )
        ax.set_xlabel(f"time per epoch on {a} (s)")
        ax.set_ylabel(f"time per epoch on {b} (s)")
        # Wide ranges on log axes (both, so the two read alike), with plain-number labels.
        wide = any(v.max() / max(v.min(), 1e-12) > 10 for v in (x, y))
        if len(matched) > 2 and wide:
            for axis, set_scale in ((ax.xaxis, ax.set_xscale), (ax.yaxis, ax.set_yscale)):
                set_scale("log")
                axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(PLAIN)
                axis.set_minor_formatter(NullFormatter())
        rho = pair["spearman_rho"]
        stats_text = (
            f"r = {num(pair['pearson_r'], 2)}, ρ = {num(rho, 2)}"
            if not math.isnan(rho)
            else "too few configurations to correlate"
        )
        plotting.panel_title(
            ax,
            f"{a} vs {b}: {stats_text}; top-{int(pair['top_k'])} overlap "
            f"{int(pair['top_overlap'])}/{int(pair['top_k'])}",
        )
    caption = "Training time of each configuration on two workloads"
    if len(pairs) > len(shown):
        caption += f" (first {len(shown)} of {len(pairs)} pairs; all are in the table)"
    return plotting.finish_figure(
        fig,
        axes,
        transfer_headline(pairs) or "Transfer of configurations",
        fig_dir,
        "transfer",
        caption,
        legend_columns=3,
    )


# --- findings ------------------------------------------------------------------------------


def transfer_headline(pairs: pd.DataFrame) -> str | None:
    if pairs is None or pairs.empty:
        return None
    row = pairs.iloc[0]
    if len(pairs) > 1:
        rho = pairs["spearman_rho"].dropna()
        if len(rho):
            return (
                f"Configuration rankings across {len(pairs)} workload pairs: Spearman ρ from "
                f"{num(rho.min(), 2)} to {num(rho.max(), 2)}"
            )
    rho = row["spearman_rho"]
    ranking = (
        f"rankings agree (Spearman ρ = {num(rho, 2)})"
        if not math.isnan(rho) and rho >= 0.7
        else f"rankings differ (Spearman ρ = {num(rho, 2)})"
        if not math.isnan(rho)
        else "too few matched configurations to correlate"
    )
    return (
        f"{row['workload_a']} → {row['workload_b']}: {ranking}; {row['workload_a']}'s best "
        f"configuration ranks {int(row['a_best_rank_in_b'])} of {int(row['matched'])} on "
        f"{row['workload_b']}, {num(row['a_best_slowdown_in_b'])}× its best"
    )


def transfer_findings(best: pd.DataFrame | None, pairs: pd.DataFrame | None) -> list[str]:
    sentences = []
    if best is not None and not best.empty:
        parts = [
            f"{row['workload']}: {row['config']} ({plus_minus(row['epoch_s'], row['epoch_s_std'], ' s')} per epoch)"
            for _, row in best.iterrows()
        ]
        sentences.append("Fastest configuration per workload — " + "; ".join(parts) + ".")
    if pairs is not None:
        for _, row in pairs.iterrows():
            rho, r = row["spearman_rho"], row["pearson_r"]
            corr = (
                f"times per epoch correlate with Pearson r = {num(r, 2)} and Spearman "
                f"ρ = {num(rho, 2)} over {int(row['matched'])} matched configurations"
                if not math.isnan(rho)
                else f"only {int(row['matched'])} matched configuration(s), too few to correlate"
            )
            sentences.append(
                f"{row['workload_a']} vs {row['workload_b']}: {corr}; their top-"
                f"{int(row['top_k'])} sets share {int(row['top_overlap'])}; "
                f"{row['workload_a']}'s optimum ranks {int(row['a_best_rank_in_b'])} on "
                f"{row['workload_b']} ({num(row['a_best_slowdown_in_b'])}× its optimum's time) "
                f"and {row['workload_b']}'s optimum ranks {int(row['b_best_rank_in_a'])} on "
                f"{row['workload_a']} ({num(row['b_best_slowdown_in_a'])}×)."
            )
    return sentences


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    _draw(section, study, fig_dir)
    section.findings += transfer_findings(section.table("best_config"), section.table("transfer"))
    return section


def _draw(section: Section, study: Study, fig_dir: Path) -> None:
    times = config_times(study)
    if times.empty:
        section.skip(
            "Optima and transfer", "no successful run recorded its time per epoch (timing.epoch_s)"
        )
        return
    best = best_table(times)
    section.tables.append(
        Table("best_config", "Fastest configuration per workload", best, BEST_COLUMNS)
    )
    if times["workload"].nunique() < 2:
        section.skip(
            "Transfer across workloads",
            "the study has a single workload (model and data set); transfer needs two",
        )
        return
    pairs = transfer_table(times)
    if pairs.empty:
        section.skip("Transfer across workloads", "no configuration was measured on two workloads")
        return
    section.tables.append(
        Table("transfer", "Transfer between each pair of workloads", pairs, TRANSFER_COLUMNS)
    )
    few = pairs[pairs["matched"] < 3]
    if len(few):
        section.notes.append(
            f"{len(few)} pair(s) share fewer than 3 configurations: no correlation for them."
        )
    if np.isfinite(pairs["matched"]).any():
        section.figures.append(plot_pairs(times, pairs, fig_dir))
