"""Throughput and scaling: samples/s against workers per architecture, the ideal line from the
single-process baseline, and scaling efficiency; the fastest architecture at the most workers
of each setting is its finding."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker

from archbench.analysis import arch_rows, plotting
from archbench.analysis.fmt import as_percent, as_times, num, pct, plus_minus
from archbench.analysis.load import AT_STEP_P10, AT_STEP_P90, Study, format_level, level_sort_key
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import best_per_group, per_config, propagated_ratio_std

KEY, TITLE = "scaling", "Throughput and scaling"

HOW_TO_READ = (
    "Each point is the mean throughput (training samples per second, all workers together) of "
    "the fastest configuration of an architecture at that worker count; error bars are one "
    "standard deviation over repetitions, or, for a configuration measured once, that run's "
    "own spread: the throughput at its 90th and 10th percentile step time (the legend says "
    "which). Both axes are logarithmic, so equal ratios are equal distances and ideal scaling "
    "is a straight line; the throughput axis is fitted to the measured points. The dashed line "
    "is ideal linear scaling: the "
    "single-process baseline (same per-worker batch) times the number of workers; where it "
    "leaves the panel, its value at the most workers is written at the top. Scaling "
    "efficiency is throughput divided by that ideal; 100% means no cost for communicating."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("link", "link"),
    Column("batch_size", "batch/worker"),
    Column("arch", "arch"),
    Column("workers", "workers"),
    Column("config", "fastest configuration"),
    Column("samples_per_s", "samples/s"),
    Column("samples_per_s_std", "± std"),
    Column("within_run_low", "at step p90 (one run)"),
    Column("within_run_high", "at step p10 (one run)"),
    Column("n", "reps"),
    Column("speedup", "speed-up vs single", as_times),
    Column("speedup_std", "± std"),
    Column("efficiency", "scaling efficiency", as_percent),
]
FACETS = ("link", "batch_size")


def facet_columns(frame: pd.DataFrame) -> list[str]:
    """Settings that change throughput for a reason other than architecture and workers.

    The link where distributed runs differ in it; the per-worker batch wherever it varies,
    because a baseline is only fair at the same per-worker batch.
    """
    distributed = frame[arch_rows.distributed(frame)]
    facets = ["link"] if distributed["link"].map(str).nunique() > 1 else []
    if frame["batch_size"].dropna().nunique() > 1:
        facets.append("batch_size")
    return facets


def scaling_table(study: Study) -> pd.DataFrame:
    """Best configuration per workload × facets × arch × workers, with speed-up vs single."""
    ok = study.ok.dropna(subset=["samples_per_s", "workers"])
    facets = facet_columns(ok)
    keys = ["workload", *facets, "arch", "workers"]
    summary = per_config(ok, keys, "samples_per_s", extra=(AT_STEP_P90, AT_STEP_P10))
    best = best_per_group(summary, keys, higher_is_better=True)
    baseline_keys = ["workload", *[c for c in facets if c == "batch_size"]]  # not the link
    table = within_run_spread(
        best.rename(columns={"mean": "samples_per_s", "std": "samples_per_s_std"})
    )
    table = _with_baseline(table, ok[arch_rows.baseline(ok)], baseline_keys)
    table["speedup"] = table["samples_per_s"] / table["baseline_samples_per_s"]
    table["speedup_std"] = [
        propagated_ratio_std(m, s, b, bs)
        for m, s, b, bs in zip(
            table["samples_per_s"],
            table["samples_per_s_std"],
            table["baseline_samples_per_s"],
            table["baseline_std"],
            strict=True,
        )
    ]
    table["efficiency"] = table["speedup"] / table["workers"]
    table["efficiency_std"] = table["speedup_std"] / table["workers"]
    table = table.sort_values(
        [*["workload", *facets], "arch", "workers"],
        key=lambda col: col.map(plotting.arch_sort_key) if col.name == "arch" else col,
    )
    return table.reset_index(drop=True)


BASELINE_COLUMNS = {
    "mean": "baseline_samples_per_s",
    "std": "baseline_std",
    "n": "baseline_n",
    "config": "baseline_config",
}


def _baseline(single: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    summary = per_config(single, keys, "samples_per_s")
    return best_per_group(summary, keys, higher_is_better=True).rename(columns=BASELINE_COLUMNS)


def _with_baseline(table: pd.DataFrame, single: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each row's baseline: the fastest `single` configuration of its workload (and per-worker
    batch); where the study measured baselines under load (`--companions`), the one with as many
    nodes computing at once as the row has workers (archbench.analysis.fidelity says why)."""
    if single.empty:
        return table.assign(**{column: math.nan for column in BASELINE_COLUMNS.values()})
    merged = table.merge(_baseline(single, keys), on=keys, how="left")
    loaded = single[single["load_nodes"] > 1] if "load_nodes" in single else single.iloc[0:0]
    if loaded.empty:
        return merged
    by_load = _baseline(single, [*keys, "load_nodes"]).rename(columns={"load_nodes": "workers"})
    matched = table.merge(by_load, on=[*keys, "workers"], how="left")
    has_match = matched["baseline_samples_per_s"].notna() & arch_rows.distributed(matched)
    for column in BASELINE_COLUMNS.values():
        merged.loc[has_match, column] = matched.loc[has_match, column]
    return merged


