"""What a run learns: classes (cross-entropy on logits, accuracy) or values (mean squared error,
root mean squared error). The `--loss` setting chooses; every trainer and the evaluation take the
loss from here, so the architectures compute the same thing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

LOSSES = ("crossentropy", "mse")


def is_regression(loss: str) -> bool:
    return loss == "mse"


def keras_loss(tf, loss: str):
    """The batch's mean loss as a Keras loss object (the eager trainers')."""
    if is_regression(loss):
        return tf.keras.losses.MeanSquaredError()
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def per_sample_loss(tf, loss: str, y, outputs):
    """One loss per sample (a graph's, and the evaluation's)."""
    if is_regression(loss):
        return tf.keras.losses.mean_squared_error(tf.cast(y, outputs.dtype), outputs)
    return tf.keras.losses.sparse_categorical_crossentropy(y, outputs, from_logits=True)


def label_dtype(tf, loss: str):
    return tf.float32 if is_regression(loss) else tf.int32


def correct_count(loss: str, outputs: np.ndarray, y) -> int | None:
    """Samples classified right, or None for values (no accuracy)."""
    if is_regression(loss):
        return None
    # deferred: the settings import this module, and the train command blocks the stop signals
    # before anything starts numpy's (OpenBLAS's) threads
    import numpy as np

    return int(np.sum(np.argmax(outputs, axis=-1) == np.asarray(y)))
