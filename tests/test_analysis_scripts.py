"""The figure scripts of analysis/, run as users run them (`python analysis/X.py runs/<study>/`)
on the tiny real study of report_records and on hand-written parameter-server records: each
writes its PNG, prints numbers that equal ones computed here from the raw records, and bad input
ends with one line on stderr, exit status 2 and nothing written."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import report_records
from conftest import REPO
from record_files import minimal_record, read_records, write_records
from scipy import stats

SCRIPTS = REPO / "analysis"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Hand-written PS runs: samples/s of the three repetitions per (placement, workers).
PS_RATES = {
    ("dedicated", 2): [1000.0, 1040.0, 1010.0],
    ("colocated", 2): [1500.0, 1450.0, 1530.0],
    ("one-host", 2): [3000.0, 3100.0, 2950.0],
    ("dedicated", 4): [1800.0, 1750.0, 1820.0],
    ("colocated", 4): [2100.0, 2200.0, 2150.0],
}


@pytest.fixture(scope="session")
def real_study(tmp_path_factory) -> Path:
    # report_records trains the study once per session and hands the same folder to every caller
    return report_records.real_study(tmp_path_factory.mktemp("report-study"))


@pytest.fixture(scope="module")
def raw_records(real_study) -> list[dict]:
    records = read_records(real_study / "results.jsonl")
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    return records


def study_copy(records: list[dict], folder: Path) -> Path:
    """A study folder of its own (the scripts write into <study>/figures/ by default)."""
    write_records(folder / "results.jsonl", records)
    return folder


def ps_record(run_id: str, placement: str, workers: int, rate: float) -> dict:
    """A minimal PS run record that loads (the shape of test_report_claims' records)."""
    ps_host = {"dedicated": "n0", "colocated": "n1", "one-host": "n1"}[placement]
    worker_hosts = ["n1"] * workers if placement == "one-host" else [f"n{i + 1}" for i in range(workers)]  # fmt: skip
    return {
        "schema": 1,
        "run_id": run_id,
        "status": "ok",
        "config": {
            "arch": "ps",
            "model": "mlp",
            "dataset": "fashion_mnist",
            "batch_size": 32,
            "global_batch_size": 32 * workers,
            "num_ps": 1,
            "sync": "sync",
        },  # fmt: skip
        "cluster": {
            "num_workers": workers,
            "hosts": [ps_host, *worker_hosts],
            "roles": ["ps"] + ["worker"] * workers,
            "link": "1gbit",
        },  # fmt: skip
        "timing": {
            "samples_per_s": rate,
            "step_s_median": 32 * workers / rate,
            "compute_s_median": 0.001,
        },  # fmt: skip
        "result": {"test_accuracy": 0.7},
        "factors": {"arch": "ps", "workers": workers, "placement": placement},
    }


def ps_records() -> list[dict]:
    return [
        ps_record(f"ps-{placement}-{workers}-{rep}", placement, workers, rate)
        for (placement, workers), rates in PS_RATES.items()
        for rep, rate in enumerate(rates)
    ]


def run_script(name: str, *args: object) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPTS / f"{name}.py"), *map(str, args)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)


def printed_table(proc: subprocess.CompletedProcess, dtype: type | None = None) -> pd.DataFrame:
    """The tab-separated numbers a script printed before the path it wrote (`#` lines are
    remarks)."""
    lines = [line for line in proc.stdout.splitlines()[:-1] if not line.startswith("#")]
    return pd.read_csv(io.StringIO("\n".join(lines)), sep="\t", dtype=dtype)


def assert_wrote_png(proc: subprocess.CompletedProcess, path: Path) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == str(path)
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 10_000, f"{path} looks empty"


def ci95(values: list[float]) -> float:
    """Half-width of the Student-t 95% interval of the mean, computed here from scratch."""
    return stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values))


