"""Throughput against workers: one panel per workload, one line per architecture.

A point is the mean samples/s (all workers together) of the fastest configuration of an
architecture at that worker count, its bar the 95% confidence interval of that mean over the
repetitions (none with one repetition). The dashed line is the fastest single-process run, the
baseline every architecture has to beat; the shaded band around it is its 95% interval.

    python analysis/throughput_vs_workers.py runs/<study>/ [--out FILE.png]

To adapt: another metric is the METRIC line (any number column of `load_study(...).ok`, e.g.
"step_s" with its LABEL and HIGHER_IS_BETTER = False); the points come from archbench.analysis.stats.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from matplotlib import ticker

from archbench.analysis import arch_rows, plotting, script
from archbench.analysis.load import load_study
from archbench.analysis.stats import best_per_group, mean_ci_halfwidth, per_config
from archbench.common.archs import sort_key
from archbench.common.errors import UsageError

METRIC, LABEL, HIGHER_IS_BETTER = "samples_per_s", "throughput (samples/s)", True


def main() -> None:
    parser = argparse.ArgumentParser(description="Throughput against workers, per workload.")
    parser.add_argument("study", type=Path, help="a study folder, runs/<study>/")
    parser.add_argument("--out", type=Path, help="default: <study>/figures/<script>.png")
    args = parser.parse_args()
    study = load_study(args.study)
    if study.ok.empty:
        raise UsageError(f"{args.study}: no finished runs (status ok) in the study")
    runs = study.ok.dropna(subset=[METRIC, "workers"])
    if not arch_rows.distributed(runs).any():
        raise UsageError(f"{args.study}: needs finished runs of a multi-process architecture")
    keys = ["workload", "arch", "workers"]
    points = best_per_group(per_config(runs, keys, METRIC), keys, HIGHER_IS_BETTER)
    points["ci95"] = [mean_ci_halfwidth(s, n) for s, n in zip(points["std"], points["n"])]
    points = points.sort_values(keys, key=lambda c: c.map(sort_key) if c.name == "arch" else c)
    shown = points.rename(columns={"mean": METRIC, "n": "reps"})
    print(shown.to_csv(sep="\t", index=False, float_format="%.1f"), end="")
    workloads = sorted(points["workload"].unique())
    fig, axes = plotting.new_figure(len(workloads), ncols=min(len(workloads), 3))
    for ax, workload in zip(axes, workloads):
        panel = points[points["workload"] == workload]
        archs = list(dict.fromkeys(panel["arch"]))  # in archbench's order, as sorted above
        for index, arch in enumerate(archs):
            line = panel[panel["arch"] == arch]
            color = plotting.arch_color(arch, index)
            if arch_rows.baseline(line).all():  # one process: a level to beat, not a curve
                mean, ci95 = line["mean"].iat[0], line["ci95"].fillna(0).iat[0]
                ax.axhline(mean, color=color, linestyle="--", label=f"{arch} (baseline)")
                ax.axhspan(mean - ci95, mean + ci95, color=color, alpha=0.15)
                continue
            dodge = 2 ** (0.05 * (index - len(archs) / 2))  # side by side: no bar hides another
            ax.errorbar(line["workers"] * dodge, line["mean"], yerr=line["ci95"].fillna(0), capsize=4,
                        color=color, marker=plotting.arch_marker(arch), label=arch)  # fmt: skip
        levels = sorted(panel.loc[arch_rows.distributed(panel), "workers"].unique())
        ax.set_xscale("log", base=2)  # worker counts double: equal steps
        ax.set_xticks(levels, [f"{w:g}" for w in levels])
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.set_xlim(levels[0] / 1.5, levels[-1] * 1.5)
        ax.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
        ax.set_ylim(bottom=0)  # from zero: heights compare as ratios
        ax.set_xlabel("workers")
        ax.set_ylabel(f"{LABEL}, mean ± 95% CI")
        plotting.panel_title(ax, workload)
    plotting.legend_outside(fig, axes)
    plotting.set_title(fig, f"{study.name}: {LABEL} against workers")
    script.save_figure(fig, args.study, __file__, args.out)


if __name__ == "__main__":
    script.run(main, __file__)
