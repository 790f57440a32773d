"""A small Transformer encoder: a model archbench does not ship, brought as a user would.

archbench calls `build(input_shape, num_outputs)` on every rank (after seeding TensorFlow) and
trains what it returns. The first axis of a sample is read as a sequence of tokens: the rows of an
image (28x28x1 -> 28 tokens of 28 values) or the time steps of a series window (window x columns).
"""

import tensorflow as tf

HEADS = 2
WIDTH = 32  # the tokens' width inside the encoder
BLOCKS = 2


class PositionEmbedding(tf.keras.layers.Layer):
    """Adds a learned vector per position. A layer, not `x + tf.range(...)`: under a parameter
    server the model is built in a TensorFlow graph, where Keras tensors combine only through
    layers."""

    def build(self, input_shape):
        self.positions = self.add_weight(
            name="positions", shape=tuple(input_shape[1:]), initializer="random_normal"
        )

    def call(self, tokens):
        return tokens + self.positions


def build(input_shape, num_outputs):
    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=input_shape)
    steps = input_shape[0]
    x = layers.Reshape((steps, -1))(inputs)  # one token per row / time step
    x = PositionEmbedding()(layers.Dense(WIDTH)(x))
    for _ in range(BLOCKS):
        attended = layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(x, x)
        x = layers.LayerNormalization()(layers.Add()([x, attended]))
        mixed = layers.Dense(2 * WIDTH, activation="relu")(x)
        x = layers.LayerNormalization()(layers.Add()([x, layers.Dense(WIDTH)(mixed)]))
    x = layers.GlobalAveragePooling1D()(x)
    return tf.keras.Model(inputs, layers.Dense(num_outputs)(x), name="transformer")
