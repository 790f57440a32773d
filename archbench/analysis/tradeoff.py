"""Speed against accuracy: what each communication reduction (gradient compression, local SGD's
`--sync-every H`, tensor partitioning and priority, sparse rows and the partitioning of data
among workers and of rows among servers) buys in bytes and time, and what it costs in accuracy,
per configuration beside the uncompressed, synchronous, uncut, dense one of the same
architecture. A regression workload (`--loss mse`) pays in test RMSE instead (lower is better)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from archbench.analysis import plotting
from archbench.analysis.fmt import as_percent, as_signed, as_times, in_ms, num, pct
from archbench.analysis.load import Study
from archbench.analysis.quality import ACCURACY, RMSE, Metric, metric_of
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import mean_ci_halfwidth, ratio_of_means
from archbench.common.archs import is_baseline
from archbench.runtime.settings import SETTINGS

# "costs at most one point of accuracy" (with room for the rounding of a difference of means)
ONE_POINT = 0.01 + 1e-9
# a regression's equivalent: "costs at most 1% of the reference's test RMSE"
ONE_PERCENT = 0.01 + 1e-9
KEY, TITLE = "speed_accuracy", "Speed against accuracy: communication reductions"

HOW_TO_READ = (
    "One row per configuration: its communication reduction (compression method, H of "
    "--sync-every, partition size and priority, sparse rows, the data partition among workers "
    "and the placement of rows on the servers), the bytes each worker sends per step, the time "
    "per epoch, the step time, the time to the target accuracy and the final test accuracy, "
    "means over repetitions with the half-width of their 95% confidence interval (Student t; "
    "n/a with one repetition). With H > 1 the step column is the amortized step "
    "(timing.step_s_amortized: each kind of step's median weighed by how often it ran), not the "
    "median step, which would be a local step's. 'vs reference' compares with the same "
    "architecture's uncompressed, synchronous, uncut, dense configuration of the same workload, "
    "on the global shuffle, with the same other settings (bytes: "
    "how many times fewer; epoch: speed-up, >1 faster, with a bootstrap 95% interval; accuracy: "
    "the difference in points). Exposed communication is the step minus compute; for p2p in "
    "pieces (--partition-mb, --priority on) the record's measured overlap: how long fresh "
    "pieces went back while gradient pieces were still arriving, and how much earlier the first "
    "layer's parameters were complete than the whole exchange (what a per-layer forward pass "
    "could start on; archbench's does not). Partitioning (s) is the time the data and row "
    "partitioning took before training, beside the time per epoch it saves. In the figure, up "
    "and to the left is better."
)
HOW_TO_READ_RMSE = (
    " A regression workload (--loss mse) shows its final test RMSE instead of an accuracy "
    "(lower is better; vs reference: the difference), and its figure panel is better down and "
    "to the left."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("arch", "arch"),
    Column("config", "configuration"),
    Column("reduction", "reduction"),
    Column("n", "reps"),
    Column("bytes_per_step", "bytes sent per step", num),
    Column("bytes_fewer", "bytes vs reference", as_times),
    Column("epoch_s", "time per epoch (s)"),
    Column("epoch_s_ci", "± 95% CI"),
    Column("speedup", "epoch vs reference", as_times),
    Column("speedup_ci", "95% CI"),
    Column("step_s", "step (s; amortized when H > 1)"),
    Column("exposed_comm_s", "exposed comm. (ms)", in_ms),
    Column("pipelined_s", "p2p pieces pipelined (ms)", in_ms),
    Column("first_layer_lead_s", "p2p first layer ahead (ms)", in_ms),
    Column("partition_s", "partitioning (s)"),
    Column("reached", "reps reaching target"),
    Column("time_to_target_s", "time to target (s)"),
    Column("time_to_target_ci", "± 95% CI"),
    Column("final_accuracy", "final accuracy", as_percent),
    Column("final_accuracy_ci", "± 95% CI (points)", lambda v: num(100 * v, 2)),
    Column("accuracy_delta", "accuracy vs reference (points)", lambda v: num(100 * v, 2)),
    Column("final_rmse", "final test RMSE (lower is better)", RMSE.cell),
    Column("final_rmse_ci", "± 95% CI"),
    Column("rmse_delta", "test RMSE vs reference", as_signed),
]


# the settings a reduction is made of; a configuration's other settings (its context: workers,
# bandwidth, vocabulary, ...) must match its reference's
REDUCTION_SETTINGS = (
    "compression", "sync_every", "partition_mb", "priority", "sparse_exchange",
    "data_partition", "param_partition",
)  # fmt: skip


def context(config: str) -> str:
    """A configuration's label without its reduction settings: what its reference shares."""
    return " ".join(
        part for part in str(config).split() if part.split("=", 1)[0] not in REDUCTION_SETTINGS
    )


