"""Sparse models: bytes and time per step, sparse vs dense, per architecture, and partitioning.

Runs the studies `runs/sparse.yaml` (ring, p2p, ps x dense/sparse x 2,000 / 20,000 words) and
`runs/sparse-partition.yaml` (ps with 2 servers: data cut in documents or by METIS, rows placed
round-robin, by hash or by use); both resumable, so a second call only prints. Prints:

- per run: the rows each worker touched per step and their share of the vocabulary (the
  density), bytes sent per step per worker (counted from the messages: `comm.bytes_sent_per_step`),
  median step and exchange time, test accuracy;
- per architecture and vocabulary: dense / sparse bytes and step time;
- the density where sparse stops paying in bytes, from the byte counts' own terms: ring's
  allgather moves (W-1)/W of every worker's token rows (row + index) where the densified
  allreduce moves 2(W-1)/W of the table, so it wins while the tokens of a global batch are fewer
  than 2 V row/(row + index); a ps worker sends a row and 16 index bytes per touched row where
  dense sends every row, so it wins while fewer than row/(row + 16) of the rows are touched;
- per partitioning: the time each step took to compute, the share of row traffic that went to a
  server other than the worker's partner, and how much less than round-robin that is.

Usage: python benchmarks/sparse_bytes.py [--no-run] [--study S.yaml] [--partition-study P.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study_run import run_study

from archbench.record import read_records

ROW_BYTES = 64 * 4  # wordlm's embedding row: 64 float32
RING_INDEX_BYTES = 4  # the lookup's int32 indices, as Horovod gathers them
ROOT = Path(__file__).resolve().parents[1]


def load(folder: Path) -> list[dict]:
    return [r for r in read_records(folder / "results.jsonl") if r["status"] == "ok"]


def run_row(record: dict) -> dict:
    config, comm = record["config"], record["comm"]
    exchange = comm.get("sparse_exchange") or {}
    rows = exchange.get("rows_per_step")
    return {
        "arch": config["arch"],
        "vocab": config["vocab_size"],
        "exchange": config["sparse_exchange"],
        "partition": config.get("data_partition") or "random",
        "rows": rows,
        "density": rows / config["vocab_size"] if rows else None,
        "sent_kb": comm["bytes_sent_per_step"] / 1e3,
        "step_ms": 1e3 * record["timing"]["step_s_median"],
        "comm_ms": 1e3 * (record["timing"]["comm_s_median"] or 0),
        "accuracy": record["result"]["test_accuracy"],
        "loss": record["result"]["final_loss"],
        "workers": record["cluster"]["num_workers"],
        "tokens": config["batch_size"] * config["seq_len"],
    }


def print_runs(rows: list[dict]) -> None:
    print(f"{'arch':5} {'vocab':>6} {'data':8} {'exchange':8} {'rows/step':>9} {'density':>8} "
          f"{'sent kB/step':>12} {'step ms':>8} {'exch ms':>8} {'accuracy':>8} {'loss':>8}")  # fmt: skip
    for r in sorted(rows, key=lambda r: (r["arch"], r["vocab"], r["partition"], r["exchange"])):
        rows_text = f"{r['rows']:.0f}" if r["rows"] else "-"
        density = f"{100 * r['density']:.1f}%" if r["density"] else "-"
        print(f"{r['arch']:5} {r['vocab']:>6} {r['partition']:8} {r['exchange']:8} {rows_text:>9} {density:>8} "
              f"{r['sent_kb']:>12.1f} {r['step_ms']:>8.1f} {r['comm_ms']:>8.1f} "
              f"{r['accuracy']:>8.4f} {r['loss']:>8.4f}")  # fmt: skip


def print_ratios(rows: list[dict]) -> None:
    print("\ndense / sparse, per architecture, vocabulary and data partition")
    print(
        f"{'arch':5} {'vocab':>6} {'data':8} {'bytes':>7} {'step time':>9} {'accuracy (d, s)':>16}"
    )
    by_key = {(r["arch"], r["vocab"], r["partition"], r["exchange"]): r for r in rows}
    for arch, vocab, part in sorted({(r["arch"], r["vocab"], r["partition"]) for r in rows}):
        dense = by_key.get((arch, vocab, part, "dense"))
        sparse = by_key.get((arch, vocab, part, "sparse"))
        if dense and sparse:
            print(f"{arch:5} {vocab:>6} {part:8} {dense['sent_kb'] / sparse['sent_kb']:>6.1f}x "
                  f"{dense['step_ms'] / sparse['step_ms']:>8.2f}x "
                  f"{dense['accuracy']:>8.4f} {sparse['accuracy']:.4f}")  # fmt: skip


def print_crossover(rows: list[dict]) -> None:
    print("\nwhere sparse stops sending fewer bytes")
    for r in sorted(rows, key=lambda r: r["vocab"]):
        if r["arch"] != "ring" or r["exchange"] != "sparse" or r["partition"] != "random":
            continue
        limit = 2 * r["vocab"] * ROW_BYTES / (ROW_BYTES + RING_INDEX_BYTES)
        tokens = r["workers"] * r["tokens"]
        print(f"ring, {r['vocab']} words: the allgather sends fewer bytes while a global "
              f"batch holds fewer than {limit:,.0f} tokens (about 2 V); this study's: {tokens:,}")  # fmt: skip
    share = ROW_BYTES / (ROW_BYTES + 16)
    print(
        "ps: a worker sends row + 16 index bytes per touched row (push and pull request) where "
        f"dense sends every row: sparse sends fewer bytes while under {100 * share:.0f}% of the "
        "rows are touched per step"
    )
    print(
        "p2p: the gradient phase sends only the touched rows (index runs: 8 bytes per row) "
        "and the return phase the averaged gradient of the rows any worker touched, the same "
        "way: sparse sends fewer bytes while the touched rows' union stays under the table"
    )


def print_partitions(records: list[dict]) -> None:
    print("\npartitioning (ps, 2 workers, 2 servers; partner of worker k: server k)")
    print(f"{'data':10} {'rows':11} {'data s':>7} {'rows s':>7} {'off-partner':>11} "
          f"{'row kB/step':>11} {'step ms':>8} {'accuracy':>8}")  # fmt: skip
    off: dict[tuple, float] = {}
    for record in sorted(
        records,
        key=lambda r: (r["config"]["data_partition"], r["config"]["param_partition"]),
    ):
        partition, exchange = record["comm"]["partition"], record["comm"]["sparse_exchange"]
        matrix = exchange["row_bytes_per_worker_per_server_per_step"]
        share = exchange["row_bytes_off_partner_share"]
        key = (partition["data_partition"], partition["param_partition"])
        off[key] = share * sum(map(sum, matrix))
        print(f"{key[0]:10} {key[1]:11} {partition['data_partition_s']:>7.3f} "
              f"{partition['param_partition_s']:>7.4f} {100 * share:>10.1f}% "
              f"{sum(map(sum, matrix)) / len(matrix) / 1e3:>11.1f} "
              f"{1e3 * record['timing']['step_s_median']:>8.1f} "
              f"{record['result']['test_accuracy']:>8.4f}")  # fmt: skip
    for data in sorted({k[0] for k in off}):
        by_use, round_robin = off.get((data, "by-use")), off.get((data, "round-robin"))
        if by_use and round_robin:
            print(f"{data}: row bytes to other servers, round-robin / by-use: "
                  f"{round_robin / by_use:.2f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparse_bytes.py")
    parser.add_argument("--study", default=str(ROOT / "runs/sparse.yaml"))
    parser.add_argument("--partition-study", default=str(ROOT / "runs/sparse-partition.yaml"))
    parser.add_argument("--no-run", action="store_true", help="only print the recorded runs")
    args = parser.parse_args(argv)
    no_run = ["--no-run"] if args.no_run else []
    folder = run_study("sparse_bytes.py", args.study, ["--study", args.study, *no_run])
    partitions = run_study(
        "sparse_bytes.py", args.partition_study, ["--study", args.partition_study, *no_run]
    )
    if folder is None or partitions is None:
        return 1
    rows = [run_row(r) for r in load(folder)]
    print_runs(rows)
    print_ratios(rows)
    print_crossover(rows)
    print_partitions(load(partitions))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