def within_run_spread(best: pd.DataFrame) -> pd.DataFrame:
    """`within_run_low`/`_high` for configurations with a single repetition (NaN otherwise):
    the throughput of that run at its p90 and its p10 step time. Repetitions have their own
    spread (`samples_per_s_std`), which is what their error bars show."""
    once = best["n"] == 1
    spread = best.assign(
        within_run_low=best[AT_STEP_P90].where(once),
        within_run_high=best[AT_STEP_P10].where(once),
    )
    return spread.drop(
        columns=[f"{c}{s}" for c in (AT_STEP_P90, AT_STEP_P10) for s in ("", "_std")]
    )


def throughput_bars(rows: pd.DataFrame) -> np.ndarray:
    """(2, n) distances below and above each point: the within-run spread where there is one,
    else one standard deviation over repetitions (0 where neither is known)."""
    mean = rows["samples_per_s"].to_numpy(dtype=float)
    std = rows["samples_per_s_std"].to_numpy(dtype=float)
    low = mean - rows["within_run_low"].to_numpy(dtype=float)
    high = rows["within_run_high"].to_numpy(dtype=float) - mean
    within = ~np.isnan(low) & ~np.isnan(high)
    bars = np.where(within, [low, high], [std, std])
    return np.clip(np.nan_to_num(bars, nan=0.0), 0.0, None)  # matplotlib rejects negative bars


def _facet_labels(row: pd.Series, facets: list[str]) -> list[str]:
    labels = []
    for column in facets:
        value = format_level(row[column])
        labels.append(f"link {value}" if column == "link" else f"batch {value}/worker")
    return labels


def panel_label(row: pd.Series, facets: list[str], workloads: int) -> str:
    parts = [str(row["workload"])] if workloads > 1 else []
    return " · ".join(parts + _facet_labels(row, facets)) or str(row["workload"])


def _setting(row: pd.Series, facets: list[str]) -> str:
    return ", ".join([str(row["workload"]), *_facet_labels(row, facets)])


def _panels(table: pd.DataFrame, facets: list[str]) -> list[tuple[str, pd.DataFrame]]:
    keys = ["workload", *facets]
    distributed = table[arch_rows.distributed(table)]
    panels = []
    workloads = table["workload"].nunique()
    combos = distributed[keys].drop_duplicates().to_dict("records")
    combos.sort(key=lambda r: [level_sort_key(r[k]) for k in keys])
    for combo in combos:
        mask = (table["workload"] == combo["workload"]) & arch_rows.distributed(table)
        for column in facets:
            mask &= table[column].map(str) == str(combo[column])
        part = table[mask]
        single = table[(table["workload"] == combo["workload"]) & arch_rows.baseline(table)]
        if "batch_size" in facets:
            single = single[single["batch_size"] == combo["batch_size"]]
        label = panel_label(pd.Series(combo), facets, workloads)
        panels.append((label, pd.concat([single, part])))
    return panels


