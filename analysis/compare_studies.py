"""The same configurations in two studies side by side, e.g. before and after a change: per
configuration measured in both, the ratio of its mean throughputs (B ÷ A; above 1: faster in B)
with the 95% bootstrap interval of that ratio over the repetitions of each side.

A configuration is its workload and the settings its study varied (its `config` label), so the
two studies should share a design (e.g. the same spec run twice). A point without a bar has one
repetition on a side: nothing to estimate its spread from.

    python analysis/compare_studies.py runs/<a>/ runs/<b>/ [--out FILE.png]

To adapt: another metric is the METRIC line (any number column of `load_study(...).ok`, e.g.
"step_s" with its LABEL; a ratio above 1 then means slower in B).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import plotting, script
from archbench.analysis.load import load_study
from archbench.analysis.stats import ratio_of_means
from archbench.common.archs import sort_key
from archbench.common.errors import UsageError

METRIC, LABEL = "samples_per_s", "throughput"


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Throughput ratios of two studies' configurations."
    )
    parser.add_argument("a", type=Path, help="study A (before), runs/<a>/: the denominator")
    parser.add_argument("b", type=Path, help="study B (after), runs/<b>/: the numerator")
    parser.add_argument("--out", type=Path, help="default: <b>/figures/<script>.png")
    args = parser.parse_args()
    groups = []
    for path in (args.a, args.b):
        runs = load_study(path).ok.dropna(subset=[METRIC])
        if runs.empty:
            raise UsageError(f"{path}: no finished runs (status ok) with {METRIC}")
        groups.append(runs.groupby(["workload", "arch", "config"])[METRIC])
    common = sorted(set(groups[0].groups) & set(groups[1].groups),
                    key=lambda k: (k[0], sort_key(k[1]), k[2]))  # fmt: skip
    if not common:
        raise UsageError(
            f"no configuration (workload and settings) is in both {args.a} and {args.b}"
        )
    rows = []
    for key in common:
        in_a, in_b = (group.get_group(key) for group in groups)
        ratio = ratio_of_means(list(in_b), list(in_a))
        rows.append({"workload": key[0], "config": key[2], "mean_a": in_a.mean(),
                     "mean_b": in_b.mean(), "reps_a": len(in_a), "reps_b": len(in_b), **ratio})  # fmt: skip
    table = pd.DataFrame(rows).drop(columns="ratio_std")
    print(table.to_csv(sep="\t", index=False, float_format="%.2f"), end="")
    fig, (ax,) = plotting.new_figure(1, panel_size=(10.0, 0.32 * len(table) + 1.2))
    ys = np.arange(len(table))[::-1]  # the first configuration on top
    bars = table[table["ci_low"].notna()]
    if len(bars):
        ax.errorbar(bars["ratio"], ys[bars.index], fmt="o", capsize=4, color="black",
                    xerr=[bars["ratio"] - bars["ci_low"], bars["ci_high"] - bars["ratio"]],
                    label="ratio of means, 95% bootstrap CI")  # fmt: skip
    once = table[table["ci_low"].isna()]
    if len(once):
        ax.plot(once["ratio"], ys[once.index], "o", mfc="white", color="black",
                label="one repetition on a side (no interval)")  # fmt: skip
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1, label="no difference (1×)")
    ax.set_yticks(ys, [f"{w} · {c}" for w, c in zip(table["workload"], table["config"])])
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(f"{LABEL} ratio, {args.b.name} ÷ {args.a.name} (×)")
    plotting.legend_outside(fig, [ax], ncol=3)
    plotting.set_title(fig, f"{args.b.name} against {args.a.name}: {LABEL} per configuration")
    script.save_figure(fig, args.b, __file__, args.out)


if __name__ == "__main__":
    script.run(main, __file__)