def _levels(runs: pd.DataFrame) -> dict[str, object]:
    """A configuration's reduction settings (older records: the neutral values)."""

    def first(column: str, neutral: object) -> object:
        values = runs[column].dropna() if column in runs else pd.Series(dtype=object)
        return values.iloc[0] if len(values) else neutral

    return {
        "compression": first("compression", "none"),
        "sync_every": int(first("sync_every", 1)),
        "partition_mb": first("partition_mb", math.nan),
        "priority": first("priority", "off"),
        "sparse_exchange": first("sparse_exchange", "dense"),
        "data_partition": first("data_partition", "random"),
        "param_partition": first("param_partition", "range"),
    }


def is_reference(levels: dict[str, object]) -> bool:
    """No reduction: uncompressed, synchronous every step, uncut, no priority."""
    partition = levels["partition_mb"]
    return (
        levels["compression"] == "none"
        and levels["sync_every"] == 1
        and (partition is None or (isinstance(partition, float) and math.isnan(partition)))
        and levels["priority"] == "off"
        and levels["sparse_exchange"] == "dense"
        and levels["data_partition"] == "random"
        and levels["param_partition"] == "range"
    )


def describe(levels: dict[str, object]) -> str:
    """The reduction in words: 'none' for the reference."""
    parts = []
    if levels["compression"] != "none":
        parts.append(str(levels["compression"]))
    if levels["sync_every"] != 1:
        parts.append(f"H={levels['sync_every']}")
    partition = levels["partition_mb"]
    if isinstance(partition, int | float) and not math.isnan(partition):
        parts.append(f"pieces ≤ {partition:g} MB")
    if levels["priority"] == "on":
        parts.append("priority")
    if levels["sparse_exchange"] == "sparse":
        parts.append("sparse rows")
    if levels["data_partition"] != "random":
        parts.append(f"data {levels['data_partition']}")
    if levels["param_partition"] != "range":
        parts.append(f"rows {levels['param_partition']}")
    return ", ".join(parts) or "none"


def reduction_of(runs: pd.DataFrame) -> pd.Series:
    """Each run's communication reduction in words ('none' for none)."""
    return pd.Series(
        [describe(_levels(runs.loc[[index]])) for index in runs.index],
        index=runs.index,
        dtype=object,
    )


def _mean_ci(values: pd.Series) -> tuple[float, float]:
    values = values.dropna()
    if values.empty:
        return math.nan, math.nan
    return float(values.mean()), mean_ci_halfwidth(float(values.std()), float(len(values)))


def _partition_seconds(runs: pd.DataFrame) -> float:
    """Mean time the data and row partitioning took (nan where neither ran: a run at the
    setting's default, the global shuffle or the range of rows, partitions nothing, and its
    record's microseconds would only fill the column)."""
    parts = []
    for setting in ("data_partition", "param_partition"):
        column = f"{setting}_s"
        if column in runs and setting in runs:
            ran = runs[setting].notna() & (runs[setting] != SETTINGS[setting].default)
            parts.append(runs[column].where(ran))
    if not parts:
        return math.nan
    total = pd.concat(parts, axis=1)
    timed = total.notna().any(axis=1)
    return float(total[timed].fillna(0).sum(axis=1).mean()) if timed.any() else math.nan