# Room above and below the measured points (and their bars) on the log axis, and beside the
# first and last worker count.
Y_MARGIN = 1.4
X_MARGIN = 1.15
# The ideal line is drawn whole while it ends within this factor of the highest measured
# point (a log axis then still spreads the points); beyond, it is clipped and its end written.
IDEAL_REACH = 30.0


def measured_range(part: pd.DataFrame) -> tuple[float, float]:
    """The lowest and highest throughput a panel's points and bars reach (positive, for the
    log axis)."""
    bars = throughput_bars(part)
    values = part["samples_per_s"].to_numpy(dtype=float)
    low = values - bars[0]
    high = values + bars[1]
    low = np.where(low > 0, low, values)  # a bar reaching zero has no place on a log axis
    finite = np.isfinite(values) & (values > 0)
    if not finite.any():
        return 1.0, 10.0
    return float(np.nanmin(low[finite])), float(np.nanmax(high[finite]))


def _minor_label(low: float, high: float):
    """Label the minor ticks too when the panel spans less than a decade (else the axis would
    show one number, or none)."""
    few = high / low < 10 * Y_MARGIN**2

    def label(value: float, _: int) -> str:
        return f"{value:,.0f}" if few and f"{value:.0e}"[0] in "1235" else ""

    return label


def _draw_ideal(ax, base: float, max_workers: float, high: float) -> None:
    """The ideal line (single × workers), clipped to the panel; where it leaves the top, its
    value at the most workers is written there, so its slope is still read against the points."""
    workers = np.array([1.0, max_workers])
    ax.plot(workers, workers * base, linestyle="--", color="black", linewidth=1,
            label="ideal (single × workers)")  # fmt: skip
    ideal_end = max_workers * base
    if ideal_end > high * Y_MARGIN:
        ax.annotate(
            f"ideal at {format_level(max_workers)}: {ideal_end:,.0f} ↑",
            xy=(max_workers, high * Y_MARGIN),
            xytext=(-4, -4),
            textcoords="offset points",
            ha="right",
            va="top",
            fontsize=8,
        )


def plot_throughput(table: pd.DataFrame, facets: list[str], fig_dir: Path) -> FigureFile:
    panels = _panels(table, facets)
    fig, axes = plotting.new_figure(len(panels), ncols=min(len(panels), 3))
    for ax, (label, part) in zip(axes, panels, strict=True):
        max_workers = float(part["workers"].max())
        for index, (arch, rows) in enumerate(
            sorted(part.groupby("arch"), key=lambda item: plotting.arch_sort_key(item[0]))
        ):
            rows = rows.sort_values("workers")
            ax.errorbar(
                rows["workers"],
                rows["samples_per_s"],
                yerr=throughput_bars(rows),
                color=plotting.arch_color(arch, index),
                marker=plotting.arch_marker(arch),
                capsize=3,
                label=str(arch),
            )
        low, high = measured_range(part)
        base = part["baseline_samples_per_s"].dropna()
        if len(base):
            ideal_end = max_workers * float(base.iloc[0])
            if ideal_end <= high * IDEAL_REACH:
                high = max(high, ideal_end)  # the whole ideal line fits beside the points
            _draw_ideal(ax, float(base.iloc[0]), max_workers, high)
        ticks = sorted(set(part["workers"].astype(float)) | {1.0})
        # Log-log: ideal scaling is a straight line of slope one, and each doubling of the
        # workers one step to the right.
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.set_xticklabels([format_level(t) for t in ticks])
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.set_xlim(ticks[0] / X_MARGIN, ticks[-1] * X_MARGIN)
        ax.set_xlabel("workers (processes, log scale)")
        ax.set_ylabel("throughput (samples/s, log scale)")
        # A log axis fitted to what was measured: the ideal line grows with the workers and
        # would otherwise set the scale, leaving the measured points flat along the bottom.
        ax.set_yscale("log")
        ax.set_ylim(low / Y_MARGIN, high * Y_MARGIN)
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,.0f}"))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(_minor_label(low, high)))
        plotting.panel_title(ax, label)
    if table["samples_per_s_std"].notna().any():
        plotting.bar_legend_entry(axes[0], "bars: ±1 std over repetitions")
    if table["within_run_low"].notna().any():
        plotting.bar_legend_entry(axes[0], plotting.WITHIN_RUN_BARS)
    return plotting.finish_figure(
        fig,
        axes,
        scaling_headline(table) or "Throughput against workers",
        fig_dir,
        "throughput_scaling",
        "Throughput against workers, with ideal linear scaling",
    )


