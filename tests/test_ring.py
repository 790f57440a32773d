"""Horovod ring-allreduce under the launchers users type: horovodrun (MPI, Gloo) and mpirun."""

from __future__ import annotations

import pytest

from archbench.record import missing_keys

LAUNCHERS = ["horovodrun", "horovodrun-gloo", "mpirun"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_ring_one_epoch_reaches_accuracy_with_a_complete_record(train, tmp_path, launcher):
    out = tmp_path / "r.jsonl"
    proc, records = train(
        ["--arch", "ring", "--model", "mlp", "--dataset", "fashion_mnist", "--epochs", "1"],
        out=out,
        launcher=launcher,
        np=2,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(records) == 1, "only the chief writes"
    record = records[0]
    assert missing_keys(record) == []
    assert record["status"] == "ok" and record["error"] is None
    assert record["result"]["test_accuracy"] > 0.80
    cluster = record["cluster"]
    assert cluster["world_size"] == 2 and cluster["num_workers"] == 2
    assert cluster["roles"] == ["chief", "worker"] and len(cluster["hosts"]) == 2
    expected_launcher = "mpirun" if launcher == "mpirun" else "horovodrun"
    assert cluster["launcher"] == expected_launcher
    assert record["config"]["controller"] == ("gloo" if launcher == "horovodrun-gloo" else "mpi")
    assert record["config"]["global_batch_size"] == 64
    # After training, every rank holds exactly the same parameters.
    digests = record["result"]["param_digest_per_rank"]
    assert len(digests) == 2 and digests[0] == digests[1]
    # Analytic ring traffic: 2(W-1)/W of the gradient bytes per worker per step.
    assert record["comm"]["bytes_sent_per_step"] == record["model_stats"]["param_bytes"]


def test_ring_fp16_compression_and_fusion_settings_are_recorded(train, tmp_path):
    out = tmp_path / "r.jsonl"
    proc, records = train(
        [
            "--arch",
            "ring",
            "--steps",
            "40",
            "--compression",
            "fp16",
            "--fusion-threshold-mb",
            "8",
            "--cycle-time-ms",
            "2",
            "--eval-samples",
            "1000",
        ],
        out=out,
        launcher="mpirun",
        np=2,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = records[0]
    assert record["config"]["compression"] == "fp16"
    assert record["config"]["fusion_threshold_mb"] == 8 and record["config"]["cycle_time_ms"] == 2
    assert record["comm"]["bytes_sent_per_step"] == record["model_stats"]["param_bytes"] // 2
    digests = record["result"]["param_digest_per_rank"]
    assert digests[0] == digests[1]
