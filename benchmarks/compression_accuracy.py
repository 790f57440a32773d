"""Top-k's cost in accuracy: steps to the target with and without compression, per architecture.

Runs the study `runs/topk-accuracy.yaml` (resumable: a second call only prints) and prints, per
architecture, the first evaluated step at which each run reached the study's target test accuracy,
how many epochs later top-k got there than dense training, both runs' final accuracy, and the
gradient bytes each worker sent per step.

Usage: python benchmarks/compression_accuracy.py [--study runs/topk-accuracy.yaml] [--no-run]
"""

from __future__ import annotations

import sys

from study_run import run_study

from archbench.perfmodel.optimize.convergence import first_reach
from archbench.record import read_records


def steps_per_epoch(record: dict) -> float:
    timing = record["timing"]
    return timing["samples_per_epoch"] / record["config"]["global_batch_size"]


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/compression_accuracy.py", "runs/topk-accuracy.yaml", argv)
    if folder is None:
        return 2
    records = [r for r in read_records(str(folder / "results.jsonl")) if r.get("status") == "ok"]
    by_key = {(r["config"]["arch"], r["config"]["compression"] or "none"): r for r in records}
    print(
        f"{'arch':<5} {'compression':<11} {'target':>6} {'step at target':>14} "
        f"{'epochs later':>12} {'final acc':>9} {'bytes/step':>11}"
    )
    for arch in ("ring", "p2p", "ps"):
        dense = by_key.get((arch, "none"))
        for compression in ("none", "topk"):
            record = by_key.get((arch, compression))
            if record is None:
                continue
            target = record["result"]["target_accuracy"]
            reached = first_reach(record, target)
            later = ""
            dense_reached = first_reach(dense, target) if dense else None
            if compression != "none" and reached and dense_reached:
                later = f"{(reached[0] - dense_reached[0]) / steps_per_epoch(record):+.2f}"
            elif compression != "none" and dense_reached and not reached:
                later = "not reached"
            print(
                f"{arch:<5} {compression:<11} {target:>6.2f} "
                f"{(reached[0] if reached else 'never'):>14} {later:>12} "
                f"{record['result']['test_accuracy']:>9.4f} "
                f"{record['comm']['bytes_sent_per_step']:>11,}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
