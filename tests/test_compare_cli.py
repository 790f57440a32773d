"""`archbench compare A.jsonl B.jsonl`: one line per run and per configuration, with speed-ups
that equal those computed here from the raw records."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import report_records
from conftest import REPO, launch_env
from record_files import read_records, write_records


@pytest.fixture(scope="session")
def real_study(tmp_path_factory) -> Path:
    return report_records.real_study(tmp_path_factory.mktemp("report-study"))


def compare(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "compare", *map(str, files)],
        cwd=REPO,
        env=launch_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def summary_lines(output: str) -> list[str]:
    """The second table (one line per configuration), without its header and rule."""
    tables = output.split("\n\n")
    return tables[1].splitlines()[2:]


def test_compare_two_files_prints_every_run_and_the_speedup_against_single(real_study, tmp_path):
    records = read_records(real_study / "results.jsonl")
    single = write_records(
        tmp_path / "single.jsonl", [r for r in records if r["config"]["arch"] == "single"]
    )
    ring = write_records(
        tmp_path / "ring.jsonl", [r for r in records if r["config"]["arch"] == "ring"]
    )
    proc = compare(single, ring)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for record in records:
        assert record["run_id"] in proc.stdout
    lines = summary_lines(proc.stdout)
    assert len(lines) == 6  # 2 workloads × 3 configurations
    for model in ("mlp", "cnn"):
        throughput = {
            arch: np.mean(
                [
                    r["timing"]["samples_per_s"]
                    for r in records
                    if r["config"]["model"] == model
                    and r["config"]["arch"] == arch
                    and r["config"]["batch_size"] == 32
                ]
            )
            for arch in ("single", "ring")
        }
        line = next(
            line for line in lines if line.startswith(model) and "arch=ring batch_size=32" in line
        )
        assert "2/2" in line
        printed = float(re.search(r"([\d.,]+)×", line).group(1).replace(",", ""))
        expected = throughput["ring"] / throughput["single"]
        assert printed == pytest.approx(expected, rel=0.006)  # printed to 3 significant digits


def test_compare_counts_failed_runs_and_rejects_missing_files(real_study, tmp_path):
    records = read_records(real_study / "results.jsonl")[:3]
    failed = report_records.as_failed(records[0], "failed", "crash")
    path = write_records(tmp_path / "mixed.jsonl", [*records, failed])
    proc = compare(path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(rf"{failed['run_id']}\s+failed", proc.stdout)
    assert "1 of 4 runs did not finish (1 failed)" in proc.stdout

    missing = compare(path, tmp_path / "absent.jsonl")
    assert missing.returncode == 2
    assert missing.stdout == "" and "no such records file" in missing.stderr
