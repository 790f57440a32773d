"""Each worker's compute against the baseline: does the emulated cluster hold?

Runs the study `runs/fidelity.yaml` (resumable: a second call only prints) and prints, per run,
each worker's compute median (forward + backward, `timing.compute_s_median_per_rank`) over the
`single` baseline's of the same model and per-worker batch measured with as many nodes computing
at once (its companions), the worst ratio, whether the run's threads waited for a core
(`fidelity.nodes[*].core_wait_share`), and the engine's own call per pass (`call ms`: the median
of `timing.dispatch_s_per_rank`, the call timed with nothing to compute). The judgement is the report's own
(`archbench.analysis.fidelity.drift_table`). For the worst worker, its drift's two parts
(`timing.compute_core_share_per_rank`): `cores`, the virtual cores it used while computing against
the baseline's, and `cpu`, the CPU one pass cost over the baseline's (drift = cpu / (cores ratio)).

Usage: python benchmarks/compute_fidelity.py [--study runs/fidelity.yaml] [--no-run]
"""

from __future__ import annotations

import math
import statistics
import sys

from study_run import run_study

from archbench.analysis.fidelity import DRIFT_LIMIT, drift_table, oversubscribed
from archbench.analysis.load import load_study


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/compute_fidelity.py", "runs/fidelity.yaml", argv)
    if folder is None:
        return 2
    ok = load_study(folder).ok
    table = drift_table(ok).set_index("run_id")
    busy = set(oversubscribed(ok)["run_id"])
    print(
        f"{'workload':<8} {'arch':<6} {'W':>2} {'baseline ms':>11} {'load':>5} {'call ms':>7} "
        f"{'cores':>11} {'cpu':>5}  worker compute ÷ baseline (virtual time)"
    )
    judged = within = 0
    for _, run in ok.sort_values(["workload", "arch", "workers"]).iterrows():
        if run["run_id"] not in table.index:
            continue
        row = table.loc[run["run_id"]]
        ratios = [value / row["baseline_compute_s"] for value in run["compute_s_per_worker"]]
        judged += 1
        within += row["drift"] <= DRIFT_LIMIT
        flags = ("  DRIFT" if row["drift"] > DRIFT_LIMIT else "") + (
            "  OVERSUBSCRIBED" if run["run_id"] in busy else ""
        )
        load = "same" if row["baseline_same_load"] else "other"
        calls = [value for value in run.get("dispatch_s_per_worker", []) if not math.isnan(value)]
        call = f"{1000 * statistics.median(calls):7.3f}" if calls else f"{'-':>7}"
        cores = f"{row['core_share']:.2f}/{row['baseline_core_share']:.2f}"
        print(
            f"{run['workload']:<8} {run['arch']:<6} {int(run['workers']):>2} "
            f"{1000 * row['baseline_compute_s']:>11.3f} {load:>5} {call} "
            f"{cores:>11} {row['cpu_ratio']:>5.2f}  "
            + " ".join(f"{ratio:.2f}" for ratio in ratios)
            + flags
        )
    print(f"{within} of {judged} runs within {DRIFT_LIMIT:.0%} of their baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
