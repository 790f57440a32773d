"""Shared data pipelines: every architecture reads the same samples in the same global order.

Sync semantics: epoch e has one seeded permutation of the training set; global batch s is
samples perm[s*W*b:(s+1)*W*b], and worker r trains on slice r (b samples) of it. A W-worker run
and a single process with batch W*b therefore see exactly the same samples per step.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

from archbench.errors import UsageError

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
TEXT_VOCAB = 256  # bytes
TEXT_CORPUS_BYTES = 4 * 1024 * 1024
TEXT_TEST_FRACTION = 0.1


@dataclass
class ArrayDataset:
    """Training and test arrays held in memory, as stored (uint8 images, int labels)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    scale: float  # inputs are multiplied by this (1/255 for images, 1 for token ids)
    source: str
    tensors: tuple | None = field(default=None, repr=False)  # (x_train, y_train) as tf constants

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def train_size(self) -> int:
        return int(self.x_train.shape[0])


# --------------------------------------------------------------------------- IDX (MNIST family)


def _open_maybe_gz(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def read_idx(path: str) -> np.ndarray:
    """Reads an IDX file (the MNIST format), plain or gzip-compressed."""
    with _open_maybe_gz(path) as handle:
        header = handle.read(4)
        if len(header) != 4 or header[0] != 0 or header[1] != 0:
            raise UsageError(f"{path}: not an IDX file")
        if header[2] != 0x08:
            raise UsageError(f"{path}: IDX element type {header[2]:#x} is not unsigned byte")
        ndim = header[3]
        dims = struct.unpack(f">{ndim}I", handle.read(4 * ndim))
        payload = handle.read()
    expected = int(np.prod(dims))
    if len(payload) != expected:
        raise UsageError(f"{path}: truncated IDX file ({len(payload)} of {expected} bytes)")
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims)


