"""Where a traced step's time went, read from a trace (the file `--timeline` writes, or the
same object before it is written): per rank and step, a partition of the step into

- `compute`: forward or backward ops ran, and no communication; or the step's thread was in
  its call into the engine computing the step (a `compute` span) and no span below covers that
  time (the call's time around and between the engine's events: TensorFlow starting the
  function before its first op, an executor stopped by a CPU budget, the results waiting for
  the thread to run again);
- `comm_hidden`: communication while the same rank computed (forward, backward or update ops):
  the overlap;
- `comm_exposed`: communication while the rank computed nothing;
- `update`: optimizer or server-side update ops, and no communication;
- `wait`: the rank blocked on others, and nothing of the above;
- `host`: Python and the runtime around the engine's events, and nothing of the above;
- `stopped`: the rank's process stopped by its node's CPU budget, where the trace places the stop
  (`stopped` spans, sampled from the kernel's counters on an emulated node), and nothing above;
- `throttled`: no span, but the rank's CPU budget had stopped its node (the budget group's
  throttled time during the step, `args.throttled_us` of the step frame, up to the gap it
  explains: the kernel counts it, no engine can record it), in a step whose stops were not
  sampled (a trace without `stopped` spans: the stops' places unknown);
- `unaccounted`: no span and no throttling (`coverage` = 1 - unaccounted / step;
  `span_coverage` = 1 - (throttled + unaccounted) / step, the share the spans alone account for).

`overlap` = comm_hidden / (comm_hidden + comm_exposed): the share of the rank's communication
time during which it was computing. The critical path of a step walks back from the span that
ended last: each link is the span that ended last before the previous one began (on any rank),
merging a rank's back-to-back spans of one kind, so it names what the last span waited on.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from archbench.common.archs import SERVER_ROLE
from archbench.timeline import intervals as iv
from archbench.timeline.spans import (
    BACKWARD,
    COMM,
    COMPUTE,
    COMPUTING,
    FORWARD,
    HOST,
    STEP,
    STOPPED,
    UPDATE,
    WAIT,
)
from archbench.timeline.traceformat import events_of

PARTS = (
    "compute", "comm_hidden", "comm_exposed", "update", "wait", "host", "stopped", "throttled",
    "unaccounted",
)  # fmt: skip
CRITICAL_LINKS = 6
MERGE_GAP_US = 50.0  # a rank's spans of one kind closer than this are one block on the path


@dataclass
class StepBreakdown:
    rank: int
    step: int
    role: str
    step_s: float
    compute: float
    comm_hidden: float
    comm_exposed: float
    update: float
    wait: float
    host: float
    stopped: float
    throttled: float
    unaccounted: float

    @property
    def comm(self) -> float:
        return self.comm_hidden + self.comm_exposed

    @property
    def overlap(self) -> float | None:
        return self.comm_hidden / self.comm if self.comm > 0 else None

    @property
    def coverage(self) -> float:
        return 1 - self.unaccounted / self.step_s if self.step_s > 0 else 0.0

    @property
    def span_coverage(self) -> float:
        gap = self.throttled + self.unaccounted
        return 1 - gap / self.step_s if self.step_s > 0 else 0.0


def _roles(trace: dict) -> dict[int, str]:
    names = {
        e["pid"]: e["args"]["name"]
        for e in events_of(trace)
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    return {pid: ("ps" if ": ps" in name else "worker") for pid, name in names.items()}


def spans_by_step(trace: dict) -> dict[tuple[int, int], dict[str, Any]]:
    """{(rank, step): {"frame": (start, end), "events": [...]}} in µs."""
    groups: dict[tuple[int, int], dict[str, Any]] = defaultdict(lambda: {"events": []})
    for event in events_of(trace):
        if event.get("ph") != "X" or "step" not in event.get("args", {}):
            continue
        key = (event["pid"], event["args"]["step"])
        if event.get("cat") == STEP:
            groups[key]["frame"] = (event["ts"], event["ts"] + event["dur"])
            groups[key]["throttled_us"] = event["args"].get("throttled_us", 0.0)
            groups[key]["stops_sampled"] = bool(event["args"].get("stops_sampled"))
        else:
            groups[key]["events"].append(event)
    return {key: value for key, value in groups.items() if "frame" in value}


def breakdowns(trace: dict) -> list[StepBreakdown]:
    """The partition of every rank's every traced step (seconds)."""
    roles = _roles(trace)
    return [
        StepBreakdown(rank, step, roles.get(rank, "worker"), *_partition(group))
        for (rank, step), group in sorted(spans_by_step(trace).items())
    ]


