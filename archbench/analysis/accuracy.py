"""Time to accuracy: test accuracy against training wall-clock time per architecture, and
the time each architecture needs to reach the target accuracy; which reaches it first (or, where
none does, the best final accuracy) is its finding. A regression workload (`--loss mse`) shows its
test RMSE instead (lower is better; records name no target RMSE, so it has no time to target)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import plotting
from archbench.analysis.fmt import as_percent, num, pct
from archbench.analysis.load import Study
from archbench.analysis.quality import ACCURACY, RMSE, Metric, metric_of
from archbench.analysis.section import Column, FigureFile, Section, Table

KEY, TITLE = "accuracy", "Time to accuracy"
# Where no record of a workload names a target accuracy, its target is this share of the best
# final test accuracy any of its runs reached: a fixed rule, labelled as such wherever it shows.
DEFAULT_TARGET_SHARE = 0.9
DEFAULT_TARGET_RULE = f"default: {DEFAULT_TARGET_SHARE:.0%} of the best final accuracy"

HOW_TO_READ = (
    "Each line follows one architecture's configuration that reached the target accuracy "
    "soonest (or, where none did, the one with the best final accuracy): test accuracy at each "
    "evaluation against the training time spent so far (evaluation excluded). Points are means "
    "over repetitions, bars one standard deviation; the dotted line is the target accuracy. "
    "The table gives the time to the target: n/a where the configuration never reached it."
)
HOW_TO_READ_ONLY_RMSE = (
    "Each line follows one architecture's configuration with the lowest final test RMSE (the "
    "root of the test mean squared error; lower is better): its test RMSE at each evaluation "
    "against the training time spent so far (evaluation excluded). Points are means over "
    "repetitions, bars one standard deviation. Regression runs (--loss mse) name no target "
    "RMSE, so there is no time to target; the table gives the final test RMSE."
)
HOW_TO_READ_RMSE = (
    " A regression workload (--loss mse) is drawn by its test RMSE instead (lower is better), "
    "its line the configuration with the lowest final RMSE; there is no target RMSE, so no time "
    "to target."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("arch", "arch"),
    Column("config", "configuration"),
    Column("target_accuracy", "target", as_percent),
    Column("target_rule", "target from"),
    Column("reached", "reps reaching it"),
    Column("n", "reps"),
    Column("time_to_target_s", "time to target (s)"),
    Column("time_to_target_std", "± std"),
    Column("final_accuracy", "final accuracy", as_percent),
    Column("final_rmse", "final test RMSE (lower is better)", RMSE.cell),
]


def _curve_points(epochs: list[object], key: str = ACCURACY.epoch_key) -> list[tuple[float, float]]:
    points = []
    for point in epochs:
        if not isinstance(point, dict):
            continue
        train_s, value = point.get("train_s"), point.get(key)
        if isinstance(train_s, int | float) and isinstance(value, int | float):
            points.append((float(train_s), float(value)))
    return points


def _config_summary(runs: pd.DataFrame, metric: Metric) -> dict[str, float]:
    if metric is RMSE:
        # no target RMSE: nothing is reached or timed, and a null accuracy is not a score
        return {
            "metric": metric.key,
            "reached": math.nan,
            "n": len(runs),
            "time_to_target_s": math.nan,
            "time_to_target_std": math.nan,
            "final_accuracy": math.nan,
            "final_accuracy_std": math.nan,
            "final_rmse": runs["test_rmse"].mean(),
            "final_rmse_std": runs["test_rmse"].std(),
            "target_accuracy": math.nan,
        }
    reached = runs["time_to_target_s"].notna()
    return {
        "metric": metric.key,
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
        "final_rmse": math.nan,
        "final_rmse_std": math.nan,
        "target_accuracy": runs["target_accuracy"].dropna().iloc[0]
        if runs["target_accuracy"].notna().any()
        else math.nan,
    }


def _first_reach(epochs: object, target: float) -> float:
    """The training time of the first evaluation at or above `target` (nan: never)."""
    points = _curve_points(epochs if isinstance(epochs, list) else [])
    return next((train_s for train_s, value in points if value >= target), math.nan)


def with_default_targets(ok: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """The runs, where a classification workload's records name no target accuracy given the
    default one (DEFAULT_TARGET_SHARE of its best final accuracy) and the time each reached it
    at, from its evaluations; and the default target of each workload that got one."""
    out = ok.copy()
    defaults: dict[str, float] = {}
    for workload, runs in ok.groupby("workload"):
        if metric_of(runs) is not ACCURACY or runs["target_accuracy"].notna().any():
            continue
        best = runs["test_accuracy"].max()
        if not best > 0:
            continue
        target = DEFAULT_TARGET_SHARE * float(best)
        defaults[workload] = target
        mask = out["workload"] == workload
        out.loc[mask, "target_accuracy"] = target
        out.loc[mask, "time_to_target_s"] = out.loc[mask, "epochs"].map(
            lambda epochs, target=target: _first_reach(epochs, target)
        )
    return out, defaults


def time_to_target_table(study: Study, ok: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per workload × arch: the configuration that reaches the target soonest (over `ok`, the
    study's successful runs unless given)."""
    ok = study.ok if ok is None else ok
    rows = []
    metrics = {workload: metric_of(runs) for workload, runs in ok.groupby("workload")}
    for (workload, arch), runs in ok.groupby(["workload", "arch"], sort=True):
        metric = metrics[workload]
        candidates = []
        for config, config_runs in runs.groupby("config", sort=True):
            summary = _config_summary(config_runs, metric)
            summary.update(workload=workload, arch=arch, config=config)
            candidates.append(summary)
        if metric is RMSE:
            candidates.sort(key=lambda c: metric.sort_value(c["final_rmse"]))
        else:
            # Reaching the target in more repetitions beats reaching it sooner in fewer.
            candidates.sort(
                key=lambda c: (
                    -c["reached"] / c["n"],
                    c["time_to_target_s"] if not math.isnan(c["time_to_target_s"]) else math.inf,
                    metric.sort_value(c["final_accuracy"]),
                )
            )
        rows.append(candidates[0])
    columns = [
        "workload",
        "arch",
        "config",
        "metric",
        "target_accuracy",
        "reached",
        "n",
        "time_to_target_s",
        "time_to_target_std",
        "final_accuracy",
        "final_accuracy_std",
        "final_rmse",
        "final_rmse_std",
    ]
    table = pd.DataFrame(rows, columns=columns)
    order = sorted(
        range(len(table)),
        key=lambda i: (table.at[i, "workload"], plotting.arch_sort_key(table.at[i, "arch"])),
    )
    return table.iloc[order].reset_index(drop=True)


