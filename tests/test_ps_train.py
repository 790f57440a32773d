"""Parameter-server training under mpirun: real gRPC servers, real processes.

Two runs of 2 servers + 2 workers (`mpirun -np 4 --num-ps 2`), one per sharding and mode:
- synchronous with balanced sharding must end with the parameters and loss of `single` with
  the global batch (the sync semantics), with the mlp's first kernel cut across both servers;
- asynchronous with round-robin sharding must apply every worker's update (global step =
  workers x steps), keep momentum on the workers, and record the staleness it saw and the
  imbalance of the placement.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import run_train

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

STEPS = 50
COMMON = ["--model", "mlp", "--dataset", "fashion_mnist", "--seed", "7", "--eval-samples", "2000"]
TOLERANCE = 1e-4


def finished(proc, records) -> dict:
    tail = (proc.stdout[-2000:] + proc.stderr[-2000:]).strip()
    assert proc.returncode == 0, tail
    assert len(records) == 1 and records[0]["status"] == "ok", tail
    return records[0]


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


def assert_ps_cluster(record: dict, servers: int, workers: int) -> None:
    cluster = record["cluster"]
    assert cluster["roles"] == ["ps"] * servers + ["chief"] + ["worker"] * (workers - 1)
    assert len(cluster["hosts"]) == servers + workers and all(cluster["hosts"])
    assert (cluster["num_ps"], cluster["num_workers"]) == (servers, workers)
    spec = record["comm"]["ps"]["cluster_spec"]
    assert len(spec["ps"]) == servers and len(spec["worker"]) == workers
    assert len(set(spec["ps"] + spec["worker"])) == servers + workers  # a port per task
    assert record["config"]["controller"] == "grpc"


def test_sync_with_balanced_sharding_matches_single(tmp_path):
    single = finished(
        *run_train(
            [*COMMON, "--arch", "single", "--batch-size", "64", "--steps", str(STEPS)],
            out=tmp_path / "single.jsonl",
        )
    )
    ps = finished(
        *run_train(
            [*COMMON, "--arch", "ps", "--num-ps", "2", "--sync", "--ps-sharding", "balanced"]
            + ["--batch-size", "32", "--steps", str(STEPS)],
            out=tmp_path / "ps.jsonl",
            launcher="mpirun",
            np=4,
        )
    )
    assert_ps_cluster(ps, servers=2, workers=2)
    assert ps["config"]["global_batch_size"] == 64 and ps["config"]["sync"] == "sync"
    for key in ("param_norm", "final_loss"):
        assert relative(ps["result"][key], single["result"][key]) <= TOLERANCE, key

    facts = ps["comm"]["ps"]
    held = facts["bytes_held_per_server"]
    assert max(held) <= 1.2 * min(held), held
    assert sum(held) == ps["model_stats"]["param_bytes"]
    assert facts["sharding"]["partitioned_variables"] == ["hidden/kernel:0"]
    # exactly one aggregated update per step, and nobody ever computed on stale parameters
    assert facts["global_step"] == STEPS
    assert facts["steps_per_worker"] == {"0": STEPS, "1": STEPS}
    assert facts["staleness"]["max"] == 0 and facts["staleness"]["updates"] == 2 * STEPS
    assert facts["bytes_served_per_server_per_step"] == [2 * b for b in held]
    assert facts["momentum_on"] == "servers" and facts["optimizer_bytes_per_server"] == held
    assert ps["comm"]["bytes_sent_per_step"] == ps["model_stats"]["param_bytes"]
    timing = ps["timing"]
    assert timing["compute_s_median"] > 0 and timing["comm_s_median"] > 0
    # each worker timed its engine's call with nothing to compute; servers compute nothing
    computes, calls = timing["compute_s_median_per_rank"], timing["dispatch_s_per_rank"]
    assert [c is None for c in calls] == [c is None for c in computes]
    assert all(call > 0 for call in calls if call is not None)


def test_async_with_round_robin_applies_every_update_and_records_staleness(tmp_path):
    steps = 100
    ps = finished(
        *run_train(
            [*COMMON, "--arch", "ps", "--num-ps", "2", "--async", "--ps-sharding", "round-robin"]
            + ["--batch-size", "32", "--steps", str(steps)],
            out=tmp_path / "ps.jsonl",
            launcher="mpirun",
            np=4,
        )
    )
    assert_ps_cluster(ps, servers=2, workers=2)
    assert ps["config"]["sync"] == "async" and ps["config"]["ps_sharding"] == "round-robin"
    facts = ps["comm"]["ps"]
    assert facts["global_step"] == 2 * steps  # every worker's every update was applied
    assert facts["momentum_on"] == "workers" and facts["update_lr"] == 0.05 / 2
    assert facts["optimizer_bytes_per_server"] == [0, 0]
    staleness = facts["staleness"]
    assert staleness["updates"] == 2 * steps
    assert sum(staleness["histogram"].values()) == 2 * steps
    assert 0 <= staleness["median"] <= staleness["max"]
    # round-robin puts both kernels on server 0 and both biases on server 1, whole
    sharding = facts["sharding"]
    assert [s["ps"] for s in sharding["shards"]] == [0, 1, 0, 1]
    assert sharding["partitioned_variables"] == []
    assert sharding["imbalance"] > 100
    assert ps["result"]["test_accuracy"] > 0.4  # it learned (chance is 0.1)