def _partition(group: dict[str, Any]) -> list[float]:
    """[step, compute, comm_hidden, comm_exposed, update, wait, host, stopped, throttled,
    unaccounted] (seconds)."""
    low, high = group["frame"]
    by_cat: dict[str, list[iv.Interval]] = defaultdict(list)
    for event in group["events"]:
        by_cat[event.get("cat")].append((event["ts"], event["ts"] + event["dur"]))

    def union(*cats: str) -> list[iv.Interval]:
        return iv.clip(iv.union(i for cat in cats for i in by_cat[cat]), low, high)

    computing = union(*COMPUTING)
    comm = union(COMM)
    passes = union(FORWARD, BACKWARD)
    hidden = iv.intersect(comm, computing)
    exposed = iv.subtract(comm, computing)
    update = iv.subtract(iv.subtract(union(UPDATE), comm), passes)
    passes = iv.subtract(passes, comm)
    taken = iv.union(computing + comm)
    wait = iv.subtract(union(WAIT), taken)
    taken = iv.union(taken + wait)
    host = iv.subtract(union(HOST), taken)
    taken = iv.union(taken + host)
    called = iv.subtract(union(COMPUTE), taken)  # the compute call's time its events leave
    passes = iv.union(passes + called)
    taken = iv.union(taken + called)
    stopped = iv.subtract(union(STOPPED), taken)
    taken = iv.union(taken + stopped)
    step = (high - low) / 1e6
    parts = [
        iv.length(part) / 1e6 for part in (passes, hidden, exposed, update, wait, host, stopped)
    ]
    gap = max(0.0, step - iv.length(taken) / 1e6)
    # sampled stops are all spans already: the step's total says nothing more of its gaps
    unplaced = 0.0 if group.get("stops_sampled") else group["throttled_us"] / 1e6
    throttled = min(gap, unplaced)
    return [step, *parts, throttled, gap - throttled]


def critical_path(trace: dict, step: int) -> list[dict]:
    """The chain back from the span of `step` that ended last (see the module's docstring)."""
    blocks = _blocks(
        e
        for (_, s), g in spans_by_step(trace).items()
        if s == step
        for e in g["events"]
        if e.get("cat") != COMPUTE  # a call holds the work it waited on: the path names that
    )
    if not blocks:
        return []
    chain = [max(blocks, key=lambda b: (b["end"], b["cat"] != WAIT))]
    while len(chain) < CRITICAL_LINKS:
        start = chain[-1]["start"]
        earlier = [b for b in blocks if b["end"] <= start and b not in chain and b["cat"] != HOST]
        if not earlier:
            break
        chain.append(max(earlier, key=lambda b: b["end"]))
    return [
        {"rank": b["rank"], "name": b["name"], "cat": b["cat"],
         "start_ms": round(b["start"] / 1000, 3), "end_ms": round(b["end"] / 1000, 3)}
        for b in chain
    ]  # fmt: skip


def _blocks(events) -> list[dict]:
    """A rank's back-to-back events of one category and name merged into blocks."""
    merged: list[dict] = []
    for event in sorted(events, key=lambda e: (e["pid"], e.get("cat"), e["name"], e["ts"])):
        end = event["ts"] + event["dur"]
        last = merged[-1] if merged else None
        if (
            last is not None
            and (last["rank"], last["cat"], last["name"])
            == (event["pid"], event.get("cat"), event["name"])
            and event["ts"] <= last["end"] + MERGE_GAP_US
        ):
            last["end"] = max(last["end"], end)
            continue
        merged.append(
            {"rank": event["pid"], "cat": event.get("cat"), "name": event["name"],
             "start": event["ts"], "end": end}
        )  # fmt: skip
    return merged


def median_step(rows: list[StepBreakdown]) -> int | None:
    """The traced step whose (slowest rank's) length is the median one."""
    by_step: dict[int, float] = defaultdict(float)
    for row in rows:
        by_step[row.step] = max(by_step[row.step], row.step_s)
    if not by_step:
        return None
    ordered = sorted(by_step, key=lambda s: (by_step[s], s))
    return ordered[(len(ordered) - 1) // 2]


def summary(trace: dict) -> dict[str, Any]:
    """The record's `timeline` figures: medians over the workers' traced steps (seconds), the
    overlap over all their communication, each rank's overlap, the least coverage, and the
    critical path of the median step."""
    rows = breakdowns(trace)
    workers = [row for row in rows if row.role != SERVER_ROLE]
    if not workers:
        return {"traced_steps": 0}
    comm = sum(row.comm for row in workers)
    per_rank: dict[int, list[StepBreakdown]] = defaultdict(list)
    for row in workers:
        per_rank[row.rank].append(row)
    step = median_step(workers)
    figures = {
        "traced_steps": len({row.step for row in workers}),
        "step_s": statistics.median(row.step_s for row in workers),
        **{f"{part}_s": statistics.median(getattr(row, part) for row in workers) for part in PARTS},
        "comm_s": statistics.median(row.comm for row in workers),
        "overlap": sum(row.comm_hidden for row in workers) / comm if comm > 0 else None,
        "overlap_per_rank": {
            str(rank): _overlap(group) for rank, group in sorted(per_rank.items())
        },
        "coverage_min": min(row.coverage for row in workers),
        "span_coverage_min": min(row.span_coverage for row in workers),
        "span_coverage_median": statistics.median(row.span_coverage for row in workers),
        "median_step": step,
        "critical_path": critical_path(trace, step) if step is not None else [],
    }
    return figures


def _overlap(rows: list[StepBreakdown]) -> float | None:
    comm = sum(row.comm for row in rows)
    return sum(row.comm_hidden for row in rows) / comm if comm > 0 else None
