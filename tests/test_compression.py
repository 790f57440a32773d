"""Gradient compressors at numpy and TensorFlow level, one process, no launcher: top-k selection
and its error feedback, the warm-up schedule, PowerSGD's factors, and the byte counts the
records and the performance model share."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from archbench.compression import (
    CompressionSpec,
    carry_problem,
    matrix_view,
    powersgd_compresses,
    powersgd_payload,
    ring_allreduce_bytes,
    ring_bytes_per_step,
)
from archbench.compression.topk import TopK
from archbench.p2p.sparse import owner_slices, sparse_mean

# mlp: Dense 784 -> 128 -> 10
MLP_SHAPES = [(784, 128), (128,), (128, 10), (10,)]
MLP_ELEMENTS = 101_770


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def gradients(steps: int, elements: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(elements).astype(np.float32) for _ in range(steps)]


# --- the schedule -----------------------------------------------------------------------------


def test_kept_share_falls_exponentially_from_dense_to_the_ratio_over_the_warmup():
    spec = CompressionSpec("topk", ratio=0.001, warmup_steps=3)
    shares = [spec.kept_share(step) for step in range(6)]
    assert shares[0] == 1.0
    assert shares[1] == pytest.approx(0.1) and shares[2] == pytest.approx(0.01)
    assert shares[3:] == [0.001, 0.001, 0.001]
    assert spec.kept_schedule(10_000) == [10_000, 1000, 100, 10]
    assert spec.kept_total(5, 10_000) == 10_000 + 1000 + 100 + 10 + 10


def test_kept_is_ceil_of_the_share_and_at_least_one():
    spec = CompressionSpec("topk", ratio=0.01)
    assert spec.kept(0, MLP_ELEMENTS) == 1018  # ceil(1017.7)
    assert spec.kept(0, 50) == 1
    assert CompressionSpec("topk", ratio=1.0).kept(0, 7) == 7
    assert spec.kept_schedule(MLP_ELEMENTS) == [1018]


# --- top-k and error feedback (numpy) -----------------------------------------------------


def test_topk_keeps_the_largest_magnitudes_with_the_residual_added():
    selector = TopK(8, CompressionSpec("topk", ratio=0.25))
    gradient = np.array([0.1, -5, 0.2, 3, -0.3, 0.0, 1, -2], dtype=np.float32)
    indices, values = selector.select(gradient)
    assert indices.tolist() == [1, 3] and values.tolist() == [-5, 3]
    assert indices.dtype == np.int32 and values.dtype == np.float32
    assert selector.residual.tolist() == pytest.approx([0.1, 0, 0.2, 0, -0.3, 0, 1, -2])
    # the residual's -2 and 1 now win over a small new gradient
    indices, values = selector.select(np.full(8, 0.01, dtype=np.float32))
    assert indices.tolist() == [6, 7]
    assert values.tolist() == pytest.approx([1.01, -1.99])


@pytest.mark.parametrize("warmup", [0, 4])
def test_error_feedback_conserves_the_gradient_mass_over_steps(warmup):
    elements, steps = 5000, 30
    selector = TopK(elements, CompressionSpec("topk", ratio=0.01, warmup_steps=warmup))
    sent = np.zeros(elements, dtype=np.float64)
    total = np.zeros(elements, dtype=np.float64)
    for gradient in gradients(steps, elements):
        k = selector.k
        indices, values = selector.select(gradient)
        assert len(indices) == k and len(np.unique(indices)) == k
        sent[indices] += values
        total += gradient
    # what was sent plus what is still held is every gradient, up to float32 additions
    np.testing.assert_allclose(sent + selector.residual, total, atol=2e-4 * steps)
    assert np.abs(selector.residual).max() > 0  # something is still held back


def test_without_error_feedback_the_rest_is_dropped():
    selector = TopK(100, CompressionSpec("topk", ratio=0.1, error_feedback=False))
    assert selector.residual is None
    first = gradients(1, 100)[0]
    indices, values = selector.select(first)
    np.testing.assert_array_equal(values, first[indices])
    again, _ = selector.select(first)
    np.testing.assert_array_equal(again, indices)  # nothing carried over: the same pick


# --- the same in TensorFlow (ring, ps) ----------------------------------------------------


def test_tf_topk_picks_what_numpy_picks_and_keeps_the_same_residual(tf):
    from archbench.compression.topk import TfTopK

    spec = CompressionSpec("topk", ratio=0.02, warmup_steps=2)
    elements = 3000
    reference = TopK(elements, spec)
    selector = TfTopK(tf, elements, spec)

    @tf.function
    def select(flat):
        indices, values, updates = selector.select(flat)
        with tf.control_dependencies(updates):
            return tf.identity(indices), tf.identity(values)

    for gradient in gradients(5, elements, seed=3):
        want_indices, want_values = reference.select(gradient)
        indices, values = select(tf.constant(gradient))
        order = np.argsort(indices.numpy())
        np.testing.assert_array_equal(indices.numpy()[order], want_indices)
        np.testing.assert_array_equal(values.numpy()[order], want_values)
        np.testing.assert_array_equal(selector.residual.numpy(), reference.residual)


def test_sparse_allgather_with_ratio_one_is_the_dense_gradient(tf):
    from archbench.compression.topk import TopKAllgather

    variables = [tf.Variable(tf.zeros(shape)) for shape in [(6, 4), (4,)]]
    exchange = TopKAllgather(
        tf, variables, CompressionSpec("topk", ratio=1.0), allgather=tf.identity, workers=1
    )
    grads = [tf.constant(np.arange(24, dtype=np.float32).reshape(6, 4) - 12), tf.ones(4)]
    averaged = tf.function(exchange.exchange)(grads)
    for got, want in zip(averaged, grads):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# --- p2p: routing a sparse selection to shard owners, and the owner's average -------------


def test_owner_slices_cut_sorted_indices_at_the_shard_bounds():
    bounds = [(0, 4), (4, 7), (7, 10)]
    indices = np.array([0, 3, 4, 8, 9], dtype=np.int32)
    assert owner_slices(indices, bounds) == [(0, 2), (2, 3), (3, 5)]


def test_sparse_mean_sums_in_rank_order_like_the_dense_average():
    rng = np.random.default_rng(1)
    dense = [rng.standard_normal(10).astype(np.float32) for _ in range(3)]
    everything = np.arange(10, dtype=np.int32)
    out = np.empty(10, dtype=np.float32)
    sparse_mean([(everything, d) for d in dense], out)
    want = (dense[0] + dense[1]) + dense[2]
    np.testing.assert_array_equal(out, want / np.float32(3))  # bit for bit
    sparse_mean(
        [(np.array([2], np.int32), np.array([6.0], np.float32)), (everything[:0], dense[0][:0])],
        out,
    )
    assert out.tolist() == [0, 0, 3, 0, 0, 0, 0, 0, 0, 0]


# --- PowerSGD ------------------------------------------------------------------------------


def test_powersgd_with_full_rank_reproduces_the_matrix(tf):
    from archbench.compression.powersgd import power_step

    rng = np.random.default_rng(2)
    for n, m in [(7, 5), (5, 7), (6, 6)]:
        matrix = rng.standard_normal((n, m)).astype(np.float32)
        q = rng.standard_normal((m, min(n, m))).astype(np.float32)
        approximation, _ = power_step(
            tf, tf.constant(matrix), tf.constant(q), tf.identity, tf.identity
        )
        np.testing.assert_allclose(approximation.numpy(), matrix, atol=2e-5)


def test_powersgd_compresses_large_matrices_sends_vectors_dense_and_conserves_mass(tf):
    from archbench.compression.powersgd import PowerSGD

    spec = CompressionSpec("powersgd", rank=2)
    variables = [tf.Variable(tf.zeros(shape)) for shape in [(40, 30), (30,), (3, 3)]]
    compressor = PowerSGD(tf, variables, spec, allreduce=lambda ts: ts, seed=1)
    assert [view is not None for view in compressor.plan] == [True, False, False]
    step = tf.function(compressor.exchange)
    rng = np.random.default_rng(4)
    # a rank-2 matrix is reproduced in one step (Q's random start spans its row space)
    low_rank = (rng.standard_normal((40, 2)) @ rng.standard_normal((2, 30))).astype(np.float32)
    bias, small = rng.standard_normal(30).astype(np.float32), np.eye(3, dtype=np.float32)
    out = step([tf.constant(low_rank), tf.constant(bias), tf.constant(small)])
    np.testing.assert_allclose(out[0].numpy(), low_rank, atol=1e-4)
    np.testing.assert_array_equal(out[1].numpy(), bias)
    np.testing.assert_array_equal(out[2].numpy(), small)
    # full-rank gradients: applied + residual is every gradient (error feedback)
    applied = np.zeros((40, 30)) + out[0].numpy()
    total = low_rank.astype(np.float64)
    for _ in range(10):
        gradient = rng.standard_normal((40, 30)).astype(np.float32)
        applied += step([tf.constant(gradient), tf.constant(bias), tf.constant(small)])[0].numpy()
        total += gradient
    np.testing.assert_allclose(applied + compressor.residual[0].numpy(), total, atol=1e-3)


def test_powersgd_payload_of_the_mlp():
    assert matrix_view((3, 3, 16, 32)) == (144, 32) and matrix_view((10,)) is None
    assert powersgd_compresses((784, 128), 2) and not powersgd_compresses((2, 2), 2)
    payload = powersgd_payload(MLP_SHAPES, rank=2)
    assert payload == {"p_elements": 784 * 2 + 128 * 2, "q_elements": 128 * 2 + 10 * 2,
                       "dense_elements": 128 + 10}  # fmt: skip


# --- bytes and what each architecture carries ----------------------------------------------


def test_ring_bytes_per_step():
    none = ring_bytes_per_step(CompressionSpec("none"), MLP_SHAPES, workers=2)
    assert none == 4 * MLP_ELEMENTS
    assert ring_bytes_per_step(CompressionSpec("fp16"), MLP_SHAPES, 2) == none // 2
    topk = ring_bytes_per_step(CompressionSpec("topk", ratio=0.01), MLP_SHAPES, workers=2)
    assert topk == 1018 * 8  # one allgather block of 1018 values and indices
    assert none / topk > 49
    assert ring_bytes_per_step(CompressionSpec("topk"), MLP_SHAPES, workers=3) == 2 * 1018 * 8
    warm = CompressionSpec("topk", ratio=0.01, warmup_steps=2)
    assert ring_bytes_per_step(warm, MLP_SHAPES, 2, step=0) == MLP_ELEMENTS * 8
    power = ring_bytes_per_step(CompressionSpec("powersgd", rank=2), MLP_SHAPES, workers=2)
    assert power == 4 * (1824 + 276 + 138)
    assert math.isclose(none / power, 4 * MLP_ELEMENTS / (4 * 2238))


def test_ring_allreduce_bytes_are_two_w_minus_one_over_w_of_the_payload():
    assert ring_allreduce_bytes(1000, 1) == 0
    assert ring_allreduce_bytes(1000, 2) == 1000
    assert ring_allreduce_bytes(1000, 3) == 1333  # 2 x 2/3, rounded
    assert ring_allreduce_bytes(1000, 4) == 1500
    # fp16 casts each float32 value to 2 bytes; every other method's dense exchange sends 4
    assert CompressionSpec("fp16").dense_wire_bytes(4 * MLP_ELEMENTS) == 2 * MLP_ELEMENTS
    assert CompressionSpec("fp16").dense_wire_bytes(10) == 5
    for method in ("none", "topk", "powersgd"):
        assert CompressionSpec(method).wire_value_bytes == 4
        assert CompressionSpec(method).dense_wire_bytes(10) == 10


def test_a_runs_compression_is_read_once_from_its_config_and_answers_what_the_ring_asks():
    from types import SimpleNamespace

    from archbench.runtime.config import TrainConfig

    hvd = SimpleNamespace(Compression=SimpleNamespace(fp16="hvd-fp16", none="hvd-none"))
    config = TrainConfig(arch="ring", compression="fp16")
    spec = config.compression_spec
    assert spec is config.compression_spec  # kept, not read again
    assert spec == CompressionSpec("fp16")
    assert spec.horovod_compression(hvd) == "hvd-fp16" and not spec.own_exchange
    # the record keeps the setting as given, not the typed value
    assert config.as_record(2, 2)["compression"] == "fp16"
    assert "compression_spec" not in config.as_record(2, 2)
    for method, own in (("none", False), ("topk", True), ("powersgd", True)):
        other = TrainConfig(arch="ring", compression=method).compression_spec
        assert other.horovod_compression(hvd) == "hvd-none" and other.own_exchange is own
    topk = TrainConfig(arch="p2p", compression="topk", compression_ratio=0.05, error_feedback="off")
    assert topk.compression_spec == CompressionSpec("topk", ratio=0.05, error_feedback=False)


def _ring_without_horovod(world: int, **settings):
    """A ring trainer as its record's bytes see it after training: the MLP's variables, no
    Horovod (comm_stats reads only the model's shapes, the settings and the step kinds)."""
    from types import SimpleNamespace

    from archbench.runtime.config import TrainConfig
    from archbench.runtime.launch import ProcessPlace
    from archbench.trainers.ring import RingTrainer

    place = ProcessPlace(0, world, 0, world, "mpirun", "h1")
    config = TrainConfig(arch="ring", **settings)
    trainer = RingTrainer(RingTrainer.settings_from(config), place, None)
    float32 = SimpleNamespace(size=4)
    variables = [
        SimpleNamespace(name=f"v{i}", shape=s, dtype=float32) for i, s in enumerate(MLP_SHAPES)
    ]
    trainer.model = SimpleNamespace(trainable_variables=variables)
    trainer._sparse_rows, trainer.compressor = {}, None
    return trainer


def test_the_rings_dense_record_bytes_are_the_shared_formulas():
    dense = 4 * MLP_ELEMENTS  # 407,080 B
    # W = 4: 2 x 3/4 of the gradient; fp16 sends half of it
    assert _ring_without_horovod(4).comm_stats(10)["bytes_sent_per_step"] == 610_620
    assert (
        _ring_without_horovod(4, compression="fp16").comm_stats(10)["bytes_sent_per_step"]
        == 305_310
    )
    assert _ring_without_horovod(1).comm_stats(10)["bytes_sent_per_step"] == 0
    for method in ("none", "fp16"):
        stats = _ring_without_horovod(3, compression=method).comm_stats(10)
        wire = CompressionSpec(method).dense_wire_bytes(dense)
        assert stats["bytes_sent_per_step"] == ring_allreduce_bytes(wire, 3)
        assert stats["bytes_sent_per_step"] == ring_bytes_per_step(
            CompressionSpec(method), MLP_SHAPES, 3
        )
    # --sync-every 4 with fp16: the gradient steps halved, the averaging steps uncompressed
    ring = _ring_without_horovod(4, compression="fp16", sync_every=4)
    ring.steps_by_kind = {"sync": 2, "local": 6, "average": 2}
    stats = ring.comm_stats(10)
    assert stats["bytes_total"] == 2 * 305_310 + 2 * 610_620
    assert stats["bytes_sent_per_step"] == round((2 * 305_310 + 2 * 610_620) / 10)


def test_an_unknown_compression_is_refused_in_one_line():
    from archbench.common.errors import UsageError
    from archbench.runtime.config import TrainConfig

    with pytest.raises(UsageError) as refused:
        _ = TrainConfig(arch="ring", compression="zip").compression_spec
    assert str(refused.value) == "--compression 'zip' is not one of none, fp16, topk, powersgd"


@pytest.mark.parametrize(
    "arch,method,sync,carried",
    [
        ("ring", "powersgd", True, True),
        ("ring", "topk", True, True),
        ("p2p", "topk", True, True),
        ("p2p", "powersgd", True, False),
        ("p2p", "fp16", True, False),
        ("ps", "topk", True, True),
        ("ps", "topk", False, False),
        ("ps", "powersgd", True, False),
        ("single", "powersgd", True, True),  # does not apply: not judged
    ],
)
def test_which_architecture_carries_which_method(arch, method, sync, carried):
    problem = carry_problem(arch, method, sync)
    assert (problem is None) == carried
    if problem:
        assert "\n" not in problem and f"--arch {arch}" in problem


# --- ps: the synchronous graph's sparse pushes, one worker and one in-process server ---------


def test_ps_graph_topk_updates_as_the_eager_selection_does(tf):
    """One worker, one server, both in this process: top-k pushes through the sparse
    accumulators (fused steps and probe steps) give exactly the parameters of the numpy
    selection applied by Keras SGD; with every entry kept, exactly the dense pushes'."""
    import socket

    from archbench.ps.cluster_spec import ClusterLayout
    from archbench.ps.graph import build_worker_graph, initial_feed
    from archbench.workloads.models import build_model

    def free_port() -> int:
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            return probe.getsockname()[1]

    ps, worker = f"localhost:{free_port()}", f"localhost:{free_port()}"
    cluster = tf.train.ClusterSpec({"ps": [ps], "worker": [worker]})
    servers = [
        tf.distribute.Server(cluster, job_name=job, task_index=0) for job in ("ps", "worker")
    ]
    rng = np.random.default_rng(0)
    batches = [
        (rng.random((16, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 16).astype(np.int32))
        for _ in range(6)
    ]
    initial = [v.numpy() for v in build_model("mlp", (28, 28, 1), 10, 1).trainable_variables]
    first_step = iter(range(0, 1000, 100))  # the servers' accumulators outlive each graph

    def train(spec) -> list[np.ndarray]:
        layout = ClusterLayout((ps,), (worker,), 1, "mpi")
        graph = build_worker_graph(
            tf, model_name="mlp", input_shape=(28, 28, 1), input_dtype=tf.float32,
            num_classes=10, seed=1, sharding="round-robin", layout=layout, worker_index=0,
            sync=True, lr=0.05, momentum=0.9, compression=spec,
        )  # fmt: skip
        base = next(first_step)
        with tf.compat.v1.Session(servers[1].target, graph=graph.graph) as session:
            session.run(graph.init_servers, initial_feed(graph, initial))
            session.run(graph.init_local)
            for step, (x, y) in enumerate(batches):
                if step % 3 == 2:  # a probe: compute into the buffers, then the exchange
                    session.run(graph.compute_into_buffers, {graph.x: x, graph.y: y})
                    session.run(graph.probe_exchange.run, {graph.local_step: base + step})
                else:
                    feed = {graph.x: x, graph.y: y, graph.local_step: base + step}
                    session.run(graph.fused.run, feed)
            return [
                np.concatenate(p) if len(p) > 1 else p[0] for p in session.run(graph.shard_values)
            ]

    dense = train(None)
    for got, want in zip(train(CompressionSpec("topk", ratio=1.0)), dense):
        np.testing.assert_array_equal(got, want)

    spec = CompressionSpec("topk", ratio=0.01)
    sparse = train(spec)
    model = build_model("mlp", (28, 28, 1), 10, 1)
    variables = model.trainable_variables
    sizes = [int(np.prod(v.shape)) for v in variables]
    selector = TopK(sum(sizes), spec)
    optimizer = tf.keras.optimizers.SGD(0.05, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for x, y in batches:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        flat = np.concatenate([g.numpy().reshape(-1) for g in tape.gradient(loss, variables)])
        indices, values = selector.select(flat)
        kept = np.zeros_like(flat)
        kept[indices] = values
        pieces = np.split(kept, np.cumsum(sizes)[:-1])
        optimizer.apply_gradients(
            zip([p.reshape(v.shape) for p, v in zip(pieces, variables)], variables)
        )
    for got, variable in zip(sparse, variables):
        np.testing.assert_array_equal(got, variable.numpy())


def test_the_records_bytes_follow_the_warmup_step_by_step():
    from types import SimpleNamespace

    from archbench.compression.record import ps_stats, ring_stats

    warm = CompressionSpec("topk", ratio=0.01, warmup_steps=3)
    compressor = SimpleNamespace(densified=[], compressed=0)
    stats = ring_stats(warm, MLP_SHAPES, workers=2, steps=20, compressor=compressor)
    kept = 101_770 + 21_926 + 4_724 + 17 * 1018
    assert stats["bytes_total"] == 8 * kept and stats["bytes_sent_per_step"] == 8 * kept // 20
    compression = stats["compression"]
    assert compression["kept_total"] == kept and compression["kept_per_step"] == 1018
    assert compression["bytes_sent_per_step_after_warmup"] == 8144
    assert compression["achieved_ratio_after_warmup"] == pytest.approx(4 * MLP_ELEMENTS / 8144)
    ps = ps_stats(CompressionSpec("topk"), MLP_ELEMENTS, pulled=4 * MLP_ELEMENTS, steps=20)
    assert ps["bytes_sent_per_step"] == 1018 * 12 and ps["bytes_received_per_step"] == 407_080
