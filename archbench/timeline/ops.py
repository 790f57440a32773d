"""What a TensorFlow op was doing, from its name and type: forward or backward pass (and of
which layer), optimizer update, or other work of the process; and what a parameter server's op
was doing for a step (aggregation, update, waiting, serving a pull)."""

from __future__ import annotations

from archbench.timeline.spans import BACKWARD, FORWARD, HOST, UPDATE, WAIT

# Ops that only hand a value along: too small to draw, and they are neither compute nor waits.
TRIVIAL_TYPES = frozenset(
    {"Const", "VarHandleOp", "ReadVariableOp", "Identity", "NoOp", "_Arg", "_Retval",
     "_SOURCE", "_SINK", "Shape", "_Recv", "_Send", "_HostRecv", "_HostSend"}
)  # fmt: skip
UPDATE_TYPES = ("Assign", "ResourceApply", "ApplyGradient", "ApplyMomentum")
BACKWARD_SCOPES = ("gradient_tape", "gradients")
LOSS_WORDS = ("crossentropy", "SparseSoftmax", "loss")


def classify(op: str, op_type: str, layers: frozenset[str], optimizer: str) -> tuple[str, str, str]:
    """(category, label, layer) of a worker's op, e.g. ("backward", "backward conv1", "conv1")."""
    parts = op.split("/")
    layer = next((part for part in parts if part in layers), "")
    if parts[0] in BACKWARD_SCOPES:
        return BACKWARD, f"backward {layer or 'loss'}", layer or "loss"
    if parts[0] == optimizer or op_type.startswith(UPDATE_TYPES):
        return UPDATE, f"update {layer}".rstrip() if layer else "update", layer
    if layer:
        return FORWARD, f"forward {layer}", layer
    if any(word in op for word in LOSS_WORDS):
        return FORWARD, "forward loss", "loss"
    return HOST, "other op", ""


def classify_server(op: str, op_type: str) -> tuple[str, str] | None:
    """(category, label) of an op a parameter server ran for a worker's step; None for ops
    that only hand values along (they are drawn as the pull or push they serve)."""
    if op_type in TRIVIAL_TYPES:
        return None
    if "TakeGradient" in op_type:
        return WAIT, "aggregate: wait for the workers' gradients (take_grad)"
    if "ApplyGradient" in op_type:
        return UPDATE, "aggregate: add a gradient to the accumulator"
    if "Dequeue" in op_type:
        return WAIT, "wait for the chief's token"
    if "Enqueue" in op_type:
        return UPDATE, "hand out the tokens"
    return UPDATE, "update"
