"""Parameter-server ratios of a study that measured each setting once: a real synchronous and a
real asynchronous PS run (one server, two workers, under mpirun). With no repetitions to
bootstrap, the ratio's bar is the two runs' own step spread, computed here again from the
two records."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_train
from record_files import read_records

from archbench.analysis import plotting
from archbench.analysis.report import write_report

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

COMMON = [
    "--arch", "ps", "--num-ps", "1", "--model", "mlp", "--dataset", "fashion_mnist",
    "--batch-size", "32", "--steps", "30", "--eval-samples", "500", "--study", "ps-once",
]  # fmt: skip


@pytest.fixture(scope="module")
def ps_study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ps-once")
    for mode in ("--sync", "--async"):
        proc, _ = run_train([*COMMON, mode], out=folder / "results.jsonl", launcher="mpirun", np=3)
        assert proc.returncode == 0, (mode, proc.stdout[-1500:], proc.stderr[-1500:])
    return folder


def throughput_at(record: dict, step: str) -> float:
    """Samples per step over one of the run's step-time percentiles."""
    return record["config"]["global_batch_size"] / record["timing"][step]


def test_a_ratio_of_single_runs_gets_their_step_spread_as_its_bar(ps_study):
    records = read_records(ps_study / "results.jsonl")
    assert [r["status"] for r in records] == ["ok", "ok"]
    by_mode = {r["config"]["sync"]: r for r in records}
    fast_mode, slow_mode = by_mode["async"], by_mode["sync"]

    report = write_report(ps_study)
    table = pd.read_csv(report.markdown.parent / "tables" / "sync_ratio.csv")
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["n_numerator"], row["n_denominator"]) == (1, 1)
    assert math.isnan(row["ci_low"])  # nothing to bootstrap
    ratio = fast_mode["timing"]["samples_per_s"] / slow_mode["timing"]["samples_per_s"]
    low = throughput_at(fast_mode, "step_s_p90") / throughput_at(slow_mode, "step_s_p10")
    high = throughput_at(fast_mode, "step_s_p10") / throughput_at(slow_mode, "step_s_p90")
    assert row["ratio"] == pytest.approx(ratio, rel=1e-12)
    assert row["within_run_low"] == pytest.approx(low, rel=1e-12)
    assert row["within_run_high"] == pytest.approx(high, rel=1e-12)
    assert low <= ratio <= high and low < high

    svg = (report.markdown.parent / "figures" / "ps_placement.svg").read_text()
    assert plotting.WITHIN_RUN_BARS in svg
    assert "bootstrap CI" not in svg and "no interval" not in svg