def plot_efficiency(table: pd.DataFrame, facets: list[str], fig_dir: Path) -> FigureFile:
    data = table[arch_rows.distributed(table) & table["efficiency"].notna()]
    panels = [(label, part[arch_rows.distributed(part)]) for label, part in _panels(data, facets)]
    fig, axes = plotting.new_figure(len(panels), ncols=min(len(panels), 3))
    for ax, (label, part) in zip(axes, panels, strict=True):
        worker_levels = sorted(part["workers"].unique())
        archs = sorted(part["arch"].unique(), key=plotting.arch_sort_key)
        width = 0.8 / max(len(archs), 1)
        for index, arch in enumerate(archs):
            rows = part[part["arch"] == arch].set_index("workers")
            xs, ys, errs = [], [], []
            for position, workers in enumerate(worker_levels):
                if workers in rows.index:
                    xs.append(position + (index - (len(archs) - 1) / 2) * width)
                    ys.append(100 * rows.at[workers, "efficiency"])
                    errs.append(100 * np.nan_to_num(rows.at[workers, "efficiency_std"]))
            ax.bar(
                xs,
                ys,
                width=width,
                yerr=errs,
                capsize=3,
                color=plotting.arch_color(arch, index),
                label=str(arch),
            )
        ax.axhline(100, linestyle="--", color="black", linewidth=1, label="ideal (100%)")
        ax.set_xticks(range(len(worker_levels)))
        ax.set_xticklabels([format_level(w) for w in worker_levels])
        ax.set_xlabel("workers (processes)")
        ax.set_ylabel("scaling efficiency (% of ideal)")
        ax.set_ylim(0, max(110.0, float(np.nanmax(100 * part["efficiency"])) * 1.15))
        plotting.panel_title(ax, label)
    return plotting.finish_figure(
        fig,
        axes,
        efficiency_headline(table) or "Scaling efficiency",
        fig_dir,
        "scaling_efficiency",
        "Scaling efficiency against the single-process baseline",
    )


# --- findings ------------------------------------------------------------------------------


def _facets(table: pd.DataFrame) -> list[str]:
    return [c for c in FACETS if c in table.columns]


def _largest_worker_winners(table: pd.DataFrame) -> list[pd.Series]:
    """Per setting (workload × facets): the fastest distributed entry at the most workers."""
    facets = _facets(table)
    distributed = table[arch_rows.distributed(table) & table["samples_per_s"].notna()]
    winners = []
    for _, part in distributed.groupby(["workload", *facets], dropna=False, sort=True):
        top = part[part["workers"] == part["workers"].max()]
        winners.append(top.loc[top["samples_per_s"].idxmax()])
    return winners


