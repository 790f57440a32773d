"""Horovod's own timeline (`HOROVOD_TIMELINE`), merged into the ring's trace.

Horovod writes it on rank 0 only (the coordinator), one Chrome-trace "process" per tensor: the
negotiation (`NEGOTIATE_ALLREDUCE`: rank 0 waiting until every rank has the tensor ready), then
the operation (`ALLREDUCE`, until its result is handed back to TensorFlow: drawn as a wait,
the activities inside it count as communication) with its activities
(`MEMCPY_IN_FUSION_BUFFER`, `MPI_ALLREDUCE` or `GLOO_ALLREDUCE`, `MEMCPY_OUT_FUSION_BUFFER`, ...). Times are microseconds from
`start_time_since_epoch_in_micros` on rank 0's wall clock. Tensors fused into one buffer share
their activities: those become one span listing the tensors and their bytes.

An allreduce is a collective: every rank runs the same fused operation at the same time, so the
activities are also drawn on the other ranks' tracks (`source` says they come from rank 0's
timeline; they are off there by at most the clock bound and one message latency). The
operation's frame (until the result is back) is not: when a rank's result is back is that
rank's own fact, which its profiler measures (each collective op from its start to its done
callback, `archbench.timeline.tfprofile.collective_calls`); only a rank without those gets rank
0's frame.

A negotiation is drawn per rank where Horovod marks, under its bar, the moment the coordinator
heard that a rank had the tensor ready (an `X` event named by the rank): from then until the bar
ends that rank waits for the others. The mark is late by the rank's message to the coordinator (at
most one cycle), so the wait drawn is at most that much shorter than the real one. Horovod marks
only tensors negotiated outside its response cache (a run's first steps, or with the cache off,
`HOROVOD_CACHE_CAPACITY=0`); a cached tensor's negotiation has no marks and is drawn as the
coordinator's bar on rank 0.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict

from archbench.common.jsonl import loads
from archbench.timeline.spans import COMM, STEP, WAIT, Span

DYNAMIC = "DYNAMIC"  # HOROVOD_TIMELINE=DYNAMIC: started and stopped from Python around the steps
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8}
SOURCE = "horovod timeline (rank 0)"
OPERATION_THREAD = "horovod operation"  # the operations' frames: until the result is back


# What a traced ring run pays beyond its traced steps (measured: rank 0's background thread uses
# about twice the CPU time of a run without the variable, recording or not).
WHOLE_RUN_COST = (
    "HOROVOD_TIMELINE=DYNAMIC for the whole run (Horovod reads it only at start-up): rank 0's "
    "coordinator works harder every cycle, recording or not, so this run's timed steps include "
    "that cost; compare ring's speed on runs without --timeline"
)


def environment() -> dict[str, str]:
    """What Horovod must read at init for the timeline to be started from Python."""
    return {"HOROVOD_TIMELINE": DYNAMIC}


def read_events(path: str) -> list[dict]:
    """The events of a timeline file; Horovod closes the JSON list only at shutdown, so a file
    cut after its last event is closed here."""
    if not os.path.exists(path):
        return []
    text = open(path, encoding="utf-8").read().strip().rstrip(",")
    if not text:
        return []
    if not text.endswith("]"):
        text += "]"
    events = loads(text)  # JsonProblem (one line) for a file that is not Horovod's
    return events if isinstance(events, list) else []


def _bytes(args: dict) -> int | None:
    shape, dtype = args.get("shape"), args.get("dtype")
    if shape is None or dtype is None:
        return None
    dims = [int(d) for d in re.findall(r"\d+", shape)]
    return math.prod(dims) * DTYPE_BYTES.get(dtype.lower().replace("dt_", ""), 4)


def spans(events: list[dict], rank: int = 0) -> list[Span]:
    """The negotiations (a wait on each rank, from its readiness mark) and rank 0's operation
    activities (communication), fused tensors merged, on rank 0's wall clock (ns)."""
    base = next(
        (e["args"]["start_time_since_epoch_in_micros"] for e in events
         if e.get("ph") == "M" and "start_time_since_epoch_in_micros" in e.get("args", {})),
        None,
    )  # fmt: skip
    if base is None:
        return []
    tensors = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})
    }
    stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
    intervals = []  # (name, start_us, end_us, pid, depth)
    sizes: dict[int, int] = {}
    ready: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)  # (pid, start) -> rank: ts
    for event in events:
        phase, pid = event.get("ph"), event.get("pid")
        if phase == "X" and stacks[pid] and stacks[pid][-1][0].startswith("NEGOTIATE"):
            marked = str(event.get("name", ""))
            if marked.isdigit():  # a rank's readiness, under the negotiation's bar
                ready[(pid, stacks[pid][-1][1])].setdefault(int(marked), event["ts"])
        elif phase == "B":
            stacks[pid].append((event["name"], event["ts"]))
        elif phase == "E" and stacks[pid]:
            name, start = stacks[pid].pop()
            intervals.append((name, start, event["ts"], pid, len(stacks[pid])))
            size = _bytes(event.get("args", {}))
            if size is not None:
                sizes[pid] = size
    merged: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    operations: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for name, start, end, pid, depth in intervals:
        if depth == 0 and not name.startswith("NEGOTIATE"):
            operations[(name, start)].append((end, pid))  # the frame, until the result is back
            continue
        merged[(name, start, end)].append(pid)
    result = [
        Span(rank, OPERATION_THREAD, WAIT, f"{name.lower()}: until the result is back",
             start_ns(base, start), start_ns(base, max(end for end, _ in ends)),
             {"activity": name, "tensors": [_short(tensors.get(pid, str(pid))) for _, pid in ends],
              "source": SOURCE})
        for (name, start), ends in operations.items()
    ]  # fmt: skip
    for (name, start, end), pids in sorted(merged.items(), key=lambda item: item[0][1]):
        negotiation = name.startswith("NEGOTIATE")
        names = [_short(tensors.get(pid, str(pid))) for pid in pids]
        args = {
            "activity": name,
            "tensors": names,
            "bytes": sum(sizes.get(pid, 0) for pid in pids) or None,
            "collective": "allreduce" if "ALLREDUCE" in name else name.lower(),
            "source": SOURCE,
        }
        if negotiation:
            label = f"negotiate: wait until every rank has {len(pids)} tensor(s) ready"
            marks: dict[int, int] = {}
            for pid in pids:
                for marked, ts in ready[(pid, start)].items():
                    marks[marked] = min(ts, marks.get(marked, ts))
            if not marks:  # a timeline without readiness marks: the coordinator's bar
                result.append(
                    Span(rank, "horovod", WAIT, label, start_ns(base, start), start_ns(base, end),
                         args)
                )  # fmt: skip
            for marked, ts in sorted(marks.items()):
                source = f"{SOURCE}, from rank {marked}'s readiness mark"
                result.append(
                    Span(marked, "horovod", WAIT, label, start_ns(base, ts), start_ns(base, end),
                         {**args, "source": source}, None if marked == rank else rank)
                )  # fmt: skip
            continue
        label = f"{name.lower()} ({len(pids)} tensor(s))"
        result.append(
            Span(rank, "horovod", COMM, label, start_ns(base, start), start_ns(base, end), args)
        )
    return result


