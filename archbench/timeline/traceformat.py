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
            continue  # `args: null`: nothing below may look inside it
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


# The times archbench writes are virtual microseconds since the first traced step: a time beyond
# this (31 years) is not one of them, and its sums overflow a plot's axis (1e308 + 1e308 = inf).
MAX_TIME_US = 1e15
MAX_STEP = 2**31 - 1


def archbench_problems(trace: dict, limit: int = 20) -> list[str]:
    """What makes a trace that follows the format (`problems` found nothing) unreadable as one
    `--timeline` wrote: the values the breakdown, the critical path and the Gantt chart read
    (each traced span's rank, its step, an integer that names the chart's files, its times, the
    throttled time, the process names, and D). Empty when none; at most `limit`."""
    found: list[str] = []
    meta = trace.get("otherData")
    if not isinstance(meta, dict):
        return ["otherData is not an object"]
    dilation = meta.get("dilation_factor_D", 1)
    if not _number(dilation) or not 1 <= dilation <= 1e6:
        found.append(f"otherData.dilation_factor_D {dilation!r} is not a number >= 1")
    for key in ("arch", "model"):
        if key in meta and not (isinstance(meta[key], str) and meta[key].isprintable()):
            found.append(f"otherData.{key} {meta[key]!r} is not a name on one line")
    for index, event in enumerate(events_of(trace) or []):
        where, args = f"event {index}", event.get("args", {})
        if event.get("ph") == "M" and event.get("name") == "process_name":
            if not isinstance(args.get("name"), str):
                found.append(f"{where}: process_name {args.get('name')!r} is not a string")
        if event.get("ph") != "X" or "step" not in args:
            continue
        step = args["step"]
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
            found.append(f"{where}: step {step!r} is not an integer in 0..{MAX_STEP}")
        if not isinstance(event.get("pid"), int) or isinstance(event.get("pid"), bool):
            found.append(f"{where}: a traced step's span needs an integer pid (its rank)")
        if abs(event["ts"]) > MAX_TIME_US or event["dur"] > MAX_TIME_US:
            found.append(f"{where}: ts or dur beyond {MAX_TIME_US:g} microseconds")
        throttled = args.get("throttled_us", 0.0)
        if not _number(throttled) or not 0 <= throttled <= MAX_TIME_US:
            found.append(f"{where}: throttled_us {throttled!r} is not a number >= 0")
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