def scaling_headline(table: pd.DataFrame) -> str | None:
    winners = _largest_worker_winners(table)
    if not winners:
        return None
    if len(winners) == 1:
        best = winners[0]
        text = (
            f"At {format_level(best['workers'])} workers {best['arch']} is fastest: "
            f"{num(best['samples_per_s'])} samples/s"
        )
        if not math.isnan(best["speedup"]):
            text += f", {num(best['speedup'])}× single ({pct(best['efficiency'])} efficiency)"
        return text
    archs = pd.Series([w["arch"] for w in winners]).value_counts()
    if len(archs) == 1:
        speedups = [w["speedup"] for w in winners if not math.isnan(w["speedup"])]
        text = f"{archs.index[0]} is fastest at the largest worker count in all {len(winners)} settings"
        if speedups:
            text += f" (up to {num(max(speedups))}× single)"
        return text
    counts = ", ".join(f"{arch} in {n}" for arch, n in archs.items())
    return f"The fastest architecture at the largest worker count depends on the setting: {counts} of {len(winners)}"


def efficiency_headline(table: pd.DataFrame) -> str | None:
    data = table[arch_rows.distributed(table) & table["efficiency"].notna()]
    if data.empty:
        return None
    most = data[data["workers"] == data["workers"].max()]
    best = most.loc[most["efficiency"].idxmax()]
    worst = most.loc[most["efficiency"].idxmin()]
    facets = _facets(table)
    multi = data["workload"].nunique() > 1 or bool(facets)
    where_best = f" ({_setting(best, facets)})" if multi else ""
    where_worst = f" ({_setting(worst, facets)})" if multi else ""
    text = (
        f"Scaling efficiency at {format_level(best['workers'])} workers: "
        f"{best['arch']} {pct(best['efficiency'])}{where_best}"
    )
    if worst.name != best.name:
        text += f" vs {worst['arch']} {pct(worst['efficiency'])}{where_worst}"
    return text


def scaling_findings(table: pd.DataFrame, limit: int = 4) -> list[str]:
    facets = _facets(table)
    sentences = []
    distributed = table[arch_rows.distributed(table) & table["samples_per_s"].notna()]
    for winner in _largest_worker_winners(table)[:limit]:
        same = distributed
        for column in ["workload", *facets]:
            same = same[same[column].map(str) == str(winner[column])]
        same = same[same["workers"] == winner["workers"]].sort_values(
            "samples_per_s", ascending=False
        )
        text = (
            f"{_setting(winner, facets)}, {format_level(winner['workers'])} workers: "
            f"{winner['arch']} is fastest with "
            f"{plus_minus(winner['samples_per_s'], winner['samples_per_s_std'])} samples/s"
        )
        if not math.isnan(winner["speedup"]):
            text += (
                f", {num(winner['speedup'])}× the single-process baseline "
                f"({pct(winner['efficiency'])} scaling efficiency)"
            )
        if len(same) > 1:
            runner = same.iloc[1]
            text += (
                f"; next is {runner['arch']} at "
                f"{num(runner['samples_per_s'] / winner['samples_per_s'])}× its throughput"
            )
        sentences.append(text + ".")
    return sentences


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok.dropna(subset=["samples_per_s", "workers"])
    if ok.empty:
        return section.skip(TITLE, "no successful run recorded its throughput and workers")
    if not arch_rows.distributed(ok).any():
        return section.skip(TITLE, "the study ran only the single-process baseline")
    table = scaling_table(study)
    facets = facet_columns(ok)
    section.tables.append(Table("scaling", "Throughput, speed-up and efficiency", table, COLUMNS))
    section.findings += scaling_findings(table)
    section.figures.append(plot_throughput(table, facets, fig_dir))
    if table["baseline_samples_per_s"].isna().all():
        section.skip(
            "Scaling efficiency", "the study has no successful single-process baseline run"
        )
    elif not (table.loc[arch_rows.distributed(table), "efficiency"].notna()).any():
        section.skip(
            "Scaling efficiency",
            "no distributed configuration has a matching single-process baseline",
        )
    else:
        section.figures.append(plot_efficiency(table, facets, fig_dir))
    return section
