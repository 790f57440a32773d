"""Parameter-server placement and mode: dedicated vs co-located PS host, synchronous vs
asynchronous, each as a throughput ratio between matched settings with its uncertainty; the
geometric mean of each ratio, and async's cost in accuracy, are its findings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import arch_rows, plotting
from archbench.analysis.fmt import as_points, as_signed, as_times, num
from archbench.analysis.load import (
    AT_STEP_P10,
    AT_STEP_P90,
    Study,
    factor_column,
    format_level,
    level_sort_key,
)
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import ratio_of_means

KEY, TITLE = "placement", "Parameter-server placement and mode"

HOW_TO_READ = (
    "Each row compares two groups of parameter-server runs that differ only in one setting. "
    "The point is the ratio of their mean throughputs (samples/s); a ratio above 1 means the "
    "first-named setting is faster. The bar is a 95% bootstrap confidence interval over "
    "repetitions (resampling each group's runs). Where each side was measured once, the bar "
    "(square marker) is the runs' own spread instead: the range of the ratio while each "
    "side's throughput stays between its 90th and 10th percentile step time. A row without "
    "a bar has a single repetition on one side only, so its uncertainty cannot be estimated."
)


@dataclass(frozen=True)
class Comparison:
    name: str  # table stem
    arm_column: str  # the column whose two levels are compared
    numerator: str
    denominator: str
    other_column: str  # the other PS setting, kept equal within a match
    title: str
    short: tuple[str, str]  # the two sides, as the repetition counts' headers name them
    with_accuracy: bool  # the table shows the difference in final accuracy

    @property
    def columns(self) -> list[Column]:
        top, bottom = format_level(self.numerator), format_level(self.denominator)
        accuracy = Column("accuracy_diff", f"accuracy {top} − {bottom} (points)", as_points)
        # regression runs (--loss mse) score by test RMSE: a difference, lower is better
        rmse = Column("rmse_diff", f"test RMSE {top} − {bottom} (lower is better)", as_signed)
        return [
            Column("setting", "setting"),
            Column("numerator_samples_per_s", f"{top} samples/s"),
            Column("denominator_samples_per_s", f"{bottom} samples/s"),
            Column("ratio", "ratio", as_times),
            Column("ci_low", "95% CI low"),
            Column("ci_high", "95% CI high"),
            Column("ratio_std", "± std (propagated)"),
            Column("within_run_low", "within-run low"),
            Column("within_run_high", "within-run high"),
            *([accuracy, rmse] if self.with_accuracy else []),
            Column("n_numerator", f"reps ({self.short[0]})"),
            Column("n_denominator", f"reps ({self.short[1]})"),
        ]

    def excludes(self, factor_name: str) -> bool:
        lowered = factor_name.lower()
        if self.arm_column == "placement":
            return "placement" in lowered or "hostfile" in lowered
        return "sync" in lowered or lowered in ("mode", "ps_mode")


PLACEMENT = Comparison(
    "placement_ratio",
    "placement",
    "dedicated",
    "colocated",
    "sync_mode",
    "dedicated PS host ÷ PS co-located with a worker",
    short=("ded.", "co-loc."),
    with_accuracy=False,
)
SYNC = Comparison(
    "sync_ratio",
    "sync_mode",
    "async",
    "sync",
    "placement",
    "asynchronous ÷ synchronous PS",
    short=("async", "sync"),
    with_accuracy=True,
)


def _match_columns(study: Study, comparison: Comparison) -> list[str]:
    columns = ["workload", comparison.other_column, "workers", "link"]
    for name in study.config_factors:
        if name == "arch" or comparison.excludes(name):
            continue
        columns.append(factor_column(name))
    return list(dict.fromkeys(columns))


def _setting_label(key: dict[str, object], varying: list[str], comparison: Comparison) -> str:
    parts = []
    for column, value in key.items():
        if column == "workload":
            if column in varying:
                parts.append(str(value))
        elif column == comparison.other_column:
            if value not in (None, "None", "nan"):
                parts.append(format_level(value))
        elif column == "workers":
            parts.append(f"{format_level(float(value))} workers")
        elif column == "link":
            if value not in (None, "None", "nan"):
                parts.append(str(value))
        elif column in varying:
            name = column.removeprefix("factors.")
            if name not in ("workers", "link", "placement", "sync", "sync_mode"):
                parts.append(f"{name}={value}")
    return " · ".join(parts)


def ratio_table(study: Study, comparison: Comparison) -> pd.DataFrame:
    ps = study.ok[arch_rows.with_servers(study.ok)].dropna(subset=["samples_per_s"])
    ps = ps[ps[comparison.arm_column].isin([comparison.numerator, comparison.denominator])]
    columns = _match_columns(study, comparison)
    keyed = ps.assign(**{f"_k{i}": ps[c].map(str) for i, c in enumerate(columns)})
    key_names = [f"_k{i}" for i in range(len(columns))]
    groups = []
    for key, rows in keyed.groupby(key_names, sort=False):
        arms = rows.groupby(comparison.arm_column)
        if len(arms) < 2:
            continue
        top = rows[rows[comparison.arm_column] == comparison.numerator]
        bottom = rows[rows[comparison.arm_column] == comparison.denominator]
        row = dict(zip(columns, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(ratio_of_means(top["samples_per_s"].tolist(), bottom["samples_per_s"].tolist()))
        row.update(within_run_ratio(top, bottom))
        row.update(
            numerator=comparison.numerator,
            denominator=comparison.denominator,
            numerator_samples_per_s=top["samples_per_s"].mean(),
            denominator_samples_per_s=bottom["samples_per_s"].mean(),
            n_numerator=len(top),
            n_denominator=len(bottom),
            accuracy_diff=top["test_accuracy"].mean() - bottom["test_accuracy"].mean(),
            rmse_diff=top["test_rmse"].mean() - bottom["test_rmse"].mean(),
        )
        groups.append(row)
    table = pd.DataFrame(groups)
    if table.empty:
        return table
    varying = [c for c in columns if table[c].nunique() > 1]
    table.insert(
        0,
        "setting",
        [
            _setting_label({c: r[c] for c in columns}, varying, comparison)
            for _, r in table.iterrows()
        ],
    )
    order = sorted(
        range(len(table)),
        key=lambda i: [level_sort_key(_as_number(table.at[i, c])) for c in columns],
    )
    return table.iloc[order].reset_index(drop=True)


def within_run_ratio(top: pd.DataFrame, bottom: pd.DataFrame) -> dict[str, float]:
    """With one run on each side: the lowest and highest ratio while each side's throughput
    stays within its own step p10-p90 (slow top ÷ fast bottom, fast top ÷ slow bottom).
    NaN with repetitions, whose spread gives the bootstrap interval instead."""
    if len(top) != 1 or len(bottom) != 1:
        return {"within_run_low": np.nan, "within_run_high": np.nan}
    a, b = top.iloc[0], bottom.iloc[0]
    return {
        "within_run_low": a[AT_STEP_P90] / b[AT_STEP_P10],
        "within_run_high": a[AT_STEP_P10] / b[AT_STEP_P90],
    }


def _as_number(text: object) -> object:
    try:
        return float(str(text))
    except ValueError:
        return text


def plot_ratios(tables: list[tuple[Comparison, pd.DataFrame]], fig_dir: Path) -> FigureFile:
    longest = max(len(t) for _, t in tables)
    fig, axes = plotting.new_figure(
        len(tables), ncols=len(tables), panel_size=(5.2, 0.45 * longest + 1.8)
    )
    for ax, (comparison, table) in zip(axes, tables, strict=True):
        ys = np.arange(len(table))[::-1]
        ratio = table["ratio"].to_numpy()
        color = plotting.arch_color("ps")
        drawn = np.zeros(len(table), dtype=bool)
        # The bootstrap interval where both sides have repetitions, else the runs' own spread.
        for (low_column, high_column), marker, label in (
            (("ci_low", "ci_high"), "o", "ratio of means, 95% bootstrap CI"),
            (("within_run_low", "within_run_high"), "s", plotting.WITHIN_RUN_BARS),
        ):
            below = np.clip(ratio - table[low_column].to_numpy(), 0.0, None)
            above = np.clip(table[high_column].to_numpy() - ratio, 0.0, None)
            rows = ~drawn & ~np.isnan(below) & ~np.isnan(above)
            if rows.any():
                ax.errorbar(
                    ratio[rows],
                    ys[rows],
                    xerr=np.vstack([below[rows], above[rows]]),
                    fmt=marker,
                    color=color,
                    capsize=4,
                    label=label,
                )
            drawn |= rows
        if (~drawn).any():
            ax.plot(
                ratio[~drawn],
                ys[~drawn],
                "o",
                mfc="white",
                color=color,
                label="one side measured once (no interval)",
            )
        ax.axvline(1.0, color="black", linestyle="--", linewidth=1, label="no difference (1×)")
        ax.set_yticks(ys)
        ax.set_yticklabels(table["setting"])
        ax.set_xlabel(
            "throughput ratio, "
            f"{format_level(comparison.numerator)} ÷ {format_level(comparison.denominator)} (×)"
        )
        values = np.r_[
            table["ci_low"],
            table["ci_high"],
            table["within_run_low"],
            table["within_run_high"],
            table["ratio"],
            1.0,
        ]
        low_x, high_x = np.nanmin(values), np.nanmax(values)
        pad = 0.08 * (high_x - low_x) + 0.02
        ax.set_xlim(low_x - pad, high_x + pad)
        ax.set_ylim(-0.7, len(table) - 0.3)
        ax.grid(axis="y", visible=False)
        plotting.panel_title(ax, comparison.title)
    comparison, table = tables[0]
    kind = "placement" if comparison is PLACEMENT else "sync"
    return plotting.finish_figure(
        fig,
        axes,
        placement_headline(table, kind) or "Parameter-server placement and mode",
        fig_dir,
        "ps_placement",
        "Parameter-server placement and sync mode",
        legend_columns=3,
    )


# --- findings ------------------------------------------------------------------------------


def _ratio_text(row: pd.Series) -> str:
    text = f"{num(row['ratio'])}×"
    if not math.isnan(row["ci_low"]):
        text += f" (95% CI {num(row['ci_low'])}–{num(row['ci_high'])})"
    return text


def placement_findings(table: pd.DataFrame | None, comparison: str) -> list[str]:
    if table is None or table.empty:
        return []
    data = table[table["ratio"].notna()]
    if data.empty:
        return []
    geo = float(math.exp(data["ratio"].map(math.log).mean()))
    if comparison == "placement":
        subject = "a dedicated PS host"
        against = "a PS co-located with a worker"
    else:
        subject = "asynchronous PS training"
        against = "synchronous"
    extremes = data.loc[[data["ratio"].idxmin(), data["ratio"].idxmax()]].drop_duplicates()
    cases = "; ".join(f"{row['setting']}: {_ratio_text(row)}" for _, row in extremes.iterrows())
    text = (
        f"{subject[0].upper()}{subject[1:]} gives {num(geo)}× the throughput of {against} "
        f"(geometric mean over {len(data)} matched setting(s); {cases})."
    )
    with_ci = data[data["ci_low"].notna()]
    if len(with_ci):
        clear = int(((with_ci["ci_low"] > 1) | (with_ci["ci_high"] < 1)).sum())
        text += (
            f" The 95% CI excludes 1× in {clear} of {len(with_ci)} setting(s) with repetitions"
            + (": not distinguishable from no difference." if clear == 0 else ".")
        )
    sentences = [text]
    if comparison == "sync" and "accuracy_diff" in data.columns:
        diff = data["accuracy_diff"].dropna()
        if len(diff):
            sentences.append(
                "Asynchronous PS ends at a test accuracy "
                f"{'+' if diff.mean() >= 0 else '−'}{num(abs(100 * diff.mean()))} points "
                "from synchronous on average."
            )
    if comparison == "sync" and "rmse_diff" in data.columns:
        diff = data["rmse_diff"].dropna()
        if len(diff):
            sentences.append(
                "Asynchronous PS ends at a test RMSE "
                f"{'+' if diff.mean() >= 0 else '−'}{num(abs(diff.mean()))} "
                "from synchronous on average (lower is better)."
            )
    return sentences


def placement_headline(table: pd.DataFrame | None, comparison: str) -> str | None:
    sentences = placement_findings(table, comparison)
    if not sentences:
        return None
    headline = sentences[0].split(" (geometric")[0]
    if "not distinguishable" in sentences[0]:
        headline += ", not distinguishable from 1× at 95% confidence"
    return headline


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ps = study.ok[arch_rows.with_servers(study.ok)]
    if ps.empty:
        return section.skip(
            "PS placement and sync mode", "the study has no successful parameter-server run"
        )
    nominal = ps[(ps["placement"] == "dedicated") & (ps["placement_hosts"] == "colocated")]
    if len(nominal):
        section.notes.append(
            f"{len(nominal)} run(s) labelled `dedicated` had their PS on a host that also ran a "
            "worker (e.g. all ranks on one machine): their placement is nominal only."
        )
    drawn = []
    for comparison in (PLACEMENT, SYNC):
        levels = set(ps[comparison.arm_column].dropna())
        sides = f"{format_level(comparison.numerator)} vs {format_level(comparison.denominator)}"
        what = f"PS placement ({sides})" if comparison is PLACEMENT else "PS sync vs async"
        if not {comparison.numerator, comparison.denominator} <= levels:
            have = ", ".join(sorted(map(format_level, levels))) or "none recorded"
            section.skip(what, f"the PS runs cover only one side (levels: {have})")
            continue
        table = ratio_table(study, comparison)
        if table.empty:
            section.skip(what, "no setting was measured on both sides with all else equal")
            continue
        section.tables.append(Table(comparison.name, comparison.title, table, comparison.columns))
        drawn.append((comparison, table))
    if drawn:
        section.figures.append(plot_ratios(drawn, fig_dir))
    section.findings += placement_findings(section.table(PLACEMENT.name), "placement")
    section.findings += placement_findings(section.table(SYNC.name), "sync")
    return section
