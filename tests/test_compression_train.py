"""Compressed exchanges end to end under mpirun, mlp for 20 steps: each run trains (finite loss,
below chance) and sends the bytes its method says, far fewer than the dense exchange.

mlp has N = 101,770 parameters (407,080 bytes); at --compression-ratio 0.01 a worker keeps
k = ceil(1017.7) = 1018 entries per step. With W = 2 the dense ring sends 2(W-1)/W x 407,080 =
407,080 bytes per worker per step. Four runs: ring top-k, ring PowerSGD, p2p top-k (with a
error feedback, no warm-up), synchronous ps top-k; the warm-up's schedule is checked in
tests/test_compression.py. p2p's owners send back the averaged gradient at the selected entries,
and every worker updates its whole replica: with every entry kept, that is the dense exchange's
update bit for bit.
"""

from __future__ import annotations

import math
import shutil

import pytest
from conftest import run_train

from archbench.compression import CompressionSpec

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

N, PARAM_BYTES, K = 101_770, 407_080, 1018
SHORT = ["--model", "mlp", "--steps", "20", "--eval-samples", "1000", "--seed", "3"]


def run(tmp_path, np: int, *args: str) -> dict:
    out = tmp_path / f"{'-'.join(args)}.jsonl"
    proc, records = run_train([*SHORT, *args], out=out, launcher="mpirun", np=np)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(records) == 1
    record = records[0]
    assert record["status"] == "ok" and record["model_stats"]["param_bytes"] == PARAM_BYTES
    loss = record["result"]["final_loss"]
    assert math.isfinite(loss) and loss < math.log(10), "trains: below the loss of chance"
    return record


def test_ring_topk_allgathers_k_values_and_indices(tmp_path):
    record = run(tmp_path, 2, "--arch", "ring", "--compression", "topk")
    comm = record["comm"]
    # one allgather block of 1018 float32 values and 1018 int32 indices per step
    assert comm["bytes_sent_per_step"] == K * 8 == 8144
    assert comm["bytes_total"] == 8144 * 20
    compression = comm["compression"]
    assert compression["method"] == "topk" and compression["ratio"] == 0.01
    assert compression["error_feedback"] is True and compression["kept_per_step"] == K
    assert compression["dense_bytes_per_step"] == PARAM_BYTES
    assert compression["achieved_ratio"] == pytest.approx(PARAM_BYTES / 8144)  # 49.98
    assert PARAM_BYTES / comm["bytes_sent_per_step"] >= 20
    digests = record["result"]["param_digest_per_rank"]
    assert digests[0] == digests[1]


def test_ring_powersgd_allreduces_rank_two_factors(tmp_path):
    record = run(tmp_path, 2, "--arch", "ring", "--compression", "powersgd")
    comm = record["comm"]
    # P: 784x2 + 128x2, Q: 128x2 + 10x2, biases dense: 138 -> 2,238 float32; 2(W-1)/W = 1
    assert comm["compression"]["factors"] == {
        "p_elements": 1824,
        "q_elements": 276,
        "dense_elements": 138,
    }
    assert comm["bytes_sent_per_step"] == 2238 * 4 == 8952
    assert comm["compression"]["rank"] == 2 and comm["compression"]["compressed_matrices"] == 2
    assert PARAM_BYTES / comm["bytes_sent_per_step"] >= 20
    digests = record["result"]["param_digest_per_rank"]
    assert digests[0] == digests[1]


def test_p2p_topk_sends_each_owner_its_entries_and_gets_the_average_back_sparse(tmp_path):
    record = run(tmp_path, 2, "--arch", "p2p", "--compression", "topk")
    comm = record["comm"]
    compression = comm["compression"]
    kept = CompressionSpec("topk", ratio=0.01).kept_total(20, N)
    assert kept == 20 * K and compression["kept_total"] == kept
    # every kept entry either went to the other owner (8 bytes) or stayed in the own shard
    sent, own = (
        compression["gradient_bytes_sent_total_per_rank"],
        compression["own_shard_entries_total_per_rank"],
    )
    assert [s + 8 * o for s, o in zip(sent, own)] == [8 * kept, 8 * kept]
    # the owner sends back the average at the entries either worker selected, 8 bytes each:
    # at most both workers' entries in its shard, and never the dense shard here
    shard = PARAM_BYTES // 2
    assert compression["dense_returns_per_rank"] == [0, 0]
    returned = compression["returned_entries_per_step_per_rank"][0]  # rank 0 writes the record
    assert compression["return_bytes_sent_per_step"] == pytest.approx(8 * returned, abs=1)
    assert 0 < returned <= 2 * K
    assert comm["bytes_sent_per_step"] == (
        compression["gradient_bytes_sent_per_step"] + compression["return_bytes_sent_per_step"]
    )
    assert compression["dense_bytes_per_step"] == 2 * shard == PARAM_BYTES
    assert compression["achieved_ratio"] >= 20 and PARAM_BYTES / comm["bytes_sent_per_step"] >= 20
    assert comm["params_identical_across_ranks"] is True


def test_p2p_topk_keeping_every_entry_is_the_dense_update_bit_for_bit(tmp_path):
    """Every worker updating its whole replica from the returned average gives the bits of the
    owners updating their shards (the dense exchange): the same float32 operations."""
    dense = run(tmp_path, 2, "--arch", "p2p")
    every = run(
        tmp_path, 2, "--arch", "p2p", "--compression", "topk", "--compression-ratio", "1",
        "--error-feedback", "off",
    )  # fmt: skip
    for key in ("param_digest_per_rank", "final_loss", "test_accuracy"):
        assert every["result"][key] == dense["result"][key], key
    # everything selected: the average goes back dense, as many bytes as the parameters
    assert every["comm"]["compression"]["dense_returns_per_rank"] == [20, 20]
    assert every["comm"]["compression"]["return_bytes_sent_per_step"] == PARAM_BYTES // 2


def test_ps_topk_pushes_values_and_int64_indices(tmp_path):
    record = run(tmp_path, 3, "--arch", "ps", "--num-ps", "1", "--sync", "--compression", "topk")
    comm = record["comm"]
    # 1018 float32 values and int64 indices pushed, the parameters pulled dense
    assert comm["bytes_sent_per_step"] == K * 12 == 12216
    assert comm["bytes_received_per_step"] == PARAM_BYTES
    assert comm["compression"]["achieved_ratio"] == pytest.approx(PARAM_BYTES / 12216)
    assert PARAM_BYTES / comm["bytes_sent_per_step"] >= 20
