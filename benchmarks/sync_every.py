"""Synchronization frequency: how much exchange time per training sample `--sync-every 8` saves.

Runs the study `runs/sync-every.yaml` (wide_mlp, 2 workers on the emulated cluster at 1 Gbit,
H = 1 and H = 8, two repetitions; resumable, so a second call only prints) and prints, per
architecture and H, from the probe steps' exchange phase (`timing.comm_s_median_by_kind`):

- H = 1: every step exchanges the gradient: exchange per sample = the exchange phase's median /
  the global batch;
- H = 8: one step in 8 averages the models (its phase: the local update, then the parameter
  exchange) and the 7 others only update locally (their phase: the update, nothing sent):
  exchange per sample = (average + 7 x local) / (8 x the global batch). The local updates are
  counted, so the ratio is what the steps really spent outside compute, not the wire alone;
- the ratio H = 1 / H = 8 per architecture, with the range over the repetitions' pairs, and the
  bytes sent per step (all steps) beside it.

Usage: python benchmarks/sync_every.py [--study runs/sync-every.yaml] [--no-run]
"""

from __future__ import annotations

import statistics
import sys
from itertools import product

from study_run import run_study

from archbench.record import read_records


def exchange_per_sample(record: dict) -> float | None:
    """Seconds of exchange phase per training sample (None where a kind was never probed)."""
    timing, config = record["timing"], record["config"]
    every = int(config.get("sync_every") or 1)
    batch = config["global_batch_size"]
    if every == 1:
        return timing["comm_s_median"] / batch
    by_kind = timing.get("comm_s_median_by_kind") or {}
    average, local = by_kind.get("average"), by_kind.get("local")
    if average is None or local is None:
        return None
    return (average + (every - 1) * local) / (every * batch)


def main(argv: list[str] | None = None) -> int:
    folder = run_study("sync_every.py", "runs/sync-every.yaml", argv)
    if folder is None:
        return 1
    records = [r for r in read_records(folder / "results.jsonl") if r["status"] == "ok"]
    if not records:
        print("no successful runs recorded", file=sys.stderr)
        return 1
    by_arm: dict[tuple[str, int], list[dict]] = {}
    for record in records:
        key = (record["config"]["arch"], int(record["config"].get("sync_every") or 1))
        by_arm.setdefault(key, []).append(record)
    print(f"{'arch':5} {'H':>2} {'reps':>4} {'exchange ms/sample':>18} {'bytes/step':>12} "
          f"{'exchange steps':>14}")  # fmt: skip
    for (arch, every), runs in sorted(by_arm.items()):
        per_sample = [v for v in map(exchange_per_sample, runs) if v is not None]
        shown = f"{1e3 * statistics.median(per_sample):.3f}" if per_sample else "n/a"
        sent = statistics.median(r["comm"]["bytes_sent_per_step"] for r in runs)
        exchanged = runs[0]["comm"].get("exchange_steps")
        print(f"{arch:5} {every:>2} {len(runs):>4} {shown:>18} {sent:>12,.0f} {exchanged!s:>14}")
    print("\nexchange time per sample, H = 1 / H = 8 (median over the repetitions' pairs, range)")
    for arch in sorted({arch for arch, _ in by_arm}):
        sync = [exchange_per_sample(r) for r in by_arm.get((arch, 1), [])]
        local = [exchange_per_sample(r) for r in by_arm.get((arch, 8), [])]
        ratios = [a / b for a, b in product(sync, local) if a is not None and b]
        if not ratios:
            print(f"{arch}: n/a (a side has no probed exchange)")
            continue
        print(f"{arch}: {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
