"""Time to accuracy: test accuracy against training wall-clock time per architecture, and
the time each architecture needs to reach the target accuracy; which reaches it first (or, where
none does, the best final accuracy) is its finding."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import plotting
from archbench.analysis.fmt import as_percent, num, pct
from archbench.analysis.load import Study
from archbench.analysis.section import Column, FigureFile, Section, Table

KEY, TITLE = "accuracy", "Time to accuracy"

HOW_TO_READ = (
    "Each line follows one architecture's configuration that reached the target accuracy "
    "soonest (or, where none did, the one with the best final accuracy): test accuracy at each "
    "evaluation against the training time spent so far (evaluation excluded). Points are means "
    "over repetitions, bars one standard deviation; the dotted line is the target accuracy. "
    "The table gives the time to the target: n/a where the configuration never reached it."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("arch", "arch"),
    Column("config", "configuration"),
    Column("target_accuracy", "target", as_percent),
    Column("reached", "reps reaching it"),
    Column("n", "reps"),
    Column("time_to_target_s", "time to target (s)"),
    Column("time_to_target_std", "± std"),
    Column("final_accuracy", "final accuracy", as_percent),
]


def _curve_points(epochs: list[object]) -> list[tuple[float, float]]:
    points = []
    for point in epochs:
        if not isinstance(point, dict):
            continue
        train_s, acc = point.get("train_s"), point.get("test_accuracy")
        if isinstance(train_s, int | float) and isinstance(acc, int | float):
            points.append((float(train_s), float(acc)))
    return points


def _config_summary(runs: pd.DataFrame) -> dict[str, float]:
    reached = runs["time_to_target_s"].notna()
    return {
        "reached": int(reached.sum()),
        "n": len(runs),
        "time_to_target_s": runs.loc[reached, "time_to_target_s"].mean()
        if reached.any()
        else math.nan,
        "time_to_target_std": runs.loc[reached, "time_to_target_s"].std()
        if reached.sum() > 1
        else math.nan,
        "final_accuracy": runs["test_accuracy"].mean(),
        "final_accuracy_std": runs["test_accuracy"].std(),
        "target_accuracy": runs["target_accuracy"].dropna().iloc[0]
        if runs["target_accuracy"].notna().any()
        else math.nan,
    }


def time_to_target_table(study: Study) -> pd.DataFrame:
    """Per workload × arch: the configuration that reaches the target soonest."""
    ok = study.ok
    rows = []
    for (workload, arch), runs in ok.groupby(["workload", "arch"], sort=True):
        candidates = []
        for config, config_runs in runs.groupby("config", sort=True):
            summary = _config_summary(config_runs)
            summary.update(workload=workload, arch=arch, config=config)
            candidates.append(summary)
        # Reaching the target in more repetitions beats reaching it sooner in fewer.
        candidates.sort(
            key=lambda c: (
                -c["reached"] / c["n"],
                c["time_to_target_s"] if not math.isnan(c["time_to_target_s"]) else math.inf,
                -(c["final_accuracy"] if not math.isnan(c["final_accuracy"]) else -1.0),
            )
        )
        rows.append(candidates[0])
    columns = [
        "workload",
        "arch",
        "config",
        "target_accuracy",
        "reached",
        "n",
        "time_to_target_s",
        "time_to_target_std",
        "final_accuracy",
        "final_accuracy_std",
    ]
    table = pd.DataFrame(rows, columns=columns)
    order = sorted(
        range(len(table)),
        key=lambda i: (table.at[i, "workload"], plotting.arch_sort_key(table.at[i, "arch"])),
    )
    return table.iloc[order].reset_index(drop=True)


def mean_curve(runs: pd.DataFrame) -> pd.DataFrame:
    """Evaluations aligned by their index across repetitions (they evaluate at the same steps)."""
    curves = [_curve_points(e) for e in runs["epochs"]]
    curves = [c for c in curves if c]
    if not curves:
        return pd.DataFrame(columns=["train_s", "train_s_std", "accuracy", "accuracy_std"])
    length = min(len(c) for c in curves)
    stacked = np.array([c[:length] for c in curves])  # runs × points × (time, accuracy)
    std = stacked.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(stacked.shape[1:])
    return pd.DataFrame(
        {
            "train_s": stacked[:, :, 0].mean(axis=0),
            "train_s_std": std[:, 0],
            "accuracy": stacked[:, :, 1].mean(axis=0),
            "accuracy_std": std[:, 1],
        }
    )


def plot_curves(study: Study, table: pd.DataFrame, fig_dir: Path) -> FigureFile | None:
    ok = study.ok
    workloads = sorted(table["workload"].unique())
    panels = []
    for workload in workloads:
        lines = []
        for _, choice in table[table["workload"] == workload].iterrows():
            runs = ok[
                (ok["workload"] == workload)
                & (ok["arch"] == choice["arch"])
                & (ok["config"] == choice["config"])
            ]
            curve = mean_curve(runs)
            if len(curve):
                lines.append((choice, curve))
        if lines:
            panels.append((workload, lines))
    if not panels:
        return None
    fig, axes = plotting.new_figure(len(panels), ncols=min(len(panels), 2))
    for ax, (workload, lines) in zip(axes, panels, strict=True):
        for index, (choice, curve) in enumerate(lines):
            ax.errorbar(
                curve["train_s"],
                100 * curve["accuracy"],
                xerr=curve["train_s_std"],
                yerr=100 * curve["accuracy_std"],
                color=plotting.arch_color(choice["arch"], index),
                marker=plotting.arch_marker(choice["arch"]),
                markersize=4,
                capsize=2,
                label=str(choice["arch"]),
            )
        target = table.loc[table["workload"] == workload, "target_accuracy"].dropna()
        if len(target):
            ax.axhline(
                100 * target.iloc[0],
                color="black",
                linestyle=":",
                linewidth=1,
                label="target accuracy",
            )
        ax.set_xlabel("training time (s, evaluation excluded)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_xlim(left=0)
        if len(panels) > 1:
            plotting.panel_title(ax, str(workload))
    return plotting.finish_figure(
        fig,
        axes,
        accuracy_headline(table) or "Test accuracy against time",
        fig_dir,
        "time_to_accuracy",
        "Test accuracy against training time",
    )


# --- findings ------------------------------------------------------------------------------


def accuracy_headline(table: pd.DataFrame) -> str | None:
    reached = table[table["time_to_target_s"].notna()]
    if reached.empty:
        if table["final_accuracy"].notna().any():
            best = table.loc[table["final_accuracy"].idxmax()]
            target = table["target_accuracy"].dropna()
            prefix = (
                f"No architecture reached {pct(target.iloc[0])} test accuracy; best"
                if len(target)
                else "Best"
            )
            return f"{prefix} final accuracy: {best['arch']} {pct(best['final_accuracy'])}"
        return None
    parts = []
    for workload, rows in reached.groupby("workload", sort=True):
        rows = rows.sort_values("time_to_target_s")
        first = rows.iloc[0]
        text = (
            f"{first['arch']} reaches {pct(first['target_accuracy'])} first "
            f"({num(first['time_to_target_s'])} s"
        )
        if len(rows) > 1:
            second = rows.iloc[1]
            text += f"; {second['arch']} {num(second['time_to_target_s'])} s"
        text += ")"
        parts.append(f"{workload}: {text}" if reached["workload"].nunique() > 1 else text)
    return "; ".join(parts)


def accuracy_findings(table: pd.DataFrame) -> list[str]:
    headline = accuracy_headline(table)
    if headline is None:
        return []
    sentences = [headline + "."]
    missed = table[table["time_to_target_s"].isna() & table["target_accuracy"].notna()]
    if len(missed) and len(missed) < len(table):
        names = ", ".join(f"{r['arch']} ({r['workload']})" for _, r in missed.iterrows())
        sentences.append(f"Not reaching the target accuracy at all: {names}.")
    return sentences


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok
    if ok.empty or (ok["test_accuracy"].isna().all() and not ok["epochs"].map(bool).any()):
        return section.skip(TITLE, "no successful run recorded a test accuracy")
    table = time_to_target_table(study)
    section.tables.append(Table("time_to_target", "Time to the target accuracy", table, COLUMNS))
    section.findings += accuracy_findings(table)
    if table["target_accuracy"].isna().all():
        section.notes.append(
            "The records name no target accuracy, so no time to target could be measured."
        )
    figure = plot_curves(study, table, fig_dir)
    if figure is None:
        section.skip(
            "Accuracy against time",
            "no run recorded per-evaluation points (`timing.epochs` with train_s and "
            "test_accuracy)",
        )
    else:
        section.figures.append(figure)
    return section
