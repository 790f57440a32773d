"""Data pipelines: real loaders on small files written here in the real formats."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from data_files import write_idx, write_mnist_like

from archbench.common.errors import UsageError
from archbench.runtime.config import TrainConfig
from archbench.workloads.data import (
    BatchPlan,
    load_cifar10,
    load_dataset,
    load_idx_dataset,
    make_text_dataset,
    read_idx,
    train_batches,
)


@pytest.mark.parametrize("compress", [False, True])
def test_idx_files_load_as_written(tmp_path, compress):
    arrays = write_mnist_like(tmp_path, compress=compress)
    data = load_idx_dataset("mnist", str(tmp_path))
    assert data.x_train.shape == (60, 28, 28, 1)
    np.testing.assert_array_equal(data.x_train[..., 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(data.y_test, arrays["t10k-labels-idx1-ubyte"])
    assert data.num_classes == 10 and data.scale == pytest.approx(1 / 255)


def test_truncated_idx_is_rejected(tmp_path):
    path = tmp_path / "broken-idx3-ubyte"
    write_idx(path, np.zeros((4, 28, 28)), compress=False)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(UsageError, match="truncated"):
        read_idx(str(path))


def test_missing_mnist_files_are_named(tmp_path):
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((2, 28, 28)), compress=False)
    config = TrainConfig(dataset="mnist", data_dir=str(tmp_path))
    with pytest.raises(UsageError) as info:
        load_dataset(config)
    message = str(info.value)
    assert "t10k-images-idx3-ubyte" in message and str(tmp_path) in message
    assert "train-images-idx3-ubyte[" not in message  # the one that exists is not listed


def test_cifar10_python_batches_load(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(1)
    written = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (7, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, 7).tolist()
        written[name] = (data, labels)
        with open(folder / name, "wb") as handle:
            pickle.dump({b"data": data, b"labels": labels}, handle)
    dataset = load_cifar10(str(tmp_path))
    assert dataset.x_train.shape == (35, 32, 32, 3) and dataset.x_test.shape == (7, 32, 32, 3)
    # channel-first rows become height x width x channel images
    first = written["data_batch_1"][0][0].reshape(3, 32, 32).transpose(1, 2, 0)
    np.testing.assert_array_equal(dataset.x_train[0], first)
    assert dataset.y_test.tolist() == written["test_batch"][1]


def test_cifar10_missing_batches_are_named(tmp_path):
    with pytest.raises(UsageError, match="data_batch_1"):
        load_cifar10(str(tmp_path))


@pytest.mark.parametrize("workers", [2, 3])
def test_worker_slices_make_the_single_process_batch(workers):
    per_worker = 4
    plan_w = BatchPlan(train_size=100, batch_size=per_worker, num_workers=workers, seed=7)
    plan_1 = BatchPlan(train_size=100, batch_size=per_worker * workers, num_workers=1, seed=7)
    for epoch in range(2):
        single = plan_1.worker_indices(epoch, 0)
        slices = np.concatenate([plan_w.worker_indices(epoch, w) for w in range(workers)], axis=1)
        np.testing.assert_array_equal(single, slices)
        assert len(np.unique(slices)) == slices.size  # no sample twice in an epoch
    assert not np.array_equal(plan_w.epoch_order(0), plan_w.epoch_order(1))


def test_text_windows_predict_the_next_byte(tmp_path):
    corpus = b"abcdefghij" * 200
    path = tmp_path / "corpus.txt"
    path.write_bytes(corpus)
    data = make_text_dataset(str(path), seq_len=8)
    assert data.x_train.shape[1] == 8 and data.num_classes == 256
    window, label = data.x_train[3], data.y_train[3]
    start = 3 * 8
    assert bytes(window.astype(np.uint8)) == corpus[start : start + 8]
    assert label == corpus[start + 8]
    assert len(data.x_test) > 0


def test_default_text_corpus_exists_everywhere():
    data = make_text_dataset(None, seq_len=64)
    assert data.train_size > 1000 and "standard library" in data.source


def test_a_process_reads_a_data_set_again_only_when_its_files_change(tmp_path):
    """A warm group's runs share the loaded arrays; they are read-only, and a file written since
    the last load is read again."""
    write_mnist_like(tmp_path)
    config = TrainConfig(dataset="mnist", data_dir=str(tmp_path))
    first = load_dataset(config)
    assert load_dataset(config) is first
    with pytest.raises(ValueError):
        first.x_train[0, 0, 0, 0] = 1
    arrays = write_mnist_like(tmp_path, train=30)
    again = load_dataset(config)
    assert again is not first and again.x_train.shape == (30, 28, 28, 1)
    np.testing.assert_array_equal(again.x_train[..., 0], arrays["train-images-idx3-ubyte"])
    other = tmp_path / "other"
    other.mkdir()
    write_mnist_like(other, train=40)
    assert load_dataset(TrainConfig(dataset="mnist", data_dir=str(other))).train_size == 40


def test_training_batches_are_the_rows_of_the_plan_scaled(tmp_path):
    write_mnist_like(tmp_path)
    data = load_idx_dataset("mnist", str(tmp_path))
    plan = BatchPlan(data.train_size, 4, 2, seed=3)
    batches = list(train_batches(data, plan, 1, 1))
    assert len(batches) == plan.steps_per_epoch
    rows = plan.worker_indices(1, 1)
    for (x, y), indices in zip(batches, rows):
        expected = data.x_train[indices].astype(np.float32) * np.float32(1 / 255)
        np.testing.assert_array_equal(x.numpy(), expected)
        np.testing.assert_array_equal(y.numpy(), data.y_train[indices])
    assert [b[1].numpy().tolist() for b in train_batches(data, plan, 1, 1, first_step=2)] == [
        b[1].numpy().tolist() for b in batches[2:]
    ]
