"""Parameter-server placement: throughput of each placement (dedicated PS host, PS co-located
with a worker, every process on one host) per worker count, one panel per workload.

A bar is the mean samples/s of the fastest PS configuration with that placement and worker
count, at one sync mode (the one most PS runs used: async is faster for a reason of its own);
its error bar is the 95% confidence interval of that mean over the repetitions.

    python analysis/ps_placement.py runs/<study>/ [--out FILE.png]

To adapt: another metric is the METRIC line (any number column of `load_study(...).ok`, e.g.
"exposed_comm_s" with its LABEL and HIGHER_IS_BETTER = False); the other sync mode is the
`mode` line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from matplotlib import ticker

from archbench.analysis import arch_rows, plotting, script
from archbench.analysis.fmt import placement_label
from archbench.analysis.load import load_study
from archbench.analysis.stats import best_per_group, mean_ci_halfwidth, per_config
from archbench.common.errors import UsageError

METRIC, LABEL, HIGHER_IS_BETTER = "samples_per_s", "throughput (samples/s)", True
PLACEMENTS = ("dedicated", "colocated", "one-host")  # as records spell them, in drawing order


def main() -> None:
    parser = argparse.ArgumentParser(description="PS placement throughput per worker count.")
    parser.add_argument("study", type=Path, help="a study folder, runs/<study>/")
    parser.add_argument("--out", type=Path, help="default: <study>/figures/<script>.png")
    args = parser.parse_args()
    study = load_study(args.study)
    if study.ok.empty:
        raise UsageError(f"{args.study}: no finished runs (status ok) in the study")
    ps = study.ok[arch_rows.with_servers(study.ok) & study.ok["placement"].isin(PLACEMENTS)]
    ps = ps.dropna(subset=[METRIC, "workers"])
    modes = ps["sync_mode"].dropna()
    mode = modes.mode().iat[0] if len(modes) else None
    ps = ps[ps["sync_mode"] == mode] if mode else ps
    keys = ["workload", "workers", "placement"]
    bars = best_per_group(per_config(ps, keys, METRIC), keys, HIGHER_IS_BETTER)
    bars["ci95"] = [mean_ci_halfwidth(s, n) for s, n in zip(bars["std"], bars["n"])]
    placed = bars.groupby("workload")["placement"].nunique()
    workloads = sorted(placed[placed >= 2].index)  # one placement alone compares nothing
    if not workloads:
        found = ", ".join(sorted(map(placement_label, set(ps["placement"])))) or "none"
        raise UsageError(
            f"{args.study}: needs PS runs with at least two placements of one workload "
            f"(found: {found})"
        )
    for workload in sorted(set(placed.index) - set(workloads)):
        print(f"# {workload}: PS runs of one placement only, not drawn")
    bars = bars[bars["workload"].isin(workloads)]
    bars = bars.sort_values(
        keys, key=lambda c: c.map(PLACEMENTS.index) if c.name == "placement" else c
    )
    shown = bars.rename(columns={"mean": METRIC, "n": "reps"}).assign(sync_mode=mode)
    print(shown.to_csv(sep="\t", index=False, float_format="%.1f"), end="")
    fig, axes = plotting.new_figure(len(workloads), ncols=min(len(workloads), 3))
    width = 0.8 / len(PLACEMENTS)
    for ax, workload in zip(axes, workloads):
        panel = bars[bars["workload"] == workload]
        levels = sorted(panel["workers"].unique())
        for index, placement in enumerate(PLACEMENTS):
            group = panel[panel["placement"] == placement]
            xs = [levels.index(w) + (index - 1) * width for w in group["workers"]]
            ax.bar(xs, group["mean"], width, yerr=group["ci95"].fillna(0), capsize=4,
                   color=plotting.series_color(index), label=placement_label(placement))  # fmt: skip
        ax.set_xticks(range(len(levels)), [f"{w:g}" for w in levels])
        ax.grid(axis="x", visible=False)
        ax.set_axisbelow(True)
        ax.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
        ax.set_xlabel("workers")
        ax.set_ylabel(f"{LABEL}, mean ± 95% CI")
        plotting.panel_title(ax, workload)
    plotting.legend_outside(fig, axes)
    plotting.set_title(fig, f"{study.name}: PS placement" + (f" ({mode} PS)" if mode else ""))
    script.save_figure(fig, args.study, __file__, args.out)


if __name__ == "__main__":
    script.run(main, __file__)
