"""PowerSGD (T. Vogels, S. P. Karimireddy, M. Jaggi, *PowerSGD: Practical Low-Rank Gradient
Compression for Distributed Optimization*, NeurIPS 2019, Algorithm 1), in TensorFlow.

For each matrix-shaped gradient (a tensor of more than two axes is viewed as a matrix:
`archbench.compression.matrix_view`) whose rank-r factors are smaller than it, with M = the
gradient plus its error-feedback residual:

    P = M Q;   P <- allreduce-mean(P);   P <- orthonormal basis of P's columns (QR);
    Q = M^T P; Q <- allreduce-mean(Q);   approximation = P Q^T;   residual = M - P Q^T

Q is warm-started: each step starts from the previous step's averaged Q (the first from a
seeded normal draw, the same on every worker). Vectors (biases) and matrices too small to gain
go dense, allreduced with the P factors. Every worker ends the step with the same P and Q, so
the same approximation: the averaged gradient applied everywhere.
"""

from __future__ import annotations

from archbench.compression import CompressionSpec, matrix_view, powersgd_compresses


def orthonormalize(tf, p):
    """An orthonormal basis of p's columns (the Q factor of the reduced QR decomposition)."""
    return tf.linalg.qr(p, full_matrices=False)[0]


def power_step(tf, m, q, allreduce_p, allreduce_q):
    """One PowerSGD round on matrix `m` from `q`: (approximation P Q^T, the new Q)."""
    p = allreduce_p(tf.matmul(m, q))
    p = orthonormalize(tf, p)
    q = allreduce_q(tf.matmul(m, p, transpose_a=True))
    return tf.matmul(p, q, transpose_b=True), q


class PowerSGD:
    """One worker's PowerSGD over a model's variables.

    `allreduce(tensors) -> tensors` averages a list of tensors over the workers (Horovod's
    allreduce with op=Average, each call one phase); with one worker it is the identity."""

    def __init__(self, tf, variables, spec: CompressionSpec, allreduce, seed: int):
        self.tf = tf
        self.variables = list(variables)
        self.spec = spec
        self.allreduce = allreduce
        self.densified: list[str] = []
        self.plan: list[tuple[int, int] | None] = []  # (n, m) of each compressed variable
        self.q: list = []
        self.residual: list = []
        for number, variable in enumerate(self.variables):
            shape = tuple(int(d) for d in variable.shape)
            if not powersgd_compresses(shape, spec.rank):
                self.plan.append(None)
                self.q.append(None)
                self.residual.append(None)
                continue
            n, m = matrix_view(shape)
            self.plan.append((n, m))
            start = tf.random.stateless_normal(
                [m, spec.rank], seed=[seed, number], dtype=tf.float32
            )
            self.q.append(tf.Variable(start, trainable=False, name=f"powersgd_q_{number}"))
            self.residual.append(
                tf.Variable(
                    tf.zeros([n, m], tf.float32), trainable=False, name=f"powersgd_e_{number}"
                )
                if spec.error_feedback
                else None
            )

    @property
    def compressed(self) -> int:
        return sum(view is not None for view in self.plan)

    def exchange(self, grads) -> list:
        """This worker's gradients -> the averaged (approximated) gradients, one per variable."""
        tf = self.tf
        matrices, dense = {}, {}
        for index, (grad, variable, view) in enumerate(zip(grads, self.variables, self.plan)):
            if grad is None:
                grad = tf.zeros_like(variable)
            elif isinstance(grad, tf.IndexedSlices):
                self.densified.append(variable.name)  # at trace time
                grad = tf.convert_to_tensor(grad)
            if view is None:
                dense[index] = grad
                continue
            m = tf.reshape(grad, view)
            if self.residual[index] is not None:
                m = m + self.residual[index]
            matrices[index] = m
        order = list(matrices)
        # phase 1: the P factors, and the gradients that go dense
        ps = [tf.matmul(matrices[i], self.q[i]) for i in order]
        reduced = self.allreduce(ps + [dense[i] for i in dense])
        ps, averaged_dense = reduced[: len(order)], reduced[len(order) :]
        ps = [orthonormalize(tf, p) for p in ps]
        # phase 2: the Q factors
        qs = self.allreduce(
            [tf.matmul(matrices[i], p, transpose_a=True) for i, p in zip(order, ps)]
        )
        out = dict(zip(dense, averaged_dense))
        updates = []
        for i, p, q in zip(order, ps, qs):
            approximation = tf.matmul(p, q, transpose_b=True)
            updates.append(self.q[i].assign(q))
            if self.residual[i] is not None:
                updates.append(self.residual[i].assign(matrices[i] - approximation))
            out[i] = tf.reshape(approximation, self.variables[i].shape)
        with tf.control_dependencies(updates):
            return [tf.identity(out[i]) for i in range(len(self.variables))]
