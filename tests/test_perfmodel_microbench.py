"""`archbench microbench` for real on localhost: 2 MPI ranks, Horovod, a TensorFlow server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.cli import main
from archbench.perfmodel.measure.calibration import load_calibration

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(300)
def test_microbench_on_localhost_with_two_ranks(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mb" / "results.jsonl"
    status = main([
        "microbench", "-H", "localhost:2", "--sizes", "8,64K", "--seconds-per-size", "0.05",
        "--benches", "pt2pt,allreduce,horovod,ps,compute", "--models", "mlp",
        "--batch-sizes", "16,64", "--compute-steps", "3", "--out", str(out),
    ])  # fmt: skip
    assert status == 0
    records = _records(out)
    assert all(r["kind"] == "microbench" and r["status"] == "ok" for r in records)
    assert len({r["run_id"] for r in records}) == 1
    by_bench: dict[str, list[dict]] = {}
    for record in records:
        by_bench.setdefault(record["bench"], []).append(record)
    assert set(by_bench) == {
        "pt2pt", "allreduce_mpi", "allreduce_horovod", "ps_push", "ps_pull", "compute", "alpha_beta",
    }  # fmt: skip
    pt2pt = sorted(by_bench["pt2pt"], key=lambda r: r["size_bytes"])
    assert [r["size_bytes"] for r in pt2pt] == [8, 65536]
    # a 64 KiB message takes longer than 8 bytes, and moves more bytes per second
    assert pt2pt[1]["one_way_s"] > pt2pt[0]["one_way_s"]
    assert pt2pt[1]["bandwidth_Bps"] > pt2pt[0]["bandwidth_Bps"]
    for bench in ("allreduce_mpi", "allreduce_horovod"):
        for row in by_bench[bench]:
            assert row["ranks"] == 2
            assert row["algbw_Bps"] == pytest.approx(row["size_bytes"] / row["time_s"])
            assert row["busbw_Bps"] == pytest.approx(row["algbw_Bps"] * 2 * (2 - 1) / 2)
    for bench in ("ps_push", "ps_pull"):
        assert {r["size_bytes"] for r in by_bench[bench]} == {8, 65536}
        assert all(r["time_s"] > 0 for r in by_bench[bench])
    compute = {r["batch_size"]: r for r in by_bench["compute"]}
    assert set(compute) == {16, 64} and all(r["model"] == "mlp" for r in compute.values())
    assert all(r["compute_s_median"] > 0 for r in compute.values())
    # the records calibrate the model: alpha/beta within the host, a compute line for mlp
    calib = load_calibration(out)
    assert calib.intra.beta_s_per_byte > 0 and "mlp" in calib.compute
    table = capsys.readouterr().out
    assert "pt2pt (intra" in table and "busbw" in table
    # nothing of ours is left running
    leftovers = subprocess.run(
        ["pgrep", "-f", "archbench.perfmodel.measure.mb_ranks"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "8,big"], "cannot read message size"),
    (["--benches", "pt2pt,warp"], "unknown bench"),
    (["-H", "node1:x"], "cannot read host"),
    (["--benches", "compute", "--models", "nosuchnet"], "unknown model"),
])  # fmt: skip
def test_bad_input_is_one_line_status_2_nothing_written(tmp_path: Path, argv, message) -> None:
    out = tmp_path / "results.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "microbench", *argv, "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
