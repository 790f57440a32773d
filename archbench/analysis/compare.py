"""`archbench compare A.jsonl [B.jsonl ...]`: quick terminal tables for one-off runs.

One line per run, then one line per configuration (mean ± std over its repetitions) with its
speed-up against the single-process baseline of the same workload and per-worker batch (or,
without one, against the first configuration listed).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pandas as pd

from archbench.analysis import arch_rows
from archbench.analysis.fmt import num
from archbench.common.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="print comparison tables of run records in the terminal",
        description="Compare run records side by side: one line per run, one per configuration.",
    )
    parser.add_argument("files", nargs="+", type=Path, help="records files (.jsonl)")
    parser.set_defaults(func=run)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return num(value, digits)
    return str(value)


def _ms(value: Any) -> str:
    return _fmt(1000 * value) if isinstance(value, int | float) else "-"


def _pct(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "-"
    return f"{100 * value:.1f}%"


def _mean_std(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return "-"
    text = _fmt(float(values.mean()))
    if len(values) > 1:
        text += f" ± {_fmt(float(values.std()), 2)}"
    return text


def _accuracy(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return "-"
    text = f"{100 * values.mean():.1f}%"
    if len(values) > 1:
        text += f" ± {100 * values.std():.1f}"
    return text


def _quality_columns(frame: pd.DataFrame) -> tuple[bool, bool]:
    """Whether to show test accuracy and test RMSE: each where some run recorded it (accuracy
    also where neither was, as a column of dashes); a regression run's null accuracy is not a
    score."""
    rmse = bool(frame["test_rmse"].notna().any())
    accuracy = bool(frame["test_accuracy"].notna().any()) or not rmse
    return accuracy, rmse


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; text left-aligned, numbers right-aligned."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def is_number(cell: str) -> bool:
        stripped = cell.replace(",", "").replace("%", "").replace("×", "").split(" ± ")[0]
        try:
            float(stripped)
        except ValueError:
            return False
        return True

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(width) if is_number(cell) else cell.ljust(width)
            for cell, width in zip(cells, widths, strict=True)
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def runs_table(frame: pd.DataFrame, many_files: bool) -> str:
    headers = ["file"] if many_files else []
    headers += ["run", "status", "workload", "configuration", "samples/s", "step ms"]
    accuracy, rmse = _quality_columns(frame)
    headers += ["compute ms", "exposed comm ms"]
    headers += ["test acc"] * accuracy + ["test RMSE"] * rmse + ["time to target s"]
    rows = []
    for _, run in frame.iterrows():
        cells = [Path(run["file"]).name] if many_files else []
        cells += [
            str(run["run_id"] or run["source"]),
            run["status"],
            str(run["workload"]),
            str(run["config"]),
            _fmt(run["samples_per_s"]),
            _ms(run["step_s"]),
            _ms(run["compute_s"]),
            _ms(run["exposed_comm_s"]),
            *[_pct(run["test_accuracy"])] * accuracy,
            *[_fmt(run["test_rmse"])] * rmse,
            _fmt(run["time_to_target_s"]),
        ]
        rows.append(cells)
    return text_table(headers, rows)


def summary_frame(ok: pd.DataFrame) -> pd.DataFrame:
    """Per workload × configuration: means, and the speed-up against the baseline."""
    rows = []
    for (workload, config), runs in ok.groupby(["workload", "config"], sort=False):
        rows.append(
            {
                "workload": workload,
                "config": config,
                "arch": runs["arch"].iloc[0],
                "batch_size": runs["batch_size"].iloc[0],
                "runs": runs,
                "samples_per_s": runs["samples_per_s"].mean(),
            }
        )
    summary = pd.DataFrame(rows)
    if summary.empty:
        return summary
    baselines, speedups = [], []
    for _, row in summary.iterrows():
        same = summary[summary["workload"] == row["workload"]]
        single = same[arch_rows.baseline(same)]
        matching = single[single["batch_size"] == row["batch_size"]]
        pool = matching if len(matching) else single
        usable = pool.dropna(subset=["samples_per_s"])
        base = usable.loc[usable["samples_per_s"].idxmax()] if len(usable) else same.iloc[0]
        baselines.append(base["config"])
        speedups.append(row["samples_per_s"] / base["samples_per_s"])
    summary["baseline"] = baselines
    summary["speedup"] = speedups
    return summary


def summary_table(frame: pd.DataFrame, summary: pd.DataFrame) -> str:
    headers = ["workload", "configuration", "ok/runs", "samples/s", "speed-up", "s/epoch"]
    accuracy, rmse = _quality_columns(frame)
    headers += ["step ms", "exposed comm"]
    headers += ["test acc"] * accuracy + ["test RMSE"] * rmse + ["time to target s"]
    rows = []
    for _, row in summary.iterrows():
        runs = row["runs"]
        every = frame[(frame["workload"] == row["workload"]) & (frame["config"] == row["config"])]
        step = runs["compute_s"] + runs["exposed_comm_s"]
        share = (runs["exposed_comm_s"] / step).dropna()
        rows.append(
            [
                str(row["workload"]),
                str(row["config"]),
                f"{len(runs)}/{len(every)}",
                _mean_std(runs["samples_per_s"]),
                f"{_fmt(row['speedup'])}×" if not math.isnan(row["speedup"]) else "-",
                _mean_std(runs["epoch_s"]),
                _mean_std(1000 * runs["step_s"]),
                _pct(float(share.mean())) if len(share) else "-",
                *[_accuracy(runs["test_accuracy"])] * accuracy,
                *[_mean_std(runs["test_rmse"])] * rmse,
                _mean_std(runs["time_to_target_s"]),
            ]
        )
    return text_table(headers, rows)


def run(args: argparse.Namespace) -> int:
    # deferred: the study loader and the record package load only when compare runs
    from archbench.analysis.load import load_files

    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        raise UsageError(f"no such records file: {', '.join(missing)}")
    study = load_files(list(args.files))
    frame = study.frame
    print(runs_table(frame, many_files=len(args.files) > 1))
    ok = study.ok
    if ok.empty:
        print("\nno run finished: nothing to summarise")
        return 0
    summary = summary_frame(ok)
    print()
    print(summary_table(frame, summary))
    pairs = summary[["workload", "baseline"]].drop_duplicates()
    against = "; ".join(
        f"{w}: {b}" for w, b in zip(pairs["workload"], pairs["baseline"], strict=True)
    )
    print(f"\nspeed-up = mean samples/s ÷ that of the baseline ({against})")
    print("s/epoch = one epoch of the data set at the median step's rate (equal work)")
    if _quality_columns(frame)[1]:
        print("test RMSE = root of the test mean squared error (--loss mse; lower is better)")
    for note in study.notes:
        print(f"note: {note}")
    return 0