def mean_curve(runs: pd.DataFrame, metric: Metric = ACCURACY) -> pd.DataFrame:
    """Evaluations aligned by their index across repetitions (they evaluate at the same steps);
    the metric's values in the columns `accuracy` and `accuracy_std`."""
    curves = [_curve_points(e, metric.epoch_key) for e in runs["epochs"]]
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
            curve = mean_curve(runs, RMSE if choice["metric"] == RMSE.key else ACCURACY)
            if len(curve):
                lines.append((choice, curve))
        if lines:
            panels.append((workload, lines))
    if not panels:
        return None
    fig, axes = plotting.new_figure(len(panels), ncols=min(len(panels), 2))
    for ax, (workload, lines) in zip(axes, panels, strict=True):
        metric = _table_metric(table[table["workload"] == workload])
        for index, (choice, curve) in enumerate(lines):
            ax.errorbar(
                curve["train_s"],
                metric.scale * curve["accuracy"],
                xerr=curve["train_s_std"],
                yerr=metric.scale * curve["accuracy_std"],
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
        ax.set_ylabel(metric.axis_label)
        ax.set_xlim(left=0)
        if len(panels) > 1:
            plotting.panel_title(ax, str(workload))
    what = _metrics_text(table)
    return plotting.finish_figure(
        fig,
        axes,
        accuracy_headline(table) or f"{what[0].upper()}{what[1:]} against time",
        fig_dir,
        "time_to_accuracy",
        f"{what[0].upper()}{what[1:]} against training time",
    )


def _table_metric(rows: pd.DataFrame) -> Metric:
    """The metric of a workload's rows of the table (all rows of a workload share it)."""
    return RMSE if len(rows) and (rows["metric"] == RMSE.key).all() else ACCURACY


def _metrics_text(table: pd.DataFrame) -> str:
    """'test accuracy', 'test RMSE' or both, as the table's workloads have them."""
    keys = set(table["metric"])
    if keys == {RMSE.key}:
        return RMSE.name
    if RMSE.key in keys:
        return "test accuracy (classification) or test RMSE (regression, lower is better)"
    return ACCURACY.name


# --- findings ------------------------------------------------------------------------------


def accuracy_headline(table: pd.DataFrame) -> str | None:
    """Who reaches the target accuracy first (or the best final accuracy), and for regression
    workloads who ends at the lowest test RMSE."""
    target = _target_headline(table[table["metric"] == ACCURACY.key])
    rmse = rmse_headline(table[table["metric"] == RMSE.key])
    if target and rmse:
        return f"{target}; l{rmse[1:]}"  # rmse_headline's own capital L, mid-sentence
    return target or rmse


def _target_headline(table: pd.DataFrame) -> str | None:
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


def rmse_headline(table: pd.DataFrame) -> str | None:
    """The lowest final test RMSE per regression workload, and the runner-up."""
    scored = table[table["final_rmse"].notna()]
    if scored.empty:
        return None
    parts = []
    for workload, rows in scored.groupby("workload", sort=True):
        rows = rows.sort_values("final_rmse")
        best = rows.iloc[0]
        text = f"{best['arch']} {RMSE.text(best['final_rmse'])}"
        if len(rows) > 1:
            second = rows.iloc[1]
            text += f", then {second['arch']} {RMSE.text(second['final_rmse'])}"
        parts.append(f"{workload}: {text}" if scored["workload"].nunique() > 1 else text)
    joiner = " — " if scored["workload"].nunique() > 1 else ": "
    return "Lowest final test RMSE (lower is better)" + joiner + "; ".join(parts)


def accuracy_findings(table: pd.DataFrame, default_target: bool = False) -> list[str]:
    """`default_target`: some workload's target is the default rule's, which the headline says."""
    headline = accuracy_headline(table)
    if headline is None:
        return []
    if default_target:
        headline += f" (target by the {DEFAULT_TARGET_RULE})"
    sentences = [headline + "."]
    classified = table[table["metric"] == ACCURACY.key]
    missed = classified[
        classified["time_to_target_s"].isna() & classified["target_accuracy"].notna()
    ]
    if len(missed) and len(missed) < len(classified):
        names = ", ".join(f"{r['arch']} ({r['workload']})" for _, r in missed.iterrows())
        sentences.append(f"Not reaching the target accuracy at all: {names}.")
    return sentences


def _title(table: pd.DataFrame) -> tuple[str, str]:
    """The section's and its table's titles, by the metrics its workloads have."""
    keys = set(table["metric"])
    if keys == {RMSE.key}:
        return "Test RMSE against time", "Final test RMSE (lower is better)"
    if RMSE.key in keys:
        return (
            "Time to accuracy (test RMSE for regression)",
            "Time to the target accuracy; final test RMSE for regression workloads",
        )
    return TITLE, "Time to the target accuracy"


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok
    recorded = ok["test_accuracy"].notna() | ok["test_rmse"].notna()
    if ok.empty or (not recorded.any() and not ok["epochs"].map(bool).any()):
        return section.skip(TITLE, "no successful run recorded a test accuracy or a test RMSE")
    runs, defaults = with_default_targets(ok)
    table = time_to_target_table(study, runs)
    named = (table["metric"] == ACCURACY.key) & table["target_accuracy"].notna()
    table["target_rule"] = np.where(
        table["workload"].isin(list(defaults)),
        DEFAULT_TARGET_RULE,
        np.where(named, "the records", None),
    )
    section.title, table_title = _title(table)
    if (table["metric"] == RMSE.key).all():
        section.how_to_read = HOW_TO_READ_ONLY_RMSE
    elif (table["metric"] == RMSE.key).any():
        section.how_to_read += HOW_TO_READ_RMSE
    section.tables.append(Table("time_to_target", table_title, table, COLUMNS))
    section.findings += accuracy_findings(table, bool(defaults))
    classified = table[table["metric"] == ACCURACY.key]
    if len(classified) and classified["target_accuracy"].isna().all():
        section.notes.append(
            "The records name no target accuracy, so no time to target could be measured."
        )
    for workload, target in sorted(defaults.items()):
        section.notes.append(
            f"{workload}: the records name no target accuracy, so the target is the default "
            f"rule, {DEFAULT_TARGET_SHARE:.0%} of the best final test accuracy a run of it "
            f"reached: {pct(target)}; the time to it is read from each run's evaluations "
            "(`--target-accuracy` names a target of your own)."
        )
    figure = plot_curves(study, table, fig_dir)
    if figure is None:
        section.skip(
            f"{_metrics_text(table)} against time",
            "no run recorded per-evaluation points (`timing.epochs` with train_s and "
            "test_accuracy or test_rmse)",
        )
    else:
        section.figures.append(figure)
    return section
