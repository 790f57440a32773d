"""Where the time goes: each step split into compute (forward + backward) and the
communication that compute did not hide, per architecture × workers (× link bandwidth × the
communication reduction, where the study varied them); where that share is largest, how the step
grows on a slower link, and what each reduction (pieces and priority among them) changed in the
exposed communication, are its findings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import arch_rows, plotting
from archbench.analysis.fmt import as_percent, in_ms, num, pct
from archbench.analysis.load import Study, format_level, level_sort_key
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import best_per_group, per_config
from archbench.analysis.tradeoff import reduction_of
from archbench.common.archs import is_baseline

KEY, TITLE = "timesplit", "Where the time goes"
NONE = "none"  # the reduction of a run with none (analysis.tradeoff.describe)

HOW_TO_READ = (
    "Each bar is one step of the fastest configuration of an architecture at a worker count "
    "(and link bandwidth, where the study varied it). The lower part is compute (forward and "
    "backward pass, median step); the upper part is communication that was not hidden behind "
    "compute (step time minus compute time). The percentage above a bar is that exposed "
    "communication's share of the step; the error bar is one standard deviation of the "
    "step over repetitions; the black mark is the measured median step time. Where the study "
    "varied a communication reduction (compression, --sync-every, pieces and priority, sparse "
    "rows, partitioning), each reduction has its own bar, so the same settings are compared; "
    "the dotted box inside a p2p bar cut into pieces (--partition-mb, --priority on) is the "
    "part of its exchange during which fresh pieces went back while gradient pieces were still "
    "arriving (measured): the overlap the pieces gained."
)
COLUMNS = [
    Column("workload", "workload"),
    Column("arch", "arch"),
    Column("workers", "workers"),
    Column("link", "link"),
    Column("reduction", "reduction"),
    Column("compute_s", "compute (ms)", in_ms),
    Column("exposed_comm_s", "exposed comm. (ms)", in_ms),
    Column("update_host_s", "update and host, one process (ms)", in_ms),
    Column("comm_s", "exchange (ms)", in_ms),
    Column("comm_share", "exposed share of step", as_percent),
    Column("hidden_share", "exchange hidden by overlap", as_percent),
    Column("pipelined_s", "p2p pieces pipelined (ms)", in_ms),
    Column("n", "reps"),
]


def split_columns(ok: pd.DataFrame) -> list[str]:
    columns = ["workload", "arch", "workers"]
    distributed = ok[arch_rows.distributed(ok)]
    if distributed["link"].map(str).nunique() > 1:
        columns.append("link")
    if ok["reduction"].nunique() > 1:  # compare like with like: a bar per reduction
        columns.append("reduction")
    return columns


def timesplit_table(study: Study) -> pd.DataFrame:
    ok = study.ok.dropna(subset=["compute_s", "exposed_comm_s", "workers"]).copy()
    ok["reduction"] = reduction_of(ok)
    keys = split_columns(ok)
    ok["split_step_s"] = ok["compute_s"] + ok["exposed_comm_s"]
    # The same choice as the throughput figure: the fastest configuration of each group.
    if ok["samples_per_s"].notna().all():
        best = best_per_group(per_config(ok, keys, "samples_per_s"), keys, higher_is_better=True)
    else:
        best = best_per_group(per_config(ok, keys, "split_step_s"), keys, higher_is_better=False)
    rows = []
    for _, choice in best.iterrows():
        mask = ok["config"] == choice["config"]
        for column in keys:
            mask &= ok[column].map(str) == str(choice[column])
        runs = ok[mask]
        sources = set(runs["exposed_from"].dropna())
        row = {column: choice[column] for column in keys}
        row.update(
            config=choice["config"],
            n=len(runs),
            compute_s=runs["compute_s"].mean(),
            exposed_comm_s=runs["exposed_comm_s"].mean(),
            comm_s=runs["comm_s"].mean(),
            step_s=runs["step_s"].mean(),
            pipelined_s=runs["pipelined_s"].mean(),
            split_step_std=runs["split_step_s"].std(),
            exposed_from=sources.pop() if len(sources) == 1 else "mixed",
        )
        total = row["compute_s"] + row["exposed_comm_s"]
        row["comm_share"] = row["exposed_comm_s"] / total if total > 0 else np.nan
        # one process communicates nothing: its step beyond compute is the optimizer's update
        # and the host's own time, named so rather than as exposed communication
        row["update_host_s"] = np.nan
        if is_baseline(row["arch"]):
            row["update_host_s"] = row["exposed_comm_s"]
            row["exposed_comm_s"] = row["comm_share"] = np.nan
        row["hidden_share"] = (
            1 - row["exposed_comm_s"] / row["comm_s"]
            if row["exposed_from"] == "exposed_comm_s"
            and row["comm_s"] > 0
            and not is_baseline(row["arch"])
            else np.nan
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    order = [tuple(_sort_key(c, r[c]) for c in keys) for _, r in table.iterrows()]
    table = table.iloc[sorted(range(len(table)), key=lambda i: order[i])]
    return table.reset_index(drop=True)


def _sort_key(column: str, level: object) -> object:
    if column == "arch":
        return plotting.arch_sort_key(level)
    if column == "reduction":  # no reduction first, then the others
        return (level != NONE, str(level))
    return level_sort_key(level)


def bar_label(row: pd.Series, with_link: bool) -> str:
    label = f"{row['arch']}\n{format_level(row['workers'])} w"
    if with_link and not is_baseline(row["arch"]):  # one process: no link to cross
        label += f" · {format_level(row['link'])}"
    if "reduction" in row.index and row["reduction"] != NONE:
        label += "\n" + str(row["reduction"]).replace(", ", "\n")
    return label


def plot_timesplit(table: pd.DataFrame, fig_dir: Path) -> FigureFile:
    workloads = sorted(table["workload"].unique())
    with_link = "link" in table.columns
    widest = max(len(table[table["workload"] == w]) for w in workloads)
    panel_width = max(6.5 if len(workloads) == 1 else 4.6, 0.55 * widest + 1.5)
    ncols = 1 if panel_width > 7 else min(len(workloads), 2)
    fig, axes = plotting.new_figure(len(workloads), ncols=ncols, panel_size=(panel_width, 3.8))
    fallback = (table["exposed_from"] != "exposed_comm_s").any()
    comm_label = (
        "communication (exchange time; overlap not measured)"
        if fallback
        else "communication not hidden by compute"
    )
    for ax, workload in zip(axes, workloads, strict=True):
        part = table[table["workload"] == workload].reset_index(drop=True)
        xs = np.arange(len(part))
        compute_ms = 1000 * part["compute_s"]
        update_ms = 1000 * part["update_host_s"]
        comm_ms = (1000 * part["exposed_comm_s"]).fillna(0.0)
        ax.bar(xs, compute_ms, color=plotting.COMPUTE_COLOR, label="compute (forward + backward)")
        ax.bar(
            xs,
            comm_ms,
            bottom=compute_ms,
            color=plotting.COMM_COLOR,
            hatch="//",
            edgecolor="white",
            label=comm_label,
        )
        alone = update_ms.notna().to_numpy()
        if alone.any():
            ax.bar(
                xs[alone],
                update_ms[alone],
                bottom=compute_ms[alone],
                color="lightgrey",
                edgecolor="white",
                label="update and host time (one process, no communication)",
            )
        comm_ms = comm_ms + update_ms.fillna(0.0)  # the bar's top, for the marks above it
        # p2p pieces: the measured stretch of the exchange in which its two phases overlapped
        pipelined_ms = np.fmin(1000 * part["pipelined_s"].fillna(0.0), comm_ms)
        overlapped = (pipelined_ms > 0).to_numpy()
        if overlapped.any():
            ax.bar(
                xs[overlapped],
                pipelined_ms[overlapped],
                bottom=compute_ms[overlapped],
                width=0.5,
                fill=False,
                edgecolor="black",
                linestyle=":",
                linewidth=1.2,
                label="of it, both phases at once (p2p pieces, measured)",
            )
        total = compute_ms + comm_ms
        spread = 1000 * part["split_step_std"].fillna(0.0)
        ax.errorbar(xs, total, yerr=spread, fmt="none", ecolor="black", capsize=3)
        # The measured median step, to show where compute + exposed communication misses it.
        ax.scatter(
            xs,
            1000 * part["step_s"],
            marker="_",
            s=400,
            linewidths=2,
            color="black",
            zorder=3,
            label="measured median step",
        )
        top = float(
            np.nanmax(
                np.r_[total + 1000 * part["split_step_std"].fillna(0.0), 1000 * part["step_s"]]
            )
        )
        if len(part) <= 16:
            # Above the error bar and the step mark, so the label never sits on either.
            label_at = np.fmax(total + spread, 1000 * part["step_s"].fillna(0.0))
            for x, height, share in zip(xs, label_at, part["comm_share"], strict=True):
                if not np.isnan(share):
                    ax.annotate(
                        f"{100 * share:.0f}%",
                        (x, height),
                        xytext=(0, 5),
                        textcoords="offset points",
                        ha="center",
                        fontsize=8,
                    )
        # Separate architectures with a faint line so the groups read at a glance.
        for x in range(1, len(part)):
            if part.at[x, "arch"] != part.at[x - 1, "arch"]:
                ax.axvline(x - 0.5, color="grey", linewidth=0.6, alpha=0.5)
        plotting.category_labels(ax, [bar_label(r, with_link) for _, r in part.iterrows()])
        ax.set_ylim(0, top * 1.2 if top > 0 else 1)
        ax.set_ylabel("time per step (ms)")
        ax.set_xlabel("architecture and workers" + (" · link bandwidth" if with_link else ""))
        ax.grid(axis="x", visible=False)
        plotting.panel_title(ax, str(workload))
    return plotting.finish_figure(
        fig,
        axes,
        timesplit_headline(table) or "Compute and communication",
        fig_dir,
        "time_split",
        "Where the time of a step goes",
    )


# --- findings ------------------------------------------------------------------------------


def timesplit_headline(table: pd.DataFrame) -> str | None:
    data = table[arch_rows.distributed(table) & table["comm_share"].notna()]
    if data.empty:
        return None
    most = data.loc[data["comm_share"].idxmax()]
    least = data.loc[data["comm_share"].idxmin()]
    text = (
        f"Communication not hidden by compute is {pct(most['comm_share'])} of the step for "
        f"{_where(most)}"
    )
    if least.name != most.name:
        text += f", {pct(least['comm_share'])} for {_where(least)}"
    return text


def _where(row: pd.Series) -> str:
    text = f"{row['arch']} at {format_level(row['workers'])} workers"
    if "link" in row.index and row["link"] is not None and str(row["link"]) != "nan":
        text += f" on {format_level(row['link'])}"
    return text


def timesplit_findings(table: pd.DataFrame) -> list[str]:
    headline = timesplit_headline(table)
    if headline is None:
        return []
    data = table[arch_rows.distributed(table) & table["comm_share"].notna()]
    most = data.loc[data["comm_share"].idxmax()]
    text = (
        f"{headline} ({most['workload']}): {num(1000 * most['exposed_comm_s'])} ms exposed "
        f"communication beside {num(1000 * most['compute_s'])} ms compute "
        f"(measured median step {num(1000 * most['step_s'])} ms)."
    )
    if most["compute_s"] > 1.5 * most["step_s"]:
        text += (
            " The split is unreliable there: the compute measured on probe steps exceeds the "
            "median step."
        )
    if "link" in data.columns and data["link"].map(str).nunique() > 1:
        text += " " + _link_sentence(data)
    return [text, *_reduction_sentences(data)]


def _reduction_sentences(data: pd.DataFrame) -> list[str]:
    """Per architecture (and workload, workers, link), each reduction's exposed communication
    beside the unreduced exchange's, with what p2p measured of its pieces' overlap."""
    if "reduction" not in data.columns:
        return []
    others = [c for c in ("workload", "arch", "workers", "link") if c in data.columns]
    sentences = []
    for _, rows in data.groupby(others, sort=False):
        whole = rows[rows["reduction"] == NONE]
        variants = rows[rows["reduction"] != NONE]
        if whole.empty or variants.empty:
            continue
        reference = whole.iloc[0]
        parts = []
        for _, row in variants.iterrows():
            part = f"{row['reduction']} {num(1000 * row['exposed_comm_s'])} ms"
            if row["pipelined_s"] > 0:
                part += f" ({num(1000 * row['pipelined_s'])} ms of it with both phases at once)"
            parts.append(part)
        sentences.append(
            f"{_where(reference)} ({reference['workload']}): exposed communication "
            f"{num(1000 * reference['exposed_comm_s'])} ms with no reduction; "
            + "; ".join(parts)
            + "."
        )
    return sentences


def _link_sentence(data: pd.DataFrame) -> str:
    """How much the step grows from the fastest to the slowest link, per architecture."""
    parts = []
    for arch, rows in data.groupby("arch"):
        links = sorted(rows["link"].unique(), key=level_sort_key)
        if len(links) < 2:
            continue
        step = rows["compute_s"] + rows["exposed_comm_s"]
        slow = step[rows["link"] == links[0]].mean()
        fast = step[rows["link"] == links[-1]].mean()
        if fast > 0:
            parts.append(f"{arch} {num(slow / fast)}×")
    if not parts:
        return ""
    return "Going from the fastest to the slowest link lengthens the mean step by: " + (
        ", ".join(parts) + "."
    )


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok.dropna(subset=["compute_s", "exposed_comm_s", "workers"])
    if ok.empty:
        return section.skip(
            "Compute vs communication",
            "no successful run recorded both compute and communication times",
        )
    table = timesplit_table(study)
    columns = [  # p2p's pieces are the only runs that measure their overlap
        c for c in COLUMNS if c.name != "pipelined_s" or table["pipelined_s"].notna().any()
    ]
    section.tables.append(Table("timesplit", "Compute and communication per step", table, columns))
    section.findings += timesplit_findings(table)
    if (table["exposed_from"] != "exposed_comm_s").any():
        section.notes.append(
            "Some records lack `timing.exposed_comm_s` (older schema): for them the whole "
            "exchange time `timing.comm_s_median` is drawn, which overstates communication "
            "when it overlaps compute."
        )
    inconsistent = table[table["compute_s"] > 1.5 * table["step_s"]]
    if len(inconsistent):
        names = ", ".join(
            f"{r['arch']} ({format_level(r['workers'])} workers, {r['workload']})"
            for _, r in inconsistent.iterrows()
        )
        section.notes.append(
            "The compute time measured on probe steps exceeds the median step by more than "
            f"half for {names}: those probes were slower than ordinary steps (e.g. they include "
            "warm-up), so the split is uncertain there; compare the bars with the measured "
            "median step (black mark)."
        )
    section.figures.append(plot_timesplit(table, fig_dir))
    return section
