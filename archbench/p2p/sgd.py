"""SGD with momentum on one shard of a flat float32 parameter vector, exactly as Keras does it.

Keras 2.15's `tf.keras.optimizers.SGD` (momentum > 0, no Nesterov) computes, in the variable's
dtype: v = -g * lr + v * momentum, then p += v. The same float32 operations here give the same
bits for the same averaged gradient, so a shard owner updates its shard the way every other
architecture updates the whole model.
"""

from __future__ import annotations

import numpy as np


class ShardSGD:
    def __init__(self, length: int, lr: float, momentum: float):
        self.lr = np.float32(lr)
        self.momentum = np.float32(momentum)
        self.velocity = np.zeros(length, dtype=np.float32)
        self.scaled = np.empty(length, dtype=np.float32)

    def apply(self, params: np.ndarray, gradient: np.ndarray) -> None:
        """Updates `params` (a view of the owner's shard) in place from the averaged `gradient`."""
        np.multiply(gradient, self.lr, out=self.scaled)
        np.multiply(self.velocity, self.momentum, out=self.velocity)
        np.subtract(self.velocity, self.scaled, out=self.velocity)
        np.add(params, self.velocity, out=params)

    def apply_range(self, params: np.ndarray, gradient: np.ndarray, low: int, high: int) -> None:
        """`apply` on elements [low, high) of the shard only (`params`: the whole shard;
        `gradient`: the averaged gradient of those elements), with the same operations."""
        velocity, scaled, part = self.velocity[low:high], self.scaled[low:high], params[low:high]
        np.multiply(gradient, self.lr, out=scaled)
        np.multiply(velocity, self.momentum, out=velocity)
        np.subtract(velocity, scaled, out=velocity)
        np.add(part, velocity, out=part)
