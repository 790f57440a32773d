"""Sparse models on every architecture, with real engines: the word model over a small corpus
this test writes, 2 workers, a few dozen steps.

- Sparse exchange applies the same updates as dense: `single` with batch 2b, `ps` dense and
  sparse, `ring` sparse (Horovod's allgather) and `p2p` sparse end with the same parameters and
  loss (1e-4 relative); `ps` and `p2p` sparse are the dense run's parameters bit for bit.
- The bytes follow from what travelled: ps sparse pushes and pulls the rows it counted (row +
  int64 index each), far fewer bytes than dense; ring gathers one row per token of each worker.
- Partitioning: after a METIS data partition, placing rows by use instead of round-robin moves
  no update (the same parameters) but sends less of each worker's row traffic to servers other
  than its partner; both partitions' times are recorded, and the record says the equivalence
  oracle does not apply.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import run_train

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

BATCH, SEQ_LEN, VOCAB, STEPS = 16, 16, 1500, 24
EMBEDDING_ROW_BYTES = 64 * 4


def write_corpus(path) -> None:
    """Zipf-distributed words from a made-up lexicon, in sentences: a corpus with a long tail."""
    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lexicon = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(4000)]
    ranks = np.minimum(rng.zipf(1.3, size=40_000), len(lexicon)) - 1
    words = [lexicon[r] for r in ranks]
    sentences = [" ".join(words[i : i + 12]) + " ." for i in range(0, len(words), 12)]
    path.write_text("\n".join(sentences) + "\n")


class Runs:
    def __init__(self, folder):
        self.folder = folder
        self.corpus = folder / "corpus.txt"
        write_corpus(self.corpus)
        self.records: dict[str, dict | str] = {}

    def record(self, name: str, args: list[str], launcher: str | None, np: int) -> dict:
        if name not in self.records:
            common = ["--dataset", "words", "--model", "wordlm", "--text-file", str(self.corpus)]
            common += ["--vocab-size", str(VOCAB), "--seq-len", str(SEQ_LEN), "--seed", "4"]
            common += ["--steps", str(STEPS), "--eval-samples", "256", "--warmup-steps", "2"]
            common += ["--probe-every", "5"]  # probe steps take the other code path
            proc, records = run_train(
                [*common, *args], out=self.folder / f"{name}.jsonl", launcher=launcher, np=np
            )
            ok = proc.returncode == 0 and len(records) == 1 and records[0]["status"] == "ok"
            tail = (proc.stdout[-1500:] + proc.stderr[-1500:]).strip()
            self.records[name] = records[0] if ok else f"{name} failed: {tail}"
        outcome = self.records[name]
        if isinstance(outcome, str):
            pytest.fail(outcome)
        return outcome


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("sparse"))


PER_WORKER = ["--batch-size", str(BATCH)]
CONFIGS = {
    "single": (["--arch", "single", "--batch-size", str(2 * BATCH)], None, 1),
    "ps-dense": (["--arch", "ps", "--num-ps", "1", *PER_WORKER], "mpirun", 3),
    "ps-sparse": (
        ["--arch", "ps", "--num-ps", "1", "--sparse-exchange", "sparse", *PER_WORKER],
        "mpirun",
        3,
    ),
    "ring-sparse": (["--arch", "ring", "--sparse-exchange", "sparse", *PER_WORKER], "mpirun", 2),
    "p2p-sparse": (["--arch", "p2p", "--sparse-exchange", "sparse", *PER_WORKER], "mpirun", 2),
}


def get(runs: Runs, name: str) -> dict:
    return runs.record(name, *CONFIGS[name])


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


@pytest.mark.parametrize("name", ["ps-dense", "ps-sparse", "ring-sparse", "p2p-sparse"])
def test_sparse_and_dense_apply_the_same_updates(runs, name):
    reference, record = get(runs, "single"), get(runs, name)
    for key in ("param_norm", "final_loss"):
        assert relative(reference["result"][key], record["result"][key]) < 1e-4, key
    assert record["config"]["steps_run"] == STEPS
    partition = record["comm"]["partition"]
    assert partition["data_partition"] == "random"
    assert partition["equivalence_oracle"].startswith("applies")


def test_ps_and_p2p_sparse_are_the_dense_update_bit_for_bit(runs):
    dense = get(runs, "ps-dense")["result"]
    for name in ("ps-sparse", "p2p-sparse"):
        sparse = get(runs, name)["result"]
        assert sparse["param_norm"] == dense["param_norm"], name
        assert sparse["final_loss"] == dense["final_loss"], name


def test_ps_sparse_sends_the_rows_it_counted(runs):
    dense, sparse = get(runs, "ps-dense"), get(runs, "ps-sparse")
    exchange = sparse["comm"]["sparse_exchange"]
    assert exchange["setting"] == "sparse" and exchange["ran"].startswith("sparse")
    assert exchange["sparse_variables"] == ["embedding/embeddings:0"]
    pushed, pulled = exchange["rows_per_step"], exchange["rows_pulled_per_step"]
    # each worker's batch reads at most BATCH x SEQ_LEN distinct rows, and pushes what it read
    assert 0 < pushed <= BATCH * SEQ_LEN and pushed == pulled
    embedding_bytes = VOCAB * EMBEDDING_ROW_BYTES
    others = dense["model_stats"]["param_bytes"] - embedding_bytes
    sent = sparse["comm"]["bytes_sent_per_step"]
    assert sent == pytest.approx(others + pushed * (EMBEDDING_ROW_BYTES + 8) + pulled * 8, abs=2)
    assert dense["comm"]["bytes_sent_per_step"] == dense["model_stats"]["param_bytes"]
    assert dense["comm"]["sparse_exchange"]["ran"].startswith("dense")
    assert sent < 0.75 * dense["comm"]["bytes_sent_per_step"]


def test_ring_sparse_gathers_one_row_per_token(runs):
    record = get(runs, "ring-sparse")
    exchange = record["comm"]["sparse_exchange"]
    assert "allgather" in exchange["ran"]
    assert exchange["rows_per_step"] == BATCH * SEQ_LEN  # duplicates included, as Horovod sends
    embedding_bytes = VOCAB * EMBEDDING_ROW_BYTES
    others = record["model_stats"]["param_bytes"] - embedding_bytes
    gathered = 2 * BATCH * SEQ_LEN * (EMBEDDING_ROW_BYTES + 4)  # the lookup's int32 indices
    expected = others + gathered / 2  # ring: 2(W-1)/W of the dense, (W-1)/W of the gathered
    assert record["comm"]["bytes_sent_per_step"] == pytest.approx(expected, abs=2)


PARTITIONED = ["--arch", "ps", "--num-ps", "2", "--sparse-exchange", "sparse", *PER_WORKER]
PARTITIONED += ["--data-partition", "graph"]


def test_placement_by_use_keeps_the_updates_and_sends_less_to_other_servers(runs):
    by_use = runs.record("ps-by-use", [*PARTITIONED, "--param-partition", "by-use"], "mpirun", 4)
    round_robin = runs.record(
        "ps-round-robin", [*PARTITIONED, "--param-partition", "round-robin"], "mpirun", 4
    )
    assert by_use["result"]["param_norm"] == round_robin["result"]["param_norm"]
    for record, method in ((by_use, "by-use"), (round_robin, "round-robin")):
        partition = record["comm"]["partition"]
        assert partition["data_partition"] == "graph" and partition["param_partition"] == method
        assert partition["data_partition_s"] > 0 and partition["param_partition_s"] > 0
        assert partition["equivalence_oracle"].startswith("does not apply")
        low, high = sorted(partition["samples_per_worker"])
        assert 0 < low and high <= 1.1 * low  # METIS balances the sample counts
        assert sum(partition["rows_per_server"]) == VOCAB
    off = [
        r["comm"]["sparse_exchange"]["row_bytes_off_partner_share"] for r in (by_use, round_robin)
    ]
    assert off[0] < off[1]
