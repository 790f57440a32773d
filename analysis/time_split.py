"""Where the time of a step goes: per configuration, a stacked bar of compute (forward and
backward), communication that compute did not hide, and the rest of the measured median step
(for one process: its update and host time), one panel per workload.

The bars are the report's own choice, `archbench.analysis.timesplit.timesplit_table`: the
fastest configuration of each architecture at each worker count (a bar per link bandwidth and
per communication reduction where the study varied them), means over its repetitions.

    python analysis/time_split.py runs/<study>/ [--out FILE.png]

To adapt: the PARTS lines say which column makes which part of a bar (any time column of the
table, in seconds; e.g. "comm_s" for the whole exchange, hidden or not).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from archbench.analysis import plotting, script
from archbench.analysis.load import load_study
from archbench.analysis.timesplit import bar_label, timesplit_table
from archbench.common.errors import UsageError

PARTS = {  # column -> (legend, colour), bottom to top
    "compute_s": ("compute (forward + backward)", plotting.COMPUTE_COLOR),
    "exposed_comm_s": ("exposed communication (not hidden)", plotting.COMM_COLOR),
    "other_s": ("other (update, host)", "lightgrey"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description="Compute vs exposed communication per step.")
    parser.add_argument("study", type=Path, help="a study folder, runs/<study>/")
    parser.add_argument("--out", type=Path, help="default: <study>/figures/<script>.png")
    args = parser.parse_args()
    study = load_study(args.study)
    if study.ok.empty:
        raise UsageError(f"{args.study}: no finished runs (status ok) in the study")
    if study.ok.dropna(subset=["compute_s", "exposed_comm_s", "workers"]).empty:
        raise UsageError(
            f"{args.study}: needs finished runs that recorded compute and exposed communication "
            "times (timing.compute_s_median, timing.exposed_comm_s)"
        )
    table = timesplit_table(study)
    # one process communicates nothing: the report moves its non-compute time to update_host_s
    table["exposed_comm_s"] = table["exposed_comm_s"].fillna(0.0)
    table["other_s"] = (table["step_s"] - table["compute_s"] - table["exposed_comm_s"]).clip(0)
    table["label"] = [bar_label(row, "link" in table.columns) for _, row in table.iterrows()]
    shown = table[["workload", "label", "config", *PARTS, "step_s", "n"]]
    ms = {c: 1000 * shown[c] for c in [*PARTS, "step_s"]}  # print milliseconds
    shown = shown.assign(label=shown["label"].str.replace("\n", " · "), **ms)
    print(shown.rename(columns=lambda c: c[:-2] + "_ms" if c.endswith("_s") else c).to_csv(
        sep="\t", index=False, float_format="%.3f"), end="")  # fmt: skip
    workloads = sorted(table["workload"].unique())
    widest = table["workload"].value_counts().max()
    fig, axes = plotting.new_figure(
        len(workloads), ncols=1 if widest > 6 else min(len(workloads), 2),
        panel_size=(max(4.6, 0.6 * widest + 1.5), 3.8),
    )  # fmt: skip
    for ax, workload in zip(axes, workloads):
        panel = table[table["workload"] == workload]
        xs, bottom = np.arange(len(panel)), np.zeros(len(panel))
        for column, (legend, color) in PARTS.items():
            heights = 1000 * panel[column].to_numpy()
            ax.bar(xs, heights, bottom=bottom, color=color, edgecolor="white", label=legend)
            bottom += heights
        shares = panel["exposed_comm_s"] / (bottom / 1000)  # on top: the exposed share of a step
        ax.bar_label(ax.containers[-1], [f"{s:.0%}" if s > 0 else "" for s in shares], fontsize=8)
        ax.set_ylim(0, 1.12 * bottom.max())  # room for the labels on top
        plotting.category_labels(ax, list(panel["label"]))
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("time per step (ms)")
        plotting.panel_title(ax, workload)
    plotting.legend_outside(fig, axes)
    plotting.set_title(fig, f"{study.name}: where a step's time goes (%: exposed share)")
    script.save_figure(fig, args.study, __file__, args.out)


if __name__ == "__main__":
    script.run(main, __file__)
