"""Spans the trace derives from the engines' own once every span is on one clock: each is named
for what it is, and its `source` says how it was derived.

- `host_edges` (every worker): Python handing a traced step to the engine, before the step's
  first engine span, and the results coming back after its last; where the step thread timed
  its call into the engine (a `compute` span), that is Python before the call and after its
  return. A CPU-budget stop (`stopped`) is the kernel's, not an engine event: one at a step's
  edge lies inside the edge, which leaves the stop's time out (the process ran nothing then);
- `receive_waits` (p2p): a receive is posted before its sender sends; the part of it before the
  matching send began (the k-th send of that kind from that peer in that step) is a wait for
  the sender, the rest is the transfer;
- `server_waits` (ps): a worker between the end of its last push and the start of its first
  pull waits for the servers (the chief's aggregation of W gradients, the update, its token);
  after its last backward op, it waits for the servers to fetch its gradients wherever no push
  runs (before the first, between two): a server fetches a gradient when its part of the step
  asks for it, and the worker has nothing left to compute;
- `server_idle` (ps): a server runs only what the workers' requests ask for; where no op of the
  step runs on its track, it waits for their next request (it has no loop of its own);
- `horovod_queue` (ring): from the end of a rank's first backward op (a gradient can be handed
  to Horovod from then on) to the first Horovod event of the step on its track, the gradients
  wait in Horovod's queue for its background thread's next cycle and for the other ranks'
  (Horovod records no event for it; its negotiation is recorded on rank 0 only).
"""

from __future__ import annotations

from collections import defaultdict

from archbench.timeline.intervals import subtract, union
from archbench.timeline.spans import BACKWARD, COMM, HOST, STEP, STOPPED, WAIT, Span

LOOP = "the training loop"  # the source of a worker's own step frame (servers' are derived)


def _by_rank_step(spans: list[Span]) -> dict[tuple[int, int], list[Span]]:
    groups: dict[tuple[int, int], list[Span]] = defaultdict(list)
    for span in spans:
        if span.args.get("step") is not None:
            groups[(span.rank, span.args["step"])].append(span)
    return groups


def host_edges(spans: list[Span]) -> list[Span]:
    derived = []
    for (rank, step), group in _by_rank_step(spans).items():
        frames = [s for s in group if s.cat == STEP and s.args.get("source") == LOOP]
        inside = [s for s in group if s.cat not in (STEP, STOPPED)]
        if len(frames) != 1 or not inside:
            continue
        frame = frames[0]
        first = min(s.start_ns for s in inside)
        last = max(s.end_ns for s in inside)
        stops = union((s.start_ns, s.end_ns) for s in group if s.cat == STOPPED)
        args = {"step": step, "source": "derived: the step's frame before/after its engine events"}
        edges = [
            ("host: the step handed to the engine", frame.start_ns, min(first, frame.end_ns)),
            ("host: results back to Python", max(last, frame.start_ns), frame.end_ns),
        ]
        for name, low, high in edges:
            for start, end in subtract([(low, high)], stops):
                derived.append(Span(rank, "python", HOST, name, int(start), int(end), dict(args)))
    return derived


def receive_waits(spans: list[Span]) -> list[Span]:
    """p2p receives split at their matching send's start: returns the spans to use instead of
    the receives (waits and trimmed transfers) and the other spans unchanged."""
    sends: dict[tuple, list[Span]] = defaultdict(list)
    for span in spans:
        if span.cat == COMM and span.args.get("direction") == "send" and "peer" in span.args:
            key = (span.rank, span.args["peer"], span.args.get("kind"), span.args.get("step"))
            sends[key].append(span)
    for group in sends.values():
        group.sort(key=lambda s: s.start_ns)
    seen: dict[tuple, int] = defaultdict(int)
    result = []
    for span in sorted(spans, key=lambda s: s.end_ns):
        if span.cat != COMM or span.args.get("direction") != "receive":
            result.append(span)
            continue
        key = (span.args["peer"], span.rank, span.args.get("kind"), span.args.get("step"))
        ordinal = seen[key]
        seen[key] += 1
        matching = sends.get(key, [])
        if ordinal >= len(matching) or matching[ordinal].start_ns <= span.start_ns:
            result.append(span)
            continue
        sent = min(matching[ordinal].start_ns, span.end_ns)
        waited = {**span.args, "source": "derived: the receive posted before its sender sent"}
        result.append(
            Span(span.rank, span.thread, WAIT, f"wait for rank {span.args['peer']} to send",
                 span.start_ns, sent, waited)
        )  # fmt: skip
        result.append(
            Span(span.rank, span.thread, COMM, span.name, sent, span.end_ns, dict(span.args))
        )
    return result


def server_waits(spans: list[Span], workers: list[int]) -> list[Span]:
    derived = []
    for (rank, step), group in _by_rank_step(spans).items():
        if rank not in workers:
            continue
        pushes = [s for s in group if s.cat == COMM and s.name.startswith("push")]
        pulls = [s for s in group if s.cat == COMM and s.name.startswith("pull")]
        if not pushes or not pulls:
            continue
        backward = [s.end_ns for s in group if s.cat == BACKWARD]
        pushing = union((s.start_ns, s.end_ns) for s in pushes)
        pushed = max(s.end_ns for s in pushes)
        # before the backward pass ends, the worker's own ops (or its executor queue) hold it
        computed = max(backward) if backward else min(s.start_ns for s in pushes)
        fetch = {"step": step, "source": "derived: after the last backward op, no push running "
                 "(a server fetches a tensor when its part of the step asks)"}  # fmt: skip
        for start, end in subtract([(computed, pushed)], pushing):
            derived.append(
                Span(rank, "network", WAIT, "wait for the servers to fetch the gradients",
                     int(start), int(end), dict(fetch))
            )  # fmt: skip
        pulled = min(s.start_ns for s in pulls)
        if pulled > pushed:
            derived.append(
                Span(rank, "network", WAIT, "wait for the servers (aggregation, update, token)",
                     pushed, pulled,
                     {"step": step, "source": "derived: last push's end to first pull's start"})
            )  # fmt: skip
    return derived


def server_idle(spans: list[Span], servers: list[int]) -> list[Span]:
    derived = []
    for (rank, step), group in _by_rank_step(spans).items():
        if rank not in servers:
            continue
        frames = [s for s in group if s.cat == STEP]
        if len(frames) != 1:
            continue
        frame = frames[0]
        busy = union((s.start_ns, s.end_ns) for s in group if s.cat != STEP)
        args = {"step": step, "source": "derived: the server's time in the step with no op of "
                "its own running (it serves what the workers ask for)"}  # fmt: skip
        for start, end in subtract([(frame.start_ns, frame.end_ns)], busy):
            derived.append(
                Span(rank, "requests", WAIT, "wait for the workers' requests", int(start),
                     int(end), dict(args))
            )  # fmt: skip
    return derived


def horovod_queue(spans: list[Span]) -> list[Span]:
    derived = []
    for (rank, step), group in _by_rank_step(spans).items():
        backward = [s.end_ns for s in group if s.cat == BACKWARD]
        handled = [s.start_ns for s in group if s.thread.startswith("horovod")]
        if not backward or not handled or min(handled) <= min(backward):
            continue
        derived.append(
            Span(rank, "horovod queue", WAIT, "gradients with Horovod: its next cycle, the other ranks",
                 min(backward), min(handled),
                 {"step": step, "source": "derived: first backward op's end to Horovod's first "
                  "event of the step"})
        )  # fmt: skip
    return derived
