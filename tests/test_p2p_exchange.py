"""The p2p exchange on numpy buffers under real mpirun, through the benchmark's --verify mode:
the average must equal the rank-order sum / W bit for bit on every rank, the collective pair must
agree with it, and the bytes counted from the messages must equal the shard plan's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, launch_env

from archbench.p2p.shards import ShardPlan

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")


def run_benchmark(np: int, *args: str) -> dict:
    command = ["mpirun", "-np", str(np), "--oversubscribe", sys.executable]
    command += ["benchmarks/p2p_exchange.py", "--verify", "--json", *args]
    proc = subprocess.run(
        command, cwd=REPO, env=launch_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


@pytest.mark.parametrize(
    "np,elements,schedule",
    [(2, 1000, "staggered"), (3, 1001, "naive"), (3, 1001, "staggered"), (3, 2, "staggered")],
)
def test_exchange_averages_exactly_and_counts_the_plan_bytes(np, elements, schedule):
    result = run_benchmark(
        np, "--elements", str(elements), "--repeats", "3", "--warmup", "1", "--schedule", schedule
    )
    assert result["problems"] == [] and result["verified"] is True
    assert result["workers"] == np and result["schedule"] == schedule
    plan = ShardPlan(elements, np)
    assert result["bytes_sent_rank0"] == plan.bytes_sent_per_step(0)
    assert result["bytes_received_rank0"] == plan.bytes_received_per_step(0)
    assert result["p2p"]["median_s"] > 0 and result["collective"]["median_s"] > 0


def test_benchmark_rejects_a_non_positive_size():
    command = ["mpirun", "-np", "2", sys.executable, "benchmarks/p2p_exchange.py"]
    proc = subprocess.run(
        [*command, "--elements", "0"],
        cwd=REPO,
        env=launch_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "--elements must be positive" in proc.stderr


@pytest.mark.parametrize(
    "elements,share,encoding,back",
    [
        (1001, "0.01", "single", "sparse"),  # top-k: few entries, they travel back sparse
        (1001, "0.6", "single", "dense"),  # most entries selected: dense is fewer bytes
        (4000, "0.02", "runs", "sparse"),  # touched rows as index runs, both ways
    ],
)
def test_sparse_exchange_returns_the_average_bit_for_bit_in_the_smaller_encoding(
    elements, share, encoding, back
):
    command = ["mpirun", "-np", "3", "--oversubscribe", sys.executable]
    command += ["tests/mpi_sparse_exchange.py", str(elements), share, encoding]
    proc = subprocess.run(
        command, cwd=REPO, env=launch_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 1, proc.stdout
    ranks = json.loads(lines[0])
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2]
    assert [r["problems"] for r in ranks] == [[], [], []]
    # three steps a rank: every return dense, or none
    assert {r["dense_returns"] for r in ranks} == ({3} if back == "dense" else {0})
