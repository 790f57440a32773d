"""The Chrome Trace Event Format (the format chrome://tracing, Perfetto and Horovod's timeline
use), as far as archbench writes and reads it: the JSON object form, complete events (`X`) and
metadata events (`M`), and the format's rules a file must follow (`problems`).

The rules checked, from the format's specification: the top level is an object whose
`traceEvents` is a list of event objects (or a bare list of events); every event has a phase
`ph` the format defines; timestamps `ts` and durations `dur` are finite numbers of microseconds,
durations not negative; `pid` and `tid` are integers; a complete event has a `name` and a `dur`;
a metadata event is one of the metadata names with its argument (`name` or `sort_index`);
`B`/`E` events balance on each thread; events on one thread nest properly (one inside the
other, or apart: never partly overlapping); `displayTimeUnit` is `ms` or `ns`; `args` is an
object; and the whole file is JSON without NaN or infinity.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

PHASES = frozenset("BEXiIbnesftPOMNDCcRrv") | {"(", ")"}
METADATA = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}
NEST_SLACK_US = 1e-3  # rounding of microsecond floats


def complete(
    name: str, cat: str, ts_us: float, dur_us: float, pid: int, tid: int, args: dict
) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": ts_us, "dur": dur_us, "pid": pid,
            "tid": tid, "args": args}  # fmt: skip


def metadata(kind: str, pid: int, value: Any, tid: int | None = None) -> dict:
    event = {"name": kind, "ph": "M", "pid": pid, "args": {METADATA[kind]: value}}
    if tid is not None:
        event["tid"] = tid
    return event


def dumps(trace: dict) -> str:
    """The trace as JSON text (raises ValueError on NaN or infinity: the format has none)."""
    return json.dumps(trace, allow_nan=False, separators=(",", ":"))


def events_of(trace: Any) -> list | None:
    if isinstance(trace, list):
        return trace
    if isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list):
        return trace["traceEvents"]
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def problems(trace: Any, limit: int = 20) -> list[str]:
    """What breaks the format's rules in a parsed trace (empty when none), at most `limit`."""
    found: list[str] = []
    events = events_of(trace)
    if events is None:
        return ["the top level is neither a list of events nor an object with a traceEvents list"]
    if isinstance(trace, dict) and trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        found.append(f"displayTimeUnit {trace['displayTimeUnit']!r} is not 'ms' or 'ns'")
    try:
        dumps(trace)
    except (TypeError, ValueError) as exc:
        found.append(f"not plain JSON ({exc})")
    open_durations: dict[tuple, list[float]] = defaultdict(list)
    complete_by_thread: dict[tuple, list[tuple[float, float, int]]] = defaultdict(list)
    for index, event in enumerate(events):
        where = f"event {index}"
        if not isinstance(event, dict):
            found.append(f"{where} is not an object")
            continue
        phase = event.get("ph")
        if phase not in PHASES:
            found.append(f"{where} has no known phase (ph {phase!r})")
            continue
        for key in ("pid", "tid"):
            if key in event and (not isinstance(event[key], int) or isinstance(event[key], bool)):
                found.append(f"{where}: {key} {event[key]!r} is not an integer")
        if "args" in event and not isinstance(event["args"], dict):
            found.append(f"{where}: args is not an object")
        if phase == "M":
            name = event.get("name")
            if name not in METADATA:
                found.append(f"{where}: metadata name {name!r} is not one the format defines")
            elif METADATA[name] not in event.get("args", {}):
                found.append(f"{where}: {name} needs args.{METADATA[name]}")
            continue
        if not _number(event.get("ts")):
            found.append(f"{where}: ts {event.get('ts')!r} is not a finite number")
            continue
        thread = (event.get("pid"), event.get("tid"))
        if phase == "X":
            if not isinstance(event.get("name"), str):
                found.append(f"{where}: a complete event needs a name")
            if not _number(event.get("dur")) or event["dur"] < 0:
                found.append(f"{where}: dur {event.get('dur')!r} is not a number >= 0")
                continue
            complete_by_thread[thread].append((event["ts"], event["ts"] + event["dur"], index))
        elif phase == "B":
            open_durations[thread].append(event["ts"])
        elif phase == "E":
            if not open_durations[thread]:
                found.append(f"{where}: an E event with no B open on its thread")
            elif open_durations[thread].pop() > event["ts"]:
                found.append(f"{where}: ends before its B event began")
    for thread, left in open_durations.items():
        if left:
            found.append(f"thread {thread}: {len(left)} B event(s) never ended")
    for thread, spans in complete_by_thread.items():
        found += _nesting(thread, spans)
    return found[:limit]


def _nesting(thread: tuple, spans: list[tuple[float, float, int]]) -> list[str]:
    """Complete events of one thread must nest or be apart."""
    found, stack = [], []
    for start, end, index in sorted(spans, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= start + NEST_SLACK_US:
            stack.pop()
        if stack and end > stack[-1][1] + NEST_SLACK_US:
            found.append(
                f"thread {thread}: event {index} overlaps event {stack[-1][2]} without nesting"
            )
            continue
        stack.append((start, end, index))
    return found
