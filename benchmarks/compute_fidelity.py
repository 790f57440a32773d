"""Each run's workers against their own engine's one-worker runs: does the emulated cluster hold?

Runs the study `runs/fidelity.yaml` (resumable: a second call only prints) and prints, per run,
its workers' compute medians (forward + backward, `timing.compute_s_median_per_rank`) over the
one-worker runs of the same architecture, model and per-worker batch (their geometric mean), the
tolerance those runs' own noise allows (95% prediction interval of one more, Student's t on log
compute), whether the run is flagged, and whether its threads waited for a core
(`fidelity.nodes[*].core_wait_share`). The judgement is the report's own
(`archbench.analysis.fidelity.drift_table`). For the worst worker, its drift's two parts
(`timing.compute_core_share_per_rank`): `cores`, the virtual cores it used while computing against
the baseline's, and `cpu`, the CPU one pass cost over the baseline's.

Usage: python benchmarks/compute_fidelity.py [--study runs/fidelity.yaml] [--no-run]
"""

from __future__ import annotations

import sys

from study_run import run_study

from archbench.analysis.fidelity import drift_table, engine_cost_findings, oversubscribed
from archbench.analysis.load import load_study


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/compute_fidelity.py", "runs/fidelity.yaml", argv)
    if folder is None:
        return 2
    ok = load_study(folder).ok
    table = drift_table(ok).set_index("run_id")
    busy = set(oversubscribed(ok)["run_id"])
    print(
        f"{'workload':<8} {'arch':<6} {'W':>2} {'baseline ms':>11} {'noise':>6} "
        f"{'cores':>11} {'cpu':>5}  worker compute ÷ baseline (virtual time)"
    )
    judged = flagged = 0
    for _, run in ok.sort_values(["workload", "arch", "workers"]).iterrows():
        if run["run_id"] not in table.index:
            continue
        row = table.loc[run["run_id"]]
        if not row["judged"]:
            print(f"{run['workload']:<8} {run['arch']:<6} {int(run['workers']):>2}  not judged: "
                  f"{row['why_not']}")  # fmt: skip
            continue
        ratios = [value / row["baseline_compute_s"] for value in run["compute_s_per_worker"]]
        judged += 1
        flagged += bool(row["flagged"])
        flags = ("  FLAGGED" if row["flagged"] else "") + (
            "  OVERSUBSCRIBED" if run["run_id"] in busy else ""
        )
        cores = f"{row['core_share']:.2f}/{row['baseline_core_share']:.2f}"
        print(
            f"{run['workload']:<8} {run['arch']:<6} {int(run['workers']):>2} "
            f"{1000 * row['baseline_compute_s']:>11.3f} {row['tolerance']:>6.0%} "
            f"{cores:>11} {row['cpu_ratio']:>5.2f}  "
            + " ".join(f"{ratio:.2f}" for ratio in ratios)
            + flags
        )
    print(f"{flagged} of {judged} judged runs outside their engine's noise")
    for line in engine_cost_findings(ok):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
