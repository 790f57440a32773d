"""Every rank's spans -> one trace in the Chrome Trace Event Format, on one clock, in virtual
time.

The chief gathers each rank's spans (each on its own host's wall clock), moves them onto rank
0's clock with the measured offsets (`archbench.timeline.clock`), derives the spans only the
whole job shows (`archbench.timeline.derive`, Horovod's collectives on every rank), and writes
one process per rank (parameter servers included) with a thread per row: the step frame, each
compute thread, the network or MPI calls, Horovod's activities. Timestamps are microseconds of
virtual time from the start of the first traced step: (rank 0's clock - that start) / D, D the
chief's dilation factor (`archbench.runtime.emulation.factor`; 1 off a dilated node); durations are
virtual too. The trace's `otherData` says so, with D and the clock bounds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from archbench.common.archs import SERVER_ROLE, has_servers, owns_shards, uses_horovod
from archbench.runtime.emulation import virtual
from archbench.timeline import derive, horovod
from archbench.timeline.clock import Offset
from archbench.timeline.spans import STEP, Span
from archbench.timeline.tfprofile import COLLECTIVE_THREAD
from archbench.timeline.traceformat import complete, metadata

THREAD_ORDER = (
    "step", "python", "engine call", "compute", "network", "mpi", "collective", "horovod",
    "for worker",
)  # fmt: skip


def _on_reference_clock(span: Span, offsets: list[Offset]) -> Span:
    offset = offsets[span.clock]
    return Span(
        span.rank, span.thread, span.cat, span.name,
        int(offset.to_reference(span.start_ns)), int(offset.to_reference(span.end_ns)),
        span.args,
    )  # fmt: skip


def _inside_steps(spans: list[Span]) -> list[Span]:
    """Spans that meet a traced step of their rank (servers: the workers' steps), clipped."""
    windows: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    by_step: dict[int, list[int]] = defaultdict(list)
    for span in spans:
        if span.cat == STEP:
            windows[span.rank].append((span.start_ns, span.end_ns, span.args["step"]))
            by_step[span.args["step"]] += [span.start_ns, span.end_ns]
    kept = []
    for span in spans:
        if span.cat == STEP:
            kept.append(span)
            continue
        own = windows.get(span.rank) or [
            (min(times), max(times), step) for step, times in by_step.items()
        ]
        if span.args.get("step") is not None:  # already placed in a step: only that one
            own = [window for window in own if window[2] == span.args["step"]]
        for low, high, step in own:
            if span.start_ns < high and span.end_ns > low:
                args = span.args if span.args.get("step") == step else {**span.args, "step": step}
                start, end = max(span.start_ns, low), min(span.end_ns, high)
                kept.append(Span(span.rank, span.thread, span.cat, span.name, start, end, args))
                break
    return kept


def server_frames(spans: list[Span], servers: list[int]) -> list[Span]:
    """A step frame on each server's track: from the first worker's start of the step to the
    last worker's end (a server has no step of its own)."""
    by_step: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        if span.cat == STEP:
            by_step[span.args["step"]].append(span)
    frames = []
    for step, frames_of_step in by_step.items():
        low = min(s.start_ns for s in frames_of_step)
        high = max(s.end_ns for s in frames_of_step)
        for server in servers:
            frames.append(
                Span(server, "step", STEP, f"step {step} (the workers')", low, high,
                     {"step": step, "source": "derived: the workers' step frames"})
            )  # fmt: skip
    return frames


def arrange(gathered: list[Span], offsets: list[Offset], arch: str, roles: list[str]) -> list[Span]:
    """Every span on rank 0's clock, with the derived ones, inside the traced steps."""
    spans = [_on_reference_clock(span, offsets) for span in gathered]
    workers = [rank for rank, role in enumerate(roles) if role != SERVER_ROLE]
    servers = [rank for rank, role in enumerate(roles) if role == SERVER_ROLE]
    if uses_horovod(arch):  # rank 0's collectives, each in its step, on every rank in that step
        rank0 = [s for s in spans if s.thread.startswith("horovod") and s.rank == 0]
        frames0 = [s for s in spans if s.cat == STEP and s.rank == 0]
        measured = frozenset(s.rank for s in spans if s.thread == COLLECTIVE_THREAD)
        spans += horovod.on_every_rank(_inside_steps(frames0 + rank0), workers, measured)
    if owns_shards(arch):  # the shard owners' exchange records its receives
        spans = derive.receive_waits(spans)
    if has_servers(arch):
        spans += derive.server_waits(spans, workers)
        spans += server_frames(spans, servers)
    spans = _inside_steps(spans)
    if uses_horovod(arch):
        spans += derive.horovod_queue(spans)
    if has_servers(arch):
        spans += derive.server_idle(spans, servers)
    return spans + derive.host_edges(spans)


def _lanes(spans: list[Span]) -> dict[int, tuple[int, str]]:
    """(tid, thread name) per span index: one thread per (rank, row), split into lanes where
    spans would partly overlap (the format wants events on a thread to nest)."""
    rows: dict[tuple[int, str], list[int]] = defaultdict(list)
    for index, span in enumerate(spans):
        rows[(span.rank, span.thread)].append(index)
    placed: dict[int, tuple[int, str]] = {}
    next_tid: dict[int, int] = defaultdict(int)

    def order(key: tuple[int, str]) -> tuple:
        rank, thread = key
        first = next((i for i, p in enumerate(THREAD_ORDER) if thread.startswith(p)), 99)
        return (rank, first, thread)

    for rank, thread in sorted(rows, key=order):
        lane_ends: list[int] = []
        lane_tids: list[int] = []
        for index in sorted(rows[(rank, thread)], key=lambda i: spans[i].start_ns):
            span = spans[index]
            lane = next((k for k, end in enumerate(lane_ends) if end <= span.start_ns), None)
            if lane is None:
                lane_ends.append(span.end_ns)
                lane_tids.append(next_tid[rank])
                next_tid[rank] += 1
                lane = len(lane_ends) - 1
            lane_ends[lane] = span.end_ns
            name = thread if lane == 0 else f"{thread} ({lane + 1})"
            placed[index] = (lane_tids[lane], name)
    return placed


def trace(spans: list[Span], dilation: float, describe: dict[str, Any]) -> dict:
    """The trace object: one process per rank (named by `describe['ranks']`), virtual µs."""
    frames = [s for s in spans if s.cat == STEP]
    origin = min(s.start_ns for s in frames) if frames else 0

    def micros(t_ns: float) -> float:
        return round(virtual((t_ns - origin) / 1000.0, dilation), 3)

    events = []
    for rank, name in enumerate(describe["ranks"]):
        events.append(metadata("process_name", rank, name))
        events.append(metadata("process_sort_index", rank, rank))
    threads_named: set[tuple[int, int]] = set()
    for index, (tid, thread) in sorted(_lanes(spans).items()):
        span = spans[index]
        if (span.rank, tid) not in threads_named:
            threads_named.add((span.rank, tid))
            events.append(metadata("thread_name", span.rank, thread, tid))
            events.append(metadata("thread_sort_index", span.rank, tid, tid))
        start = micros(span.start_ns)
        duration = max(0.0, round(micros(span.end_ns) - start, 3))
        args = span.args
        if "throttled_s" in args:  # real seconds -> virtual µs, as every time in the trace
            args = {k: v for k, v in args.items() if k != "throttled_s"}
            args["throttled_us"] = round(virtual(span.args["throttled_s"] * 1e6, dilation), 3)
        events.append(complete(span.name, span.cat, start, duration, span.rank, tid, args))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            **describe["meta"],
            "time": "virtual microseconds since the first traced step began on rank 0's clock: "
            "(rank 0's clock - that start) / D",
            "dilation_factor_D": dilation,
        },
    }
