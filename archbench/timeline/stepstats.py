"""A ps step as TensorFlow's distributed runtime saw it: the step statistics of a traced
`session.run` (RunOptions FULL_TRACE), which hold every device the step ran on, the parameter
servers' included, each on its own host's wall clock.

- the worker's device: its forward and backward ops, and the pulled values written into its
  local copy (update);
- each server's device: the accumulators' aggregation, the update of the shards, the tokens
  (their waits), for this worker's step;
- `RecvTensor`: every tensor that crossed the network, timed by the receiver (the transfer's
  RPC, its bytes, sender and receiver): a push (worker -> server) is drawn on both the worker's
  and the server's track, so is a pull (server -> worker).

- the worker's executor queue: each of its ops from the moment the executor scheduled it (it was
  ready) to its start, where that wait is long enough to matter: the op waited for a thread to
  run it (the node's CPU busy, or stopped by its budget). A `compute` span: the step's compute,
  claiming only time no op covers.

The worker's wait for the servers between its pushes and its pulls is drawn when the trace is
built, once both are on one clock (`archbench.timeline.build`).
"""

from __future__ import annotations

import re

from archbench.common.archs import SERVER_ROLE
from archbench.timeline.ops import TRIVIAL_TYPES, classify, classify_server
from archbench.timeline.spans import COMM, COMPUTE, Span

_DEVICE = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# Shorter waits between being scheduled and starting are the executor's ordinary hand-over.
MIN_QUEUED_NS = 20_000
_TRANSFER = re.compile(r"^\[[^\]]*\] \[[^\]]*\] (\S+) from (\S+) to (\S+)")


def device_rank(device: str, num_ps: int) -> tuple[str, int] | None:
    """(job, rank) of a device name; servers are ranks 0..K-1, worker i is rank K + i."""
    match = _DEVICE.search(device)
    if match is None:
        return None
    job, task = match.group(1), int(match.group(2))
    return job, task if job == SERVER_ROLE else num_ps + task


def spans(
    metadata, step: int, rank: int, num_ps: int, layers: frozenset[str], optimizer: str
) -> list[Span]:
    """The spans of one traced step of worker `rank` from its RunMetadata."""
    result: list[Span] = []
    for device in metadata.step_stats.dev_stats:
        owner = device_rank(device.device, num_ps)
        if owner is None:
            continue
        job, device_owner = owner
        if job != SERVER_ROLE:
            result += queued(device.node_stats, step, device_owner)
        for node in device.node_stats:
            start = node.all_start_micros * 1000
            end = start + max(node.all_end_rel_micros, 0) * 1000
            args = {"step": step, "source": "tensorflow step stats", "op": node.node_name}
            if node.node_name == "RecvTensor":
                result += _transfer(node, start, end, args, num_ps, device_owner)
                continue
            op_type = node.timeline_label.split(" = ", 1)[-1].split("(", 1)[0]
            if job == SERVER_ROLE:
                kind = classify_server(node.node_name, op_type)
                if kind is None:
                    continue
                thread = f"for worker {rank - num_ps}"
                result.append(Span(device_owner, thread, *kind, start, end, args))
            elif op_type not in TRIVIAL_TYPES:
                cat, label, layer = classify(node.node_name, op_type, layers, optimizer)
                if layer:
                    args["layer"] = layer
                result.append(Span(device_owner, "compute", cat, label, start, end, args))
    return result


def queued(nodes, step: int, rank: int) -> list[Span]:
    """Each op's wait from being scheduled to its start (see the module's docstring).

    TensorFlow stores an op's scheduled time in nanoseconds in the field named micros
    (`scheduled_micros`), on a clock of its own: the offset to the wall clock is the smallest
    (start - scheduled) of the device's ops, that of an op which started as soon as it was
    scheduled, so every wait is measured from it (an underestimate by that op's hand-over).
    """
    timed = [node for node in nodes if node.scheduled_micros > 0]
    if not timed:
        return []
    offset = min(_start_ns(node) - node.scheduled_micros for node in timed)
    spans = []
    for node in timed:
        scheduled, start = node.scheduled_micros + offset, _start_ns(node)
        if start - scheduled >= MIN_QUEUED_NS:
            args = {
                "step": step,
                "source": "tensorflow step stats (scheduled)",
                "op": node.node_name,
            }
            spans.append(
                Span(
                    rank,
                    "executor queue",
                    COMPUTE,
                    "queued: ready, waiting for a thread",
                    scheduled,
                    start,
                    args,
                )
            )
    return spans


def _start_ns(node) -> int:
    return node.all_start_nanos or node.all_start_micros * 1000


def _transfer(node, start: int, end: int, args: dict, num_ps: int, receiver: int) -> list[Span]:
    match = _TRANSFER.match(node.timeline_label)
    if match is None:
        return []
    tensor, sender_device, receiver_device = match.groups()
    sender = device_rank(sender_device, num_ps)
    if sender is None:
        return []
    sent_by = sender[1]
    size = sum(o.tensor_description.allocation_description.requested_bytes for o in node.output)
    push = sender[0] == "worker"
    worker, server = (sent_by, receiver) if push else (receiver, sent_by)
    args = {**args, "tensor": tensor, "bytes": size, "from_rank": sent_by, "to_rank": receiver}
    what = "push" if push else "pull"
    return [
        Span(worker, "network", COMM, f"{what} {'to' if push else 'from'} ps rank {server}",
             start, end, {**args, "peer": server}, clock_rank=receiver),
        Span(server, "network", COMM, f"{what} {'from' if push else 'to'} worker rank {worker}",
             start, end, {**args, "peer": worker}, clock_rank=receiver),
    ]  # fmt: skip
