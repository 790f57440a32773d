"""Trains a small CNN on Fashion-MNIST for a few hundred steps in one process and saves it, weights
and all, as a `.keras` file: a pre-trained network for archbench to fine-tune under every
architecture (`--model OUT.keras`), as the research notes' transfer-learning case does.

    python examples/pretrain.py OUT.keras
"""

import sys

import numpy as np
import tensorflow as tf

from archbench.workloads.data import FASHION_MNIST_DIR, load_idx_dataset


def main(path: str) -> None:
    tf.keras.utils.set_random_seed(0)
    data = load_idx_dataset("fashion_mnist", FASHION_MNIST_DIR)
    x = data.x_train[:8000].astype(np.float32) / 255.0
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(16, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.BatchNormalization(),
            layers.Flatten(),
            layers.Dense(64, activation="relu"),
            layers.Dense(10),  # logits: archbench trains on logits
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.05, momentum=0.9),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(x, data.y_train[:8000], batch_size=64, epochs=1, verbose=0)
    model.save(path)
    print(f"saved {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/pretrain.py OUT.keras")
    main(sys.argv[1])
