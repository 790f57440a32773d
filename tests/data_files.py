"""Small data files in the real formats (IDX, CIFAR-10 python batches), for tests."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np


def write_idx(path, array: np.ndarray, compress: bool) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    payload = header + array.astype(np.uint8).tobytes()
    if compress:
        with gzip.open(str(path) + ".gz", "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)


def write_mnist_like(folder, train: int = 60, test: int = 20, compress: bool = False):
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (train, 28, 28)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, train),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (test, 28, 28)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, test),
    }
    for name, array in arrays.items():
        write_idx(folder / name, array, compress)
    return arrays


def write_cifar_like(folder: Path, per_batch: int = 7) -> None:
    """data_batch_1..5 and test_batch with `per_batch` random 32x32x3 images each."""
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072)).astype(np.uint8),
            b"labels": [int(v) for v in rng.integers(0, 10, per_batch)],
        }
        with open(folder / name, "wb") as handle:
            pickle.dump(batch, handle)
