"""`archbench microbench` for real on localhost: 2 MPI ranks, Horovod, a TensorFlow server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixture import emulated_cluster

from archbench.cli import main
from archbench.perfmodel.measure.calibration import load_calibration

__all__ = ["emulated_cluster"]  # the session fixture

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
        "pt2pt", "allreduce_mpi", "allreduce_horovod", "ps_push", "ps_pull", "ps_accumulate",
        "ps_update", "ps_requests", "compute", "alpha_beta",
    }  # fmt: skip
    # real time on localhost (D = 1), and the kind of cluster measured
    assert {r.get("dilation") for r in records if r["bench"] != "alpha_beta"} == {1.0}
    assert {r["fingerprint"]["emulated"] for r in records} == {False}
    # Horovod is timed with the ring trainer's default MPI allreduce, the ring
    assert {(r["setting"], r["algorithm"]) for r in by_bench["allreduce_horovod"]} == {
        ("ring", "mpi:ring")
    }
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
    for bench in ("ps_push", "ps_pull", "ps_accumulate", "ps_update"):
        assert {r["size_bytes"] for r in by_bench[bench]} == {8, 65536}
        assert all(r["time_s"] > 0 for r in by_bench[bench])
    # a push and a pull of n tiny variables: 2n tensor requests
    assert sorted(r["requests"] for r in by_bench["ps_requests"]) == [2, 16, 64, 192]
    compute = {r["batch_size"]: r for r in by_bench["compute"]}
    assert set(compute) == {16, 64} and all(r["model"] == "mlp" for r in compute.values())
    assert all(r["compute_s_median"] > 0 for r in compute.values())
    # the records calibrate the model: alpha/beta within the host, a compute line for mlp
    calib = load_calibration(out)
    assert calib.intra.beta_s_per_byte > 0 and "mlp" in calib.compute
    # the server's own costs: measured, not the defaults
    assert {"ps_request_s", "ps_accumulate_s_per_byte", "ps_apply_s_per_byte"} <= set(
        calib.measured
    )
    assert calib.ps_request_s > 0
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


@pytest.mark.timeout(300)
def test_microbench_calibrates_a_study_once_per_kind_of_cluster(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "study: tiny\ncluster: {kind: localhost, slots: 2}\n"
        "fixed: {dataset: fashion_mnist, model: mlp, batch_size: 16, steps: 8}\n"
        "factors: {arch: [ring, p2p], workers: [2]}\n"
    )
    argv = ["microbench", "--study", str(spec), "--benches", "ps", "--sizes", "8,64K",
            "--seconds-per-size", "0.05"]  # fmt: skip
    assert main(argv) == 0
    out = tmp_path / "tiny" / "calibration.jsonl"
    first = _records(out)
    assert {r["bench"] for r in first} >= {"ps_requests", "ps_update"}
    # the same kind of cluster: reused, nothing measured again
    capsys.readouterr()
    assert main(argv) == 0
    assert "reusing it" in capsys.readouterr().out
    assert _records(out) == first


@pytest.mark.timeout(600)
def test_microbench_on_a_dilated_cluster_reports_virtual_time(emulated_cluster, tmp_path) -> None:
    from archbench.cluster.state import load_state

    state = load_state(emulated_cluster.name)
    if not state.dilation:
        pytest.skip("the test cluster runs without time dilation")
    out = tmp_path / "results.jsonl"
    nodes = ",".join(emulated_cluster.nodes[:2])
    assert main(["microbench", "-H", nodes, "--benches", "pt2pt,ps,compute", "--sizes", "8,64K",
                 "--seconds-per-size", "0.05", "--models", "mlp", "--batch-sizes", "16",
                 "--compute-steps", "2", "--compute-sharing", "1",
                 "--out", str(out)]) == 0  # fmt: skip
    records = _records(out)
    # compute is timed as the training loop's probes time it: passes repeated over ten of the
    # caps' CFS periods, not one pass that runs at full speed or stalls for most of a period
    (compute,) = [r for r in records if r["bench"] == "compute"]
    period_s = state.cfs_period_us / 1e6
    assert compute["compute_window_s"] == pytest.approx(10 * period_s / state.dilation)
    assert compute["compute_passes_median"] >= 2
    # every rank divided its timings by the node's D, and says so
    assert {r.get("dilation") for r in records if r["bench"] != "alpha_beta"} == {state.dilation}
    fingerprint = records[0]["fingerprint"]
    assert fingerprint["emulated"] and fingerprint["dilation"] == state.dilation
    assert {r["link"] for r in records if r["bench"] == "pt2pt" and r["scope"] == "inter"} == {
        state.bandwidth.text
    }
    calib = load_calibration(out, cluster=fingerprint)
    assert calib.inter is not None and "ps_request_s" in calib.measured
    # measured on a shaped link: the links' efficiency is the calibration's, never fitted
    assert "link_efficiency" in calib.measured


def test_what_runs_before_each_timed_call_is_left_out_of_its_time(monkeypatch) -> None:
    from archbench.perfmodel.measure import mb_ranks

    clock = [0.0]
    events: list[str] = []
    monkeypatch.setattr(mb_ranks.time, "perf_counter", lambda: clock[0])

    def wait() -> None:  # the random fraction of Horovod's cycle
        events.append("wait")
        clock[0] += 1.0

    def call() -> None:
        events.append("call")
        clock[0] += 0.002

    class OneRank:
        def bcast(self, value, root):
            return value

    times, iterations = mb_ranks._timed(call, OneRank(), budget_s=0.0, before=wait)
    calls = mb_ranks.WARMUP + mb_ranks.TRIALS + iterations
    assert iterations == mb_ranks.MIN_ITERATIONS and events == ["wait", "call"] * calls
    assert times == pytest.approx([0.002] * iterations)
    # the same fractions on every rank: a rank's sequence of waits is fixed by the seed
    first, second = (mb_ranks.random.Random(mb_ranks.CYCLE_PHASE_SEED).random() for _ in range(2))
    assert first == second and 0.0 <= first < 1.0
