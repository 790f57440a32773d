"""Do a baseline's companions change what the report reads? `single` alone against `single` with
W - 1 companions computing beside it on nodes of their own, interleaved in one study.

Runs the study `runs/companions.yaml` (resumable: a second call only prints) and prints, per
workload and number of companions, the ratio of single's mean throughput (samples/s, the
speed-ups' denominator) and of its mean compute pass (`timing.compute_s_median`) to those of
single alone, each with its 95% bootstrap interval (`archbench.analysis.stats.ratio_of_means`),
and the spread of single alone's own repetitions (relative standard deviation). An interval that
holds 1 says the companions did not move it past the noise of this study.

Usage: python benchmarks/companions.py [--study runs/companions.yaml] [--no-run]
"""

from __future__ import annotations

import sys

from study_run import run_study

from archbench.analysis.load import load_study
from archbench.analysis.stats import ratio_of_means


def _interval(a: list[float], b: list[float]) -> str:
    ratio = ratio_of_means(a, b)
    return f"{ratio['ratio']:.2f} [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/companions.py", "runs/companions.yaml", argv)
    if folder is None:
        return 2
    ok = load_study(folder).ok
    single = ok[ok["arch"] == "single"]
    print(f"{'workload':<8} {'companions':>10} {'runs':>4}  {'samples/s ÷ alone':>20}  "
          f"{'compute ÷ alone':>20}  alone's spread")  # fmt: skip
    for workload, runs in single.groupby("workload"):
        by_load = {int(load): group for load, group in runs.groupby("companions")}
        alone = by_load.get(0)
        if alone is None or len(alone) < 2:
            print(f"{workload:<8} fewer than two runs of single alone: nothing to compare")
            continue
        throughput = alone["samples_per_s"].astype(float)
        spread = throughput.std(ddof=1) / throughput.mean()
        for load, group in sorted(by_load.items()):
            if load == 0:
                continue
            print(
                f"{workload:<8} {load:>10} {len(group):>4}  "
                f"{_interval(group['samples_per_s'].tolist(), throughput.tolist()):>20}  "
                f"{_interval(group['compute_s'].tolist(), alone['compute_s'].tolist()):>20}  "
                f"{spread:.0%} over {len(alone)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
