"""Synchronization frequency: how much exchange time per training sample `--sync-every 8` saves.

Runs the study `runs/sync-every.yaml` (wide_mlp, 2 workers on the emulated cluster at 1 Gbit,
H = 1 and H = 8, two repetitions; resumable, so a second call only prints) and prints, per
architecture and H, from the probe steps' exchange phase (`timing.comm_s_median`,
`timing.comm_s_median_by_kind`), two measures per training sample:

- exchange: the exchanging steps' phase only. H = 1: every step's (the gradient exchange and
  the update), / the global batch; H = 8: the averaging step's (the local update, then the
  parameter exchange), / 8 global batches;
- outside compute: the exchange plus the local steps' phase (their update; nothing is sent):
  H = 8: (average + 7 x local) / (8 x the global batch); H = 1 as above. This is what the steps
  spent besides forward and backward: the optimizer updates that local steps still run keep it
  from falling as far as the exchange.

Then per architecture the ratio H = 1 / H = 8 of each, the median over the repetitions' pairs and
their range, and the bytes sent per step (all steps) beside them.

Usage: python benchmarks/sync_every.py [--study runs/sync-every.yaml] [--no-run]
"""

from __future__ import annotations

import statistics
import sys
from itertools import product

from study_run import run_study

from archbench.record import read_records


def per_sample(record: dict, with_local_steps: bool) -> float | None:
    """Seconds of exchange phase per training sample, the local steps' phase included or not
    (None where a kind was never probed)."""
    timing, config = record["timing"], record["config"]
    every = int(config.get("sync_every") or 1)
    batch = config["global_batch_size"]
    if every == 1:
        return timing["comm_s_median"] / batch
    by_kind = timing.get("comm_s_median_by_kind") or {}
    average, local = by_kind.get("average"), by_kind.get("local")
    if average is None or (with_local_steps and local is None):
        return None
    spent = average + ((every - 1) * local if with_local_steps else 0.0)
    return spent / (every * batch)


def ratio_line(sync: list[dict], local: list[dict], with_local_steps: bool) -> str:
    ratios = [
        a / b
        for a, b in product(
            (per_sample(r, with_local_steps) for r in sync),
            (per_sample(r, with_local_steps) for r in local),
        )
        if a is not None and b
    ]
    if not ratios:
        return "n/a (a side has no probed exchange)"
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


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
    print(f"{'arch':5} {'H':>2} {'reps':>4} {'exchange ms/sample':>18} "
          f"{'outside compute':>15} {'bytes/step':>12} {'exchange steps':>14}")  # fmt: skip
    for (arch, every), runs in sorted(by_arm.items()):
        cells = []
        for with_local_steps in (False, True):
            values = [v for r in runs if (v := per_sample(r, with_local_steps)) is not None]
            cells.append(f"{1e3 * statistics.median(values):.3f}" if values else "n/a")
        sent = statistics.median(r["comm"]["bytes_sent_per_step"] for r in runs)
        exchanged = runs[0]["comm"].get("exchange_steps")
        print(f"{arch:5} {every:>2} {len(runs):>4} {cells[0]:>18} {cells[1]:>15} "
              f"{sent:>12,.0f} {exchanged!s:>14}")  # fmt: skip
    print("\nper sample, H = 1 / H = 8 (median over the repetitions' pairs, range)")
    for arch in sorted({arch for arch, _ in by_arm}):
        sync, local = by_arm.get((arch, 1), []), by_arm.get((arch, 8), [])
        print(f"{arch}: exchange {ratio_line(sync, local, False)}; "
              f"outside compute {ratio_line(sync, local, True)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