def start_ns(base_us: int, ts_us: int) -> int:
    return (base_us + ts_us) * 1000


def _short(tensor: str) -> str:
    """`.../HorovodAllreduce_gradient_tape_mlp_hidden_MatMul_0` -> the gradient's own name."""
    name = tensor.rsplit("/", 1)[-1]
    return name.removeprefix("HorovodAllreduce_")


def on_every_rank(
    rank0_spans: list[Span], ranks: list[int], measured: frozenset[int] = frozenset()
) -> list[Span]:
    """The collective operations' activities of rank 0's timeline drawn on the other ranks'
    tracks (on rank 0's clock): every rank takes part in the same operation. Negotiations are
    not copied: each rank has its own (`spans`); nor are the operations' frames (until the
    result is back) to the ranks in `measured`, whose own profiler timed their ops' results."""
    copies = []
    for span in rank0_spans:
        if span.cat == STEP or span.name.startswith("negotiate"):
            continue
        for rank in ranks:
            if span.thread == OPERATION_THREAD and rank in measured:
                continue
            if rank != span.rank:
                args = {**span.args, "source": SOURCE + ", a collective every rank takes part in"}
                copies.append(
                    Span(rank, span.thread, span.cat, span.name, span.start_ns, span.end_ns,
                         args, span.rank)
                )  # fmt: skip
    return copies
