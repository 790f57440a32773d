"""Each worker's compute against the one-node baseline: does the emulated cluster hold?

Runs the study `runs/fidelity.yaml` (resumable: a second call only prints) and prints, per run,
each worker's compute median (forward + backward, `timing.compute_s_median_per_rank`) over the
`single` baseline's of the same model and per-worker batch, the worst ratio, and each node's use
of its CPU budget over the run (`fidelity.nodes[*].budget_used`).

Usage: python benchmarks/compute_fidelity.py [--study runs/fidelity.yaml] [--no-run]
"""

from __future__ import annotations

import sys

from study_run import run_study

from archbench.analysis.fidelity import DRIFT_LIMIT, baselines
from archbench.analysis.load import load_study


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/compute_fidelity.py", "runs/fidelity.yaml", argv)
    if folder is None:
        return 2
    study = load_study(folder)
    ok = study.ok
    base = baselines(ok)
    print(f"{'workload':<8} {'arch':<5} {'W':>2} {'baseline ms':>11}  worker compute ÷ baseline")
    worst_all = []
    for _, run in ok.sort_values(["workload", "arch", "workers"]).iterrows():
        reference = base.get((run["workload"], run["batch_size"]))
        if run["arch"] == "single" or reference is None:
            continue
        ratios = [value / reference for value in run["compute_s_per_worker"]]
        if not ratios:  # a record from before per-rank compute was recorded
            continue
        worst = max(ratios, key=lambda ratio: abs(ratio - 1))
        worst_all.append(abs(worst - 1))
        flag = "  DRIFT" if abs(worst - 1) > DRIFT_LIMIT else ""
        print(
            f"{run['workload']:<8} {run['arch']:<5} {int(run['workers']):>2} "
            f"{1000 * reference:>11.2f}  " + " ".join(f"{ratio:.2f}" for ratio in ratios) + flag
        )
    if worst_all:
        within = sum(drift <= DRIFT_LIMIT for drift in worst_all)
        print(f"{within} of {len(worst_all)} runs within {DRIFT_LIMIT:.0%} of the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