def mean_of(records: list[dict], model: str, arch: str, batch: int, field: str) -> float:
    values = [
        r["timing"][field]
        for r in records
        if report_records.key(r) == (model, arch, batch)
    ]  # fmt: skip
    assert values
    return float(np.mean(values))


def test_throughput_vs_workers_draws_the_means_of_the_raw_records(raw_records, tmp_path):
    study = study_copy(raw_records, tmp_path / "tiny")
    proc = run_script("throughput_vs_workers", study)  # the default --out
    assert_wrote_png(proc, study / "figures" / "throughput_vs_workers.png")
    table = printed_table(proc).set_index(["workload", "arch"])
    for model in ("mlp", "cnn"):
        ring = [r["timing"]["samples_per_s"] for r in raw_records if report_records.key(r) == (model, "ring", 32)]  # fmt: skip
        assert table.at[(model, "ring"), "workers"] == 2
        assert table.at[(model, "ring"), "samples_per_s"] == pytest.approx(np.mean(ring), abs=0.06)
        assert table.at[(model, "ring"), "ci95"] == pytest.approx(ci95(ring), abs=0.06)
        # the baseline is the fastest single-process configuration (batch 32 or 64)
        fastest = max(mean_of(raw_records, model, "single", b, "samples_per_s") for b in (32, 64))
        assert table.at[(model, "single"), "samples_per_s"] == pytest.approx(fastest, abs=0.06)


def test_time_split_parts_are_the_raw_records_compute_and_exposed_times(raw_records, tmp_path):
    out = tmp_path / "split.png"
    proc = run_script("time_split", study_copy(raw_records, tmp_path / "tiny"), "--out", out)
    assert_wrote_png(proc, out)
    table = printed_table(proc)
    for model in ("mlp", "cnn"):
        ring = table[(table["workload"] == model) & table["label"].str.startswith("ring")].iloc[0]
        assert ring["compute_ms"] == pytest.approx(
            1000 * mean_of(raw_records, model, "ring", 32, "compute_s_median"), abs=6e-4
        )
        assert ring["exposed_comm_ms"] == pytest.approx(
            1000 * mean_of(raw_records, model, "ring", 32, "exposed_comm_s"), abs=6e-4
        )
        assert ring["step_ms"] == pytest.approx(
            1000 * mean_of(raw_records, model, "ring", 32, "step_s_median"), abs=6e-4
        )
        # one process communicates nothing: its step beyond compute (if any: compute is timed on
        # probe steps, which can be slower than the median step) is "other"
        single = table[(table["workload"] == model) & table["label"].str.startswith("single")]
        batch = int(single["config"].iat[0].rsplit("=", 1)[1])  # the fastest of 32 and 64
        step, compute = (
            mean_of(raw_records, model, "single", batch, field)
            for field in ("step_s_median", "compute_s_median")
        )
        assert single["exposed_comm_ms"].iat[0] == 0
        assert single["other_ms"].iat[0] == pytest.approx(1000 * max(step - compute, 0), abs=6e-4)
    parts = table["compute_ms"] + table["exposed_comm_ms"] + table["other_ms"]
    assert np.all(parts >= table["step_ms"] - 0.002)  # the parts make up the measured step


def test_compare_studies_of_one_study_with_itself_gives_ratios_of_one(real_study, tmp_path):
    out = tmp_path / "same.png"
    proc = run_script("compare_studies", real_study, real_study, "--out", out)
    assert_wrote_png(proc, out)
    table = printed_table(proc, dtype=str)
    assert len(table) == 6  # 2 workloads × 3 configurations
    assert set(table["ratio"]) == {"1.00"}
    assert set(table["reps_a"]) == set(table["reps_b"]) == {"2"}
    assert not (real_study / "figures").exists()


