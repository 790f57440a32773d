"""Row-sparse gradients (an embedding's IndexedSlices): which exchange ran, and its bytes.

An embedding's gradient holds one row per looked-up token (duplicates included) and the row's
index. `--sparse-exchange` says how it travels (`archbench.runtime.settings.SPARSE_EXCHANGES`):
- `dense`: densified into the whole table first, then exchanged like any other gradient;
- `sparse`: only touched rows travel, with their indices (ring: Horovod's allgather of the raw
  rows, duplicates included; p2p and ps: the rows made unique and summed per row first, so the
  update applied is exactly the dense one's).

`unique_rows` is the numpy form of the de-duplication the trainers run in TensorFlow; the
record's `comm.sparse_exchange` is built by `record`.
"""

from __future__ import annotations

import numpy as np

INDEX_BYTES_PS = 8  # TensorFlow's sparse accumulators and gathers take int64 indices
INDEX_BYTES_P2P = 4  # p2p messages carry int32 indices (archbench.p2p.sparse)


def unique_rows(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ascending unique row ids, the sum of the values of each) of a row-sparse gradient."""
    rows, position = np.unique(indices, return_inverse=True)
    summed = np.zeros((len(rows), *values.shape[1:]), dtype=values.dtype)
    np.add.at(summed, position, values)
    return rows, summed


def ran(setting: str, sparse_variables: list[str], how: str) -> str:
    """What the record calls the exchange that ran for the sparse variables."""
    if not sparse_variables:
        return "dense (the model has no row-sparse gradients)"
    return f"sparse: {how}" if setting == "sparse" else "dense: densified, then exchanged as dense"


def record(
    setting: str,
    sparse_variables: list[str],
    how: str,
    rows_per_step: float | None = None,
    **more,
) -> dict:
    """The record's `comm.sparse_exchange`; `more`: what an architecture adds (ps: the rows
    pulled, each worker's traffic with each server)."""
    return {
        "setting": setting,
        "ran": ran(setting, sparse_variables, how),
        "sparse_variables": sorted(sparse_variables),
        "rows_per_step": rows_per_step,
        **more,
    }


def embedding_variables(model) -> list:
    """The variables whose gradient is row-sparse: the tables of the model's Embedding layers."""
    # deferred: TensorFlow; the performance model reads this module's byte counts without it
    import tensorflow as tf

    return [
        layer.embeddings for layer in model.layers if isinstance(layer, tf.keras.layers.Embedding)
    ]