def tradeoff_table(study: Study) -> pd.DataFrame:
    """Per workload × arch × configuration: bytes, times and accuracy with their intervals, and
    the comparison with the architecture's reference configuration where the study has one."""
    ok = study.ok
    rows = []
    metrics = {workload: metric_of(runs) for workload, runs in ok.groupby("workload")}
    for (workload, arch, config), runs in ok.groupby(["workload", "arch", "config"], sort=True):
        levels = _levels(runs)
        metric = metrics[workload]
        epoch, epoch_ci = _mean_ci(runs["epoch_s"])
        target, target_ci = _mean_ci(runs["time_to_target_s"])
        accuracy, accuracy_ci = _mean_ci(runs["test_accuracy"])
        rmse, rmse_ci = _mean_ci(runs["test_rmse"])
        rows.append(
            {
                "workload": workload,
                "arch": arch,
                "config": config,
                "metric": metric.key,
                "reduction": describe(levels),
                "reference": is_reference(levels),
                "n": len(runs),
                "bytes_per_step": runs["bytes_per_step"].mean(),
                "epoch_s": epoch,
                "epoch_s_ci": epoch_ci,
                # amortized (the median step when H = 1; an older record's, from migrate_to_3)
                "step_s": runs["step_s_amortized"].mean(),
                # one process exchanges nothing: its step beyond compute is not communication
                "exposed_comm_s": math.nan if is_baseline(arch) else runs["exposed_comm_s"].mean(),
                "pipelined_s": runs["pipelined_s"].mean(),
                "first_layer_lead_s": runs["first_layer_lead_s"].mean(),
                "partition_s": _partition_seconds(runs),
                # no target RMSE: a regression has nothing to reach
                "reached": int(runs["time_to_target_s"].notna().sum())
                if metric is ACCURACY
                else math.nan,
                "time_to_target_s": target,
                "time_to_target_ci": target_ci,
                "final_accuracy": accuracy,
                "final_accuracy_ci": accuracy_ci,
                "final_rmse": rmse,
                "final_rmse_ci": rmse_ci,
                "_epochs": runs["epoch_s"].tolist(),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    for column in ("bytes_fewer", "speedup", "speedup_ci", "accuracy_delta", "rmse_delta"):
        table[column] = math.nan if column != "speedup_ci" else "n/a"
    table["_context"] = table["config"].map(context)
    for (_, _, _), group in table.groupby(["workload", "arch", "_context"], sort=False):
        references = group[group["reference"]]
        if references.empty:
            continue
        reference = references.iloc[0]
        for index, row in group.iterrows():
            if row["bytes_per_step"] > 0:
                table.at[index, "bytes_fewer"] = reference["bytes_per_step"] / row["bytes_per_step"]
            ratio = ratio_of_means(reference["_epochs"], row["_epochs"])
            table.at[index, "speedup"] = ratio["ratio"]
            if not math.isnan(ratio["ci_low"]):
                table.at[index, "speedup_ci"] = f"{num(ratio['ci_low'])}–{num(ratio['ci_high'])}"
            table.at[index, "accuracy_delta"] = row["final_accuracy"] - reference["final_accuracy"]
            table.at[index, "rmse_delta"] = row["final_rmse"] - reference["final_rmse"]
    order = sorted(
        range(len(table)),
        key=lambda i: (
            table.at[i, "workload"],
            plotting.arch_sort_key(table.at[i, "arch"]),
            not table.at[i, "reference"],
            table.at[i, "config"],
        ),
    )
    return table.iloc[order].drop(columns=["_epochs", "_context"]).reset_index(drop=True)


def _final(metric: Metric) -> str:
    """The table column of a metric's final value."""
    return "final_accuracy" if metric is ACCURACY else "final_rmse"


def plot_tradeoff(table: pd.DataFrame, fig_dir: Path) -> FigureFile | None:
    # each row by its workload's metric: accuracy, or a regression's test RMSE
    scored = table.apply(
        lambda row: row["final_rmse"] if row["metric"] == RMSE.key else row["final_accuracy"],
        axis=1,
    )
    data = table[table["epoch_s"].notna() & scored.notna()]
    if data.empty:
        return None
    workloads = sorted(data["workload"].unique())
    fig, axes = plotting.new_figure(len(workloads), ncols=min(len(workloads), 2))
    for ax, workload in zip(axes, workloads, strict=True):
        rows = data[data["workload"] == workload]
        metric = RMSE if (rows["metric"] == RMSE.key).all() else ACCURACY
        final = _final(metric)
        for index, (arch, group) in enumerate(rows.groupby("arch", sort=False)):
            ax.errorbar(
                group["epoch_s"],
                metric.scale * group[final],
                xerr=group["epoch_s_ci"].fillna(0),
                yerr=metric.scale * group[f"{final}_ci"].fillna(0),
                color=plotting.arch_color(arch, index),
                marker=plotting.arch_marker(arch),
                linestyle="none",
                capsize=2,
                label=str(arch),
            )
            for _, row in group.iterrows():
                ax.annotate(
                    row["reduction"],
                    (row["epoch_s"], metric.scale * row[final]),
                    textcoords="offset points",
                    xytext=(4, 3),
                    fontsize=7,
                )
        ax.set_xlabel("time per epoch (s)")
        ax.set_ylabel(f"final {metric.axis_label}")
        if len(workloads) > 1:
            plotting.panel_title(ax, str(workload))
    what = _quality_name(table)
    return plotting.finish_figure(
        fig,
        axes,
        tradeoff_headline(table) or f"Time per epoch against final {what}",
        fig_dir,
        "speed_accuracy",
        f"Time per epoch against final {what} per communication reduction "
        "(bars: 95% confidence intervals over repetitions)",
    )


def _quality_name(table: pd.DataFrame) -> str:
    keys = set(table["metric"])
    if keys == {RMSE.key}:
        return f"{RMSE.name} ({RMSE.better})"
    if RMSE.key in keys:
        return "test accuracy or RMSE"
    return ACCURACY.name


def _costs_little(row: pd.Series) -> bool:
    """At most one point of accuracy lost (a regression: at most 1% more test RMSE than its
    reference's)."""
    if row["metric"] == RMSE.key:
        reference = row["final_rmse"] - row["rmse_delta"]
        return bool(row["rmse_delta"] <= ONE_PERCENT * reference)
    return bool(row["accuracy_delta"] >= -ONE_POINT)


def _fastest_cheap(table: pd.DataFrame) -> pd.Series | None:
    """The fastest reduction that costs little (`_costs_little`), or None."""
    compared = table[~table["reference"] & table["speedup"].notna()]
    kept = compared[compared.apply(_costs_little, axis=1)] if len(compared) else compared
    return kept.loc[kept["speedup"].idxmax()] if len(kept) else None


def tradeoff_headline(table: pd.DataFrame) -> str | None:
    """The fastest reduction that costs at most one point of accuracy (or 1% of a regression's
    test RMSE), per architecture."""
    compared = table[~table["reference"] & table["speedup"].notna()]
    if compared.empty:
        return None
    best = _fastest_cheap(table)
    if best is None:
        if (compared["metric"] == RMSE.key).any():
            return (
                "Every communication reduction lost more than one point of accuracy or added "
                "more than 1% to the test RMSE"
            )
        return "Every communication reduction lost more than one point of accuracy"
    cost = (
        f"test RMSE {as_signed(best['rmse_delta'])} (lower is better)"
        if best["metric"] == RMSE.key
        else f"accuracy {num(100 * best['accuracy_delta'], 2)} points"
    )
    return (
        f"{best['arch']} {best['reduction']}: {as_times(best['speedup'])} faster per epoch "
        f"than uncompressed, {cost}"
    )


def tradeoff_findings(table: pd.DataFrame) -> list[str]:
    sentences = []
    headline = tradeoff_headline(table)
    if headline and headline.startswith("Every"):
        sentences.append(headline + ".")
    elif headline:
        best = _fastest_cheap(table)
        limit = (
            "1% of test RMSE" if best is not None and best["metric"] == RMSE.key else "one point"
        )
        sentences.append(headline + f" (the fastest that costs at most {limit}).")
    compared = table[~table["reference"] & table["speedup"].notna()]
    slower = compared[compared["speedup"] < 1]
    if len(slower):
        names = ", ".join(f"{r['arch']} {r['reduction']}" for _, r in slower.iterrows())
        sentences.append(f"Slower per epoch than no reduction: {names}.")
    return sentences


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok
    if ok.empty:
        return section.skip(TITLE, "no successful run")
    table = tradeoff_table(study)
    if table.empty or table["reference"].all():
        return section.skip(
            TITLE,
            "no run used a communication reduction (compression, --sync-every, partitioning, "
            "sparse rows)",
        )
    section.tables.append(Table("speed_accuracy", TITLE, table, COLUMNS))
    if (table["metric"] == RMSE.key).any():
        section.how_to_read += HOW_TO_READ_RMSE
    section.findings += tradeoff_findings(table)
    if not table["reference"].any():
        section.notes.append(
            "No configuration without a reduction was run, so nothing is compared with one."
        )
    classified = table[table["metric"] == ACCURACY.key]  # a regression has no target
    missing = classified[classified["time_to_target_s"].isna()]
    if len(missing) and len(missing) < len(classified):
        section.notes.append(
            f"{len(missing)} configuration(s) never reached the target accuracy (time to target "
            f"n/a); reached in {pct(1 - len(missing) / len(classified))} of configurations."
        )
    figure = plot_tradeoff(table, fig_dir)
    if figure is None:
        section.skip(
            "Speed against accuracy figure",
            "no run recorded a time per epoch and a test accuracy or RMSE",
        )
    else:
        section.figures.append(figure)
    return section