def _find_idx_files(folder: str) -> dict[str, str] | list[str]:
    """Paths of the four IDX files (plain or .gz), or the list of names that are missing."""
    found, missing = {}, []
    for key, stem in IDX_FILES.items():
        for candidate in (stem, stem + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                found[key] = path
                break
        else:
            missing.append(stem + "[.gz]")
    return found if not missing else missing


def load_idx_dataset(name: str, folder: str) -> ArrayDataset:
    paths = _find_idx_files(folder)
    if isinstance(paths, list):
        raise UsageError(
            f"{name}: missing {', '.join(paths)} in {folder} (put the IDX files there or pass --data-dir)"
        )
    arrays = {key: read_idx(path) for key, path in paths.items()}
    x_train, x_test = arrays["x_train"][..., None], arrays["x_test"][..., None]
    return ArrayDataset(
        name,
        x_train,
        arrays["y_train"].astype(np.int32),
        x_test,
        arrays["y_test"].astype(np.int32),
        10,
        1.0 / 255.0,
        folder,
    )


# --------------------------------------------------------------------------- CIFAR-10


def _cifar_folder(data_dir: str) -> str:
    nested = os.path.join(data_dir, CIFAR10_FOLDER)
    return nested if os.path.isdir(nested) else data_dir


def _read_cifar_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as handle:
        batch = pickle.load(handle, encoding="bytes")
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return data, np.asarray(batch[b"labels"], dtype=np.int32)


def load_cifar10(data_dir: str) -> ArrayDataset:
    folder = _cifar_folder(data_dir)
    names = (*CIFAR10_TRAIN, CIFAR10_TEST)
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        raise UsageError(
            f"cifar10: missing {', '.join(missing)} in {folder} "
            f"(put the CIFAR-10 python batches in --data-dir/{CIFAR10_FOLDER})"
        )
    parts = [_read_cifar_batch(os.path.join(folder, n)) for n in CIFAR10_TRAIN]
    x_test, y_test = _read_cifar_batch(os.path.join(folder, CIFAR10_TEST))
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    return ArrayDataset("cifar10", x_train, y_train, x_test, y_test, 10, 1.0 / 255.0, folder)


# --------------------------------------------------------------------------- synthetic


def make_synthetic(
    shape: tuple[int, ...], num_classes: int, samples: int, seed: int
) -> ArrayDataset:
    """Random uint8 inputs and labels: for pure throughput runs (accuracy is meaningless)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(samples, *shape), dtype=np.uint8)
    y = rng.integers(0, num_classes, size=samples, dtype=np.int32)
    test = max(1, samples // 8)
    return ArrayDataset(
        "synthetic",
        x,
        y,
        x[:test],
        y[:test],
        num_classes,
        1.0 / 255.0,
        f"generated {'x'.join(map(str, shape))}",
    )


# --------------------------------------------------------------------------- text


def default_corpus_files() -> list[str]:
    """The standard library's own Python sources: present wherever Python is."""
    stdlib = os.path.dirname(os.__file__)
    return sorted(os.path.join(stdlib, name) for name in os.listdir(stdlib) if name.endswith(".py"))


def read_corpus(text_file: str | None, limit: int = TEXT_CORPUS_BYTES) -> tuple[bytes, str]:
    if text_file is not None:
        if not os.path.isfile(text_file):
            raise UsageError(f"--text-file {text_file}: no such file")
        with open(text_file, "rb") as handle:
            corpus = handle.read(limit)
        source = text_file
    else:
        chunks, total = [], 0
        for path in default_corpus_files():
            with open(path, "rb") as handle:
                chunk = handle.read()
            chunks.append(chunk)
            total += len(chunk)
            if total >= limit:
                break
        corpus = b"".join(chunks)[:limit]
        source = f"python{sys.version_info[0]}.{sys.version_info[1]} standard library sources"
    return corpus, source


def make_text_dataset(text_file: str | None, seq_len: int) -> ArrayDataset:
    """Windows of seq_len bytes -> the next byte (a character language model's data)."""
    corpus, source = read_corpus(text_file)
    tokens = np.frombuffer(corpus, dtype=np.uint8)
    stride = seq_len
    count = (len(tokens) - seq_len - 1) // stride
    if count < 16:
        raise UsageError(f"text corpus {source}: too short for --seq-len {seq_len}")
    starts = np.arange(count) * stride
    x = np.stack([tokens[s : s + seq_len] for s in starts]).astype(np.int32)
    y = tokens[starts + seq_len].astype(np.int32)
    split = int(count * (1 - TEXT_TEST_FRACTION))
    return ArrayDataset("text", x[:split], y[:split], x[split:], y[split:], TEXT_VOCAB, 1.0, source)


# --------------------------------------------------------------------------- entry point


def load_dataset(config) -> ArrayDataset:
    """Loads the configured data set; raises UsageError naming missing files."""
    if config.dataset == "fashion_mnist":
        return load_idx_dataset("fashion_mnist", config.data_dir or FASHION_MNIST_DIR)
    if config.dataset == "mnist":
        if not config.data_dir:
            raise UsageError(
                "mnist: pass --data-dir with train-images-idx3-ubyte[.gz] and the other three IDX files"
            )
        return load_idx_dataset("mnist", config.data_dir)
    if config.dataset == "cifar10":
        if not config.data_dir:
            raise UsageError(
                f"cifar10: pass --data-dir with the python batches ({CIFAR10_FOLDER}/data_batch_1..5, test_batch)"
            )
        return load_cifar10(config.data_dir)
    if config.dataset == "synthetic":
        return make_synthetic(
            config.synthetic_shape, config.synthetic_classes, config.synthetic_samples, config.seed
        )
    if config.dataset == "text":
        return make_text_dataset(config.text_file, config.seq_len)
    raise UsageError(f"unknown dataset {config.dataset!r}")


def check_available(config) -> None:
    """Fails fast (before any process starts work) when the data set's files are missing."""
    if config.dataset in ("fashion_mnist", "mnist"):
        folder = config.data_dir or (
            FASHION_MNIST_DIR if config.dataset == "fashion_mnist" else None
        )
        if folder is None:
            raise UsageError(
                "mnist: pass --data-dir with train-images-idx3-ubyte[.gz] and the other three IDX files"
            )
        paths = _find_idx_files(folder)
        if isinstance(paths, list):
            hint = (
                " (apt-get install dataset-fashion-mnist, or pass --data-dir)"
                if config.dataset == "fashion_mnist"
                else ""
            )
            raise UsageError(f"{config.dataset}: missing {', '.join(paths)} in {folder}{hint}")
    elif config.dataset == "cifar10":
        load_cifar10_check(config.data_dir)
    elif config.dataset == "text" and config.text_file and not os.path.isfile(config.text_file):
        raise UsageError(f"--text-file {config.text_file}: no such file")


def load_cifar10_check(data_dir: str | None) -> None:
    if not data_dir:
        raise UsageError(
            f"cifar10: pass --data-dir with the python batches ({CIFAR10_FOLDER}/data_batch_1..5, test_batch)"
        )
    folder = _cifar_folder(data_dir)
    missing = [
        n for n in (*CIFAR10_TRAIN, CIFAR10_TEST) if not os.path.isfile(os.path.join(folder, n))
    ]
    if missing:
        raise UsageError(f"cifar10: missing {', '.join(missing)} in {folder}")


# --------------------------------------------------------------------------- global order


@dataclass(frozen=True)
class BatchPlan:
    """Which samples each worker trains on, step by step (the sync semantics)."""

    train_size: int
    batch_size: int  # per worker
    num_workers: int
    seed: int

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.num_workers

    @property
    def steps_per_epoch(self) -> int:
        return self.train_size // self.global_batch

    def epoch_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.train_size)

    def worker_indices(self, epoch: int, worker: int) -> np.ndarray:
        """(steps_per_epoch, batch_size) sample indices of this worker's slices in this epoch."""
        steps = self.steps_per_epoch
        order = self.epoch_order(epoch)[: steps * self.global_batch]
        return order.reshape(steps, self.num_workers, self.batch_size)[:, worker, :]


def train_batches(
    data: ArrayDataset, plan: BatchPlan, epoch: int, worker: int, first_step: int = 0
):
    """A tf.data pipeline of this worker's (x, y) batches for one epoch, from `first_step` on."""
    import tensorflow as tf

    indices = plan.worker_indices(epoch, worker)[first_step:]
    if data.tensors is None:  # converted once per process, not once per epoch
        data.tensors = (tf.constant(data.x_train), tf.constant(data.y_train))
    x_all, y_all = data.tensors
    scale = data.scale

    def gather(batch_indices):
        x = tf.gather(x_all, batch_indices)
        x = tf.cast(x, tf.float32) * scale if scale != 1.0 else x
        return x, tf.gather(y_all, batch_indices)

    dataset = tf.data.Dataset.from_tensor_slices(indices)
    return dataset.map(gather, num_parallel_calls=1, deterministic=True).prefetch(2)


def test_arrays(data: ArrayDataset, samples: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Test inputs ready for the model (scaled), optionally the first `samples` only."""
    x, y = data.x_test, data.y_test
    if samples:
        x, y = x[:samples], y[:samples]
    if data.scale != 1.0:
        x = x.astype(np.float32) * np.float32(data.scale)
    return x, y
