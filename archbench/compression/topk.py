"""Top-k sparsification with error feedback, on numpy vectors (p2p) and in TensorFlow (ring, ps).

Each step a worker adds its residual (what it did not send before) to its flat gradient,
keeps the k entries largest in magnitude, sends their values and indices, and keeps the rest
as its new residual (error feedback; with it off the rest is dropped). So over any number of
steps, what was sent plus the residual is exactly the gradients' sum (no mass is lost), up to
float32 rounding of the additions.

k follows the spec's schedule (`CompressionSpec.kept`): with a warm-up it starts at every entry
and falls to ratio x entries.
"""

from __future__ import annotations

import numpy as np

from archbench.compression import CompressionSpec


class TopK:
    """One worker's top-k selector over a flat float32 vector of `elements` entries (numpy)."""

    def __init__(self, elements: int, spec: CompressionSpec):
        self.elements = elements
        self.spec = spec
        self.schedule = spec.kept_schedule(elements)
        self.residual = np.zeros(elements, dtype=np.float32) if spec.error_feedback else None
        self.accumulated = np.empty(elements, dtype=np.float32)
        self.step = 0

    @property
    def k(self) -> int:
        """Entries the next `select` keeps."""
        return self.schedule[min(self.step, len(self.schedule) - 1)]

    def select(self, gradient: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) kept this step, indices ascending (int32), values float32; updates
        the residual and advances the schedule."""
        acc = self.accumulated
        if self.residual is not None:
            np.add(gradient, self.residual, out=acc)
        else:
            np.copyto(acc, gradient)
        k = self.k
        if k >= self.elements:
            indices = np.arange(self.elements, dtype=np.int32)
        else:
            magnitude = np.abs(acc)
            indices = np.argpartition(magnitude, self.elements - k)[self.elements - k :]
            indices = np.sort(indices).astype(np.int32)
        values = acc[indices]
        if self.residual is not None:
            np.copyto(self.residual, acc)
            self.residual[indices] = 0.0
        self.step += 1
        return indices, values


class TfTopK:
    """The same selection inside a TensorFlow graph or tf.function, over a flat vector.

    Its state (residual, step) lives in variables created on construction (eagerly, or in the
    graph being built, on the current device)."""

    def __init__(self, tf, elements: int, spec: CompressionSpec, name: str = "topk"):
        self.tf = tf
        self.elements = elements
        self.spec = spec
        schedule = spec.kept_schedule(elements)
        self.last = len(schedule) - 1
        self.schedule = tf.constant(schedule, tf.int32, name=f"{name}_schedule")
        self.step = tf.Variable(tf.constant(0, tf.int64), trainable=False, name=f"{name}_step")
        self.residual = None
        if spec.error_feedback:
            self.residual = tf.Variable(
                tf.zeros([elements], tf.float32), trainable=False, name=f"{name}_residual"
            )

    @property
    def variables(self) -> list:
        return [self.step] + ([self.residual] if self.residual is not None else [])

    def select(self, flat):
        """(indices int32, values float32, updates): `updates` must run with the step (it
        stores the residual and advances the schedule)."""
        tf = self.tf
        acc = flat + self.residual if self.residual is not None else flat
        at = tf.minimum(self.step, tf.constant(self.last, tf.int64))
        k = tf.gather(self.schedule, at)
        _, indices = tf.math.top_k(tf.abs(acc), k=k, sorted=False)
        values = tf.gather(acc, indices)
        with tf.control_dependencies([values]):  # the reads above come first, also in a graph
            updates = [self.step.assign_add(1)]
            if self.residual is not None:
                rest = tf.tensor_scatter_nd_update(acc, indices[:, None], tf.zeros_like(values))
                updates.append(self.residual.assign(rest))
        return indices, values, updates


def flatten(tf, grads, variables) -> tuple:
    """(flat float32 vector of every gradient in order, names of the gradients that came as
    IndexedSlices and were densified)."""
    flat, densified = [], []
    for grad, variable in zip(grads, variables):
        if grad is None:
            grad = tf.zeros_like(variable)
        elif isinstance(grad, tf.IndexedSlices):
            densified.append(variable.name)
            grad = tf.convert_to_tensor(grad)
        flat.append(tf.reshape(grad, [-1]))
    return tf.concat(flat, axis=0), densified


def unflatten(tf, flat, variables) -> list:
    """The flat vector cut back into tensors shaped like `variables`."""
    sizes = [int(np.prod(v.shape)) for v in variables]
    return [tf.reshape(piece, v.shape) for piece, v in zip(tf.split(flat, sizes), variables)]


class TopKAllgather:
    """Sparse allreduce as it is done in practice (ring): every worker selects its top-k,
    allgathers the values and the indices, and sums the W sparse contributions into a dense
    average (the same sum, in rank order, on every worker).

    `allgather(tensor)` concatenates every worker's tensor in rank order (hvd.allgather)."""

    def __init__(self, tf, variables, spec: CompressionSpec, allgather, workers: int):
        self.tf = tf
        self.spec = spec
        self.variables = list(variables)
        self.elements = int(sum(int(np.prod(v.shape)) for v in self.variables))
        self.selector = TfTopK(tf, self.elements, spec)
        self.allgather = allgather
        self.workers = workers
        self.densified: list[str] = []

    def exchange(self, grads) -> list:
        """This worker's gradients -> the averaged dense gradients (one per variable)."""
        tf = self.tf
        flat, densified = flatten(tf, grads, self.variables)
        self.densified.extend(densified)  # at trace time
        indices, values, updates = self.selector.select(flat)
        with tf.control_dependencies(updates):
            every_index = self.allgather(indices)
            every_value = self.allgather(values)
        total = tf.scatter_nd(every_index[:, None], every_value, [self.elements])
        average = total / tf.constant(self.workers, tf.float32)
        return unflatten(tf, average, self.variables)
