"""Link use when communication dominates: bytes each node moved per step, and the rate reached.

Runs the study `runs/link-use.yaml` (wide_mlp on the emulated cluster at 1 Gbit; resumable, so a
second call only prints) and prints, per architecture, controller and worker count:

- bytes: what the busiest node sent per step, from its link's counters, over what the algorithm
  must send (ring and p2p: 2(W-1)/W x the gradient bytes per worker; ps: the server sends its
  shard of the parameters to every worker, W x M);
- link use: the busiest node's bytes per step (the larger direction) over the exchange phase of
  the probe steps (`timing.comm_s_median`), as a share of the link's rate;
- one way at a time (ps only): the server's bytes in both directions over the exchange phase, as
  a share of the rate. A synchronous server cannot send fresh parameters before every gradient
  is in, so its link carries the push one way, then the pull the other way: each direction is
  busy at most half the exchange, and this column, not the one above, says whether the link ran
  at its rate while the protocol let it.

Usage: python benchmarks/link_use.py [--study runs/link-use.yaml] [--no-run]
"""

from __future__ import annotations

import sys

from study_run import run_study

from archbench.common.bandwidth import Bandwidth
from archbench.record import read_records


def expected_bytes(record: dict) -> float:
    """Bytes the busiest node must send per step under the architecture's algorithm."""
    workers = record["cluster"]["num_workers"]
    param_bytes = record["model_stats"]["param_bytes"]
    if record["config"]["arch"] == "ps":
        return workers * param_bytes / record["cluster"]["num_ps"]
    return 2 * (workers - 1) / workers * param_bytes


def row(record: dict) -> dict:
    nodes = record["fidelity"]["nodes"].values()
    sent = max(node["wire_bytes_sent_per_step"] for node in nodes)
    busiest = max(
        max(node["wire_bytes_sent_per_step"], node["wire_bytes_received_per_step"])
        for node in nodes
    )
    both_ways = max(
        node["wire_bytes_sent_per_step"] + node["wire_bytes_received_per_step"] for node in nodes
    )
    rate = Bandwidth.tc_rate(record["cluster"]["link"], check_range=False).bits_per_s / 8
    exchange = record["timing"]["comm_s_median"]
    return {
        "arch": record["config"]["arch"],
        "controller": record["config"].get("controller") or "-",
        "algorithm": record["comm"].get("allreduce_algorithm") or "-",
        "workers": record["cluster"]["num_workers"],
        "sent_mb": sent / 1e6,
        "expected_mb": expected_bytes(record) / 1e6,
        "bytes_ratio": sent / expected_bytes(record),
        "exchange_s": exchange,
        "link_use": busiest / exchange / rate if exchange else float("nan"),
        "one_way_at_a_time": (
            both_ways / exchange / rate
            if exchange and record["config"]["arch"] == "ps"
            else float("nan")
        ),
    }


def main(argv: list[str] | None = None) -> int:
    folder = run_study("python benchmarks/link_use.py", "runs/link-use.yaml", argv)
    if folder is None:
        return 2
    results = folder / "results.jsonl"
    records = [
        r for r in read_records(str(results)) if r.get("status") == "ok" and r.get("fidelity")
    ]
    rows = sorted(
        (row(r) for r in records), key=lambda r: (r["arch"], r["controller"], r["workers"])
    )
    print(
        f"{'arch':<5} {'controller':<10} {'algorithm':<12} {'W':>2} {'sent MB/step':>12} "
        f"{'expected':>9} {'bytes ×':>8} {'exchange s':>10} {'link use':>8} "
        f"{'one way at a time':>17}"
    )
    for r in rows:
        print(
            f"{r['arch']:<5} {r['controller']:<10} {r['algorithm']:<12} {r['workers']:>2} "
            f"{r['sent_mb']:>12.1f} {r['expected_mb']:>9.1f} {r['bytes_ratio']:>8.3f} "
            f"{r['exchange_s']:>10.3f} {r['link_use']:>8.2f} "
            + (f"{r['one_way_at_a_time']:>17.2f}" if r["arch"] == "ps" else f"{'-':>17}")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
