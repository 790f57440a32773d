"""The pure parts of sparse models: tokenizing words, partitioning samples (METIS included),
placing rows on servers, the batch plan of a partition, and p2p's row messages."""

from __future__ import annotations

import numpy as np
import pytest

from archbench.common.errors import UsageError
from archbench.p2p import sparse
from archbench.ps.sharding import VariableInfo, make_plan, with_row_placement
from archbench.runtime.partition import data_partition, place_rows, sample_word_graph
from archbench.workloads.data import ArrayDataset, BatchPlan
from archbench.workloads.words import UNKNOWN_ID, tokenize, windows


def test_the_vocabulary_is_the_most_frequent_words_in_order_and_the_rest_share_id_0():
    corpus = tokenize([b"b a a c a b d", b"e a."], vocab_size=3)
    assert corpus.vocabulary == (b"", b"a", b"b")  # a: 4 times, b: twice; c, d, e, . once
    assert corpus.ids.tolist() == [2, 1, 1, 0, 1, 2, 0, 0, 1, 0]
    assert corpus.document_of_token.tolist() == [0] * 7 + [1] * 3
    assert corpus.distinct_tokens == 6


def test_a_corpus_without_words_and_a_vocabulary_below_2_are_refused():
    with pytest.raises(UsageError, match="no words"):
        tokenize([b"   \n"], vocab_size=10)
    with pytest.raises(UsageError, match="at least 2"):
        tokenize([b"a b"], vocab_size=1)


def test_windows_predict_the_next_word_among_the_most_frequent():
    corpus = tokenize([b" ".join(b"w%d" % (i % 40) for i in range(2000))], vocab_size=40)
    cut = windows(corpus, seq_len=8, vocab_size=40, source="test")
    assert cut.x.shape == ((len(corpus.ids) - 1) // 8, 8)
    assert (cut.y == corpus.ids[8::8][: len(cut.y)]).all()  # classes = ids (40 < 1024)
    assert cut.output_classes == 40


def two_topic_data(samples_per_topic: int = 60) -> ArrayDataset:
    """Samples of words 1..50 or 51..100, alternating: a graph with two clean halves."""
    rng = np.random.default_rng(3)
    x = np.stack(
        [rng.integers(1, 51, 12) + (50 if i % 2 else 0) for i in range(2 * samples_per_topic)]
    ).astype(np.int32)
    y = np.zeros(len(x), np.int32)
    return ArrayDataset("words", x, y, x[:4], y[:4], 10, 1.0, "test", vocab_size=101)


def test_the_graph_partition_finds_the_two_topics():
    data = two_topic_data()
    cut = data_partition("graph", data, workers=2, seed=1)
    assert cut.edge_cut == 0 and cut.seconds > 0
    topics = [set(np.asarray(part) % 2) for part in cut.parts]
    assert sorted(map(sorted, topics)) == [[0], [1]]
    assert sorted(len(p) for p in cut.parts) == [60, 60]
    facts = cut.record(data, batch_size=4)
    assert facts["distinct_words_per_worker"] == [50, 50]
    assert facts["equivalence_oracle"].startswith("does not apply")


def test_the_sample_word_graph_joins_each_sample_to_its_distinct_words_both_ways():
    # 20 samples; word 2 is in every one (a hub: left out), words 1 and 3 in one each
    x = np.full((20, 3), 2, np.int32)
    x[0, :2], x[1, 1:] = 1, 3
    xadj, adjncy, _ = sample_word_graph(x, vocab_size=4)
    assert len(xadj) == 20 + 4 + 1

    def neighbours(vertex: int) -> list[int]:
        return sorted(adjncy[xadj[vertex] : xadj[vertex + 1]].tolist())

    assert neighbours(0) == [21] and neighbours(1) == [23]  # word w is vertex 20 + w
    assert neighbours(21) == [0] and neighbours(23) == [1]
    assert neighbours(22) == [] and all(neighbours(v) == [] for v in range(2, 20))


def test_contiguous_and_random_partitions():
    data = two_topic_data()
    contiguous = data_partition("contiguous", data, workers=3, seed=1)
    assert [p.tolist() for p in contiguous.parts] == [
        list(range(0, 40)),
        list(range(40, 80)),
        list(range(80, 120)),
    ]
    random = data_partition("random", data, workers=3, seed=1)
    assert random.parts is None
    assert random.record(data, 4)["equivalence_oracle"].startswith("applies")


def test_a_partitioned_batch_plan_draws_each_worker_from_its_part_in_a_new_order_each_epoch():
    parts = (np.arange(0, 50), np.arange(50, 120))
    plan = BatchPlan(120, batch_size=8, num_workers=2, seed=4, parts=parts)
    assert plan.steps_per_epoch == 6  # the smaller part: 50 // 8
    first, second = plan.worker_indices(0, 1), plan.worker_indices(1, 1)
    assert first.shape == (6, 8) and set(first.ravel()) <= set(parts[1])
    assert len(set(first.ravel())) == 48 and not np.array_equal(first, second)


def test_rows_placed_by_use_go_to_the_server_of_the_part_that_uses_them_most():
    data = two_topic_data()
    cut = data_partition("graph", data, workers=2, seed=1)
    placed = place_rows("by-use", 101, 2, data, cut)
    part_of_topic = {int(cut.parts[k][0]) % 2: k for k in range(2)}
    assert set(placed.servers[1:51]) == {part_of_topic[0]}
    assert set(placed.servers[51:101]) == {part_of_topic[1]}
    assert place_rows("round-robin", 5, 2).servers.tolist() == [0, 1, 0, 1, 0]
    hashed = place_rows("hash", 1000, 4).rows_per_server(4)
    assert sum(hashed) == 1000 and min(hashed) > 200


def test_a_row_placement_stores_each_server_rows_as_one_contiguous_run():
    variables = [VariableInfo("embedding", (6, 4), 4), VariableInfo("dense", (4, 2), 4)]
    plan = make_plan("round-robin", variables, 2)
    placed, positions = with_row_placement(plan, 0, [1, 0, 1, 1, 0, 1])
    assert positions == [2, 0, 3, 4, 1, 5]  # server 0 holds rows 1, 4; server 1 rows 0, 2, 3, 5
    shards = placed.shards_of(0)
    assert [(s.row_start, s.row_end, s.ps_task) for s in shards] == [(0, 2, 0), (2, 6, 1)]
    assert placed.shards_of(1) == plan.shards_of(1)
    assert placed.bytes_per_server()[0] == 2 * 16 + 0


def test_row_messages_carry_index_runs_and_give_back_the_entries():
    indices = np.array([3, 4, 5, 6, 10, 11, 20], np.int32)
    values = np.arange(7, dtype=np.float32) + 0.5
    buffer = np.empty(64, np.int32)
    message = sparse.pack_runs(values, indices, buffer)
    assert len(message) == 1 + 7 + 2 * 3  # 3 runs: 3..6, 10..11, 20
    back_indices, back_values = sparse.unpack_runs(message.copy(), len(message))
    assert back_indices.tolist() == indices.tolist()
    assert back_values.tolist() == values.tolist()
    empty = sparse.pack_runs(values[:0], indices[:0], buffer)
    assert [a.tolist() for a in sparse.unpack_runs(empty.copy(), len(empty))] == [[], []]


def test_the_unknown_id_is_0():
    assert UNKNOWN_ID == 0