def test_ps_placement_draws_each_placement_with_its_interval(tmp_path):
    study = study_copy(ps_records(), tmp_path / "ps")
    out = tmp_path / "placement.png"
    proc = run_script("ps_placement", study, "--out", out)
    assert_wrote_png(proc, out)
    table = printed_table(proc)
    assert len(table) == len(PS_RATES)
    assert set(table["sync_mode"]) == {"sync"}
    for row in table.itertuples():
        rates = PS_RATES[(row.placement, int(row.workers))]
        assert row.samples_per_s == pytest.approx(np.mean(rates), abs=0.06)
        assert row.ci95 == pytest.approx(ci95(rates), abs=0.06)
    # dedicated, co-located, one host: the order the bars are drawn in
    assert list(table[table["workers"] == 2]["placement"]) == ["dedicated", "colocated", "one-host"]


# --- bad input ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(raw_records, tmp_path_factory) -> Path:
    """Studies the figures cannot be drawn from, each in a folder of its own."""
    root = tmp_path_factory.mktemp("bad-inputs")
    failed = [report_records.as_failed(r, "failed", "crash") for r in raw_records]
    study_copy(failed, root / "failed")
    study_copy([r for r in raw_records if r["config"]["arch"] == "single"], root / "single-only")
    study_copy([minimal_record("m1", 0.01), minimal_record("m2", 0.02)], root / "untimed")
    study_copy(raw_records, root / "tiny")
    study_copy(ps_records(), root / "ps")
    return root


BAD: list[tuple[str, Callable[[Path], list[Path]], str]] = [
    *[
        (name, lambda root: [root / "nowhere"], "no such file or folder")
        for name in ("throughput_vs_workers", "ps_placement", "time_split")
    ],  # fmt: skip
    *[
        (name, lambda root: [root / "failed"], "no finished runs")
        for name in ("throughput_vs_workers", "ps_placement", "time_split")
    ],  # fmt: skip
    ("throughput_vs_workers", lambda root: [root / "single-only"], "multi-process architecture"),
    ("time_split", lambda root: [root / "untimed"], "recorded compute and exposed communication"),
    ("ps_placement", lambda root: [root / "tiny"], "needs PS runs with at least two placements"),
    ("compare_studies", lambda root: [root / "nowhere", root / "tiny"], "no such file or folder"),
    ("compare_studies", lambda root: [root / "tiny", root / "failed"], "no finished runs"),
    ("compare_studies", lambda root: [root / "tiny", root / "ps"], "no configuration"),
]


@pytest.mark.parametrize(("script", "studies", "says"), BAD, ids=[f"{s}-{w}" for s, _, w in BAD])
def test_bad_input_ends_with_one_line_and_exit_2_writing_nothing(inputs, script, studies, says):
    before = sorted(inputs.rglob("*"))
    proc = run_script(script, *studies(inputs))
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert lines[0].startswith(f"{script}.py: ")
    assert proc.stdout == ""
    assert sorted(inputs.rglob("*")) == before


def test_each_script_says_how_to_adapt_it_and_the_readme_lists_it():
    readme = (SCRIPTS / "README.md").read_text()
    for script in sorted(SCRIPTS.glob("*.py")):
        proc = run_script(script.stem, "--help")
        assert proc.returncode == 0 and "--out" in proc.stdout, script
        assert "To adapt" in script.read_text(), script
        assert f"python analysis/{script.name}" in readme, script


def test_scripts_fit_a_screen():
    for script in sorted(SCRIPTS.glob("*.py")):
        code = script.read_text().split('"""', 2)[2]  # after the module docstring
        lines = [line for line in code.splitlines() if line.strip()]
        assert len(lines) <= 80, f"{script.name}: {len(lines)} lines"


def test_copy_of_a_script_runs_from_anywhere(tmp_path, raw_records):
    # a user's copy outside the repository: the library is all it needs
    mine = tmp_path / "mine.py"
    shutil.copy(SCRIPTS / "throughput_vs_workers.py", mine)
    study = study_copy(raw_records, tmp_path / "tiny")
    proc = subprocess.run(
        [sys.executable, str(mine), str(study)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert_wrote_png(proc, study / "figures" / "mine.png")
