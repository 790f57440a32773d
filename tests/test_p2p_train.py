"""`--arch p2p` end to end under the launchers users type: real mpirun / horovodrun, real MPI.

Three workers (uneven shards, both send schedules) are checked in tests/test_equivalence.py,
which already runs p2p with W = 3.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO, launch_env, run_train
from record_files import read_records

from archbench.record import missing_keys
from archbench.runtime.mpitransport import FULL_DUPLEX_TCP_FLAGS

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

SHORT_RUN = ["--arch", "p2p", "--model", "mlp", "--steps", "30", "--eval-samples", "1000"]


def test_p2p_one_epoch_reaches_accuracy_with_a_complete_record(tmp_path):
    out = tmp_path / "p2p.jsonl"
    proc, records = run_train(
        ["--arch", "p2p", "--model", "mlp", "--dataset", "fashion_mnist", "--epochs", "1"],
        out=out,
        launcher="mpirun",
        np=2,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(records) == 1, "only the chief writes"
    record = records[0]
    assert missing_keys(record) == []
    assert record["status"] == "ok" and record["error"] is None
    assert record["result"]["test_accuracy"] > 0.80
    assert record["cluster"]["launcher"] == "mpirun"
    assert record["cluster"]["roles"] == ["chief", "worker"]
    assert record["config"]["controller"] == "mpi"
    # Open MPI's TCP transport as archbench starts it: both directions of a link at once
    assert record["env"]["mpi_transport"] == {
        "btl_tcp_flags": FULL_DUPLEX_TCP_FLAGS,
        "set_by": "archbench",
    }
    assert record["config"]["p2p_schedule"] == "staggered"
    assert record["comm"]["p2p_schedule"] == "staggered"
    digests = record["result"]["param_digest_per_rank"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert record["comm"]["params_identical_across_ranks"] is True
    timing = record["timing"]
    assert timing["compute_s_median"] > 0 and timing["comm_s_median"] > 0
    # each worker timed its engine's call with nothing to compute; servers compute nothing
    computes, calls = timing["compute_s_median_per_rank"], timing["dispatch_s_per_rank"]
    assert [c is None for c in calls] == [c is None for c in computes]
    assert all(call > 0 for call in calls if call is not None)
    # Measured bytes = the analytic count: (W-1)/W of the gradient bytes plus (W-1)/W of the
    # parameter bytes; with W = 2 and an even parameter count that is exactly param_bytes.
    param_bytes = record["model_stats"]["param_bytes"]
    assert param_bytes % 8 == 0
    comm = record["comm"]
    assert comm["bytes_sent_per_step"] == param_bytes
    assert comm["bytes_received_per_step"] == param_bytes
    assert comm["bytes_sent_per_step_per_rank"] == [param_bytes, param_bytes]
    steps = record["config"]["steps_run"]
    assert steps == 60000 // 64
    assert comm["bytes_total"] == param_bytes * steps
    owners = comm["shard_plan"]["owners"]
    assert [o["bytes"] for o in owners] == [param_bytes // 2, param_bytes // 2]


def test_p2p_runs_under_horovodrun_with_mpi(tmp_path):
    out = tmp_path / "p2p.jsonl"
    proc, records = run_train(SHORT_RUN, out=out, launcher="horovodrun", np=2)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = records[0]
    assert record["status"] == "ok"
    assert record["cluster"]["launcher"] == "horovodrun"
    assert record["config"]["controller"] == "mpi"
    assert record["comm"]["bytes_sent_per_step"] == record["model_stats"]["param_bytes"]


def test_p2p_under_horovodrun_gloo_fails_with_one_clear_line_and_no_record(tmp_path):
    out = tmp_path / "p2p.jsonl"
    proc, records = run_train(SHORT_RUN, out=out, launcher="horovodrun-gloo", np=2)
    assert proc.returncode != 0
    errors = [
        line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if "error:" in line
    ]
    assert len(errors) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "--arch p2p" in errors[0] and "--gloo" in errors[0] and "mpirun" in errors[0]
    assert "exit with status code 2" in proc.stdout + proc.stderr
    assert records == [] and not out.exists()


def test_transport_flags_the_launch_sets_are_kept_and_recorded(tmp_path):
    """`mpirun --mca btl_tcp_flags ...` (here Open MPI's own default) wins over archbench's."""
    out = tmp_path / "p2p.jsonl"
    open_mpi_default = "send,put,inplace,need-ack,need-csum,hetero-rdma"
    command = ["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl_tcp_flags", open_mpi_default]
    command += [sys.executable, "-m", "archbench.train", *SHORT_RUN, "--out", str(out)]
    proc = subprocess.run(
        command, cwd=REPO, env=launch_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (record,) = read_records(out)
    assert record["env"]["mpi_transport"] == {"btl_tcp_flags": open_mpi_default, "set_by": "launch"}
