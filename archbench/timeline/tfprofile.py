"""A worker's TensorFlow ops during its traced steps, from TensorFlow's profiler (`single`,
`ring`, `p2p`: Keras models run eagerly through tf.functions, which TF2 traces only with its
profiler).

The profiler's host tracer records every op kernel an executor thread ran, with its start and
duration, into an XSpace whose times are relative to the session's start. That start is found
on this host's wall clock by marking each traced step with a profiler TraceMe: the wall clock
is read just before the mark begins and just after, so the session's start lies in an interval
per step (intersected over the steps; a few microseconds wide).

An asynchronous kernel (Horovod's collectives: `HorovodAllreduce`, `HorovodAllgather`) is two
events: the executor hands the op over (`ExecutorState::ProcessAsync::Start`, on its thread)
and the collective's done callback hands the result back (`ExecutorState::ProcessAsync::Done`,
on the thread that calls it, Horovod's background thread). From one to the other the op's
consumers wait for the result: a `wait` span per collective op, on this rank's own clock
(`collective_calls`), the rank's own measure of when its result was back."""

from __future__ import annotations

import contextlib
import glob
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

from archbench.timeline.ops import TRIVIAL_TYPES, classify
from archbench.timeline.spans import HOST, WAIT, Span

STEP_MARK = "archbench_traced_step"
EXECUTOR = "ExecutorState::Process"  # an executor thread taking ready nodes, ops inside it
HOST_TRACER_LEVEL = 2  # every op kernel (3 adds framework detail, at a higher cost)
ASYNC_START = "ExecutorState::ProcessAsync::Start"  # an asynchronous kernel handed its inputs
ASYNC_DONE = "ExecutorState::ProcessAsync::Done"  # ... and its done callback, results back
COLLECTIVE_KERNELS = "Horovod"  # the kernel types whose start and done are drawn (a prefix)
COLLECTIVE_THREAD = "collective ops"  # their row on the rank's track
COLLECTIVE_SOURCE = (
    "tensorflow profiler, this rank's clock: the op handed to the collective "
    "(ProcessAsync::Start) to its done callback (ProcessAsync::Done)"
)


class ProfilerCapture:
    def __init__(self, rank: int, layers: frozenset[str], optimizer: str):
        self.rank = rank
        self.layers = layers
        self.optimizer = optimizer
        self.logdir = tempfile.mkdtemp(prefix="archbench-profile-")
        self.marks: dict[int, tuple[int, int]] = {}  # step -> wall clock around its mark

    def begin(self) -> None:
        # deferred: TensorFlow; `archbench train --help` imports this module
        import tensorflow as tf

        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=HOST_TRACER_LEVEL, python_tracer_level=0, device_tracer_level=1
        )
        tf.profiler.experimental.start(self.logdir, options=options)

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        # deferred: TensorFlow; `archbench train --help` imports this module
        import tensorflow as tf

        before = time.time_ns()
        with tf.profiler.experimental.Trace(STEP_MARK, step_num=step):
            self.marks[step] = (before, time.time_ns())
            yield

    def end(self) -> None:
        # deferred: TensorFlow; `archbench train --help` imports this module
        import tensorflow as tf

        tf.profiler.experimental.stop()

    def spans(self, windows: list[tuple[int, int]]) -> list[Span]:
        """The ops that ran inside the traced steps' windows (wall-clock ns, this host)."""
        try:
            plane = _host_plane(self.logdir)
        finally:
            shutil.rmtree(self.logdir, ignore_errors=True)
        if plane is None:
            return []
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        start_ns = self._session_start(plane, names, stat_names)
        spans = []
        threads: dict[int, str] = {}
        asynchronous: list[tuple[str, str, str, int]] = []  # (event, kernel type, op, ns)
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                begin = start_ns + line.timestamp_ns + event.offset_ps // 1000
                if name in (ASYNC_START, ASYNC_DONE):  # any thread: Done on the collective's
                    stats = _stats(event, stat_names)
                    kernel = str(stats.get("kernel_type", ""))
                    if kernel.startswith(COLLECTIVE_KERNELS):
                        asynchronous.append((name, kernel, str(stats.get("name", "")), begin))
                    continue
                if not line.name.startswith("tf_"):
                    continue  # the Python threads' events wrap the executor's (dispatch, waits)
                end = begin + event.duration_ps // 1000
                if not any(low <= begin < high for low, high in windows):
                    continue
                thread = threads.setdefault(line.id, f"compute thread {len(threads) + 1}")
                if name == EXECUTOR:  # the executor taking nodes (small ops among them) in turn
                    spans.append(
                        Span(self.rank, f"{thread} runtime", HOST, "TensorFlow executor", begin,
                             end, {"source": "tensorflow profiler"})
                    )  # fmt: skip
                if ":" not in name or "::" in name:
                    continue  # other bookkeeping, not an op
                op, op_type = name.rsplit(":", 1)
                if op_type in TRIVIAL_TYPES:
                    continue
                cat, label, layer = classify(op, op_type, self.layers, self.optimizer)
                args = {"op": op, "type": op_type, "source": "tensorflow profiler"}
                if layer:
                    args["layer"] = layer
                spans.append(Span(self.rank, thread, cat, label, begin, end, args))
        return spans + collective_calls(asynchronous, windows, self.rank)

    def _session_start(self, plane, names: dict, stat_names: dict) -> int:
        """The profiler session's start on this host's wall clock (ns), from the step marks."""
        low, high = -math.inf, math.inf
        for line in plane.lines:
            for event in line.events:
                if names.get(event.metadata_id) != STEP_MARK:
                    continue
                step = _stats(event, stat_names).get("step_num")
                if step not in self.marks:
                    continue
                relative = line.timestamp_ns + event.offset_ps // 1000
                before, after = self.marks[step]
                low, high = max(low, before - relative), min(high, after - relative)
        if low > high or math.isinf(low):
            raise RuntimeError("the profiler's trace holds no step mark to place it in time")
        return int((low + high) / 2)


def collective_calls(
    events: list[tuple[str, str, str, int]], windows: list[tuple[int, int]], rank: int
) -> list[Span]:
    """A `wait` span per collective op of the traced steps, from its start to its done callback
    (`events`: (ASYNC_START or ASYNC_DONE, kernel type, op name, wall-clock ns)): each start
    paired with the first done of the same op after it."""
    starts: dict[str, list[tuple[int, str]]] = {}
    dones: dict[str, list[int]] = {}
    for event, kernel, op, at in sorted(events, key=lambda e: e[3]):
        if event == ASYNC_START:
            starts.setdefault(op, []).append((at, kernel))
        else:
            dones.setdefault(op, []).append(at)
    spans = []
    for op, begun in starts.items():
        ended = iter(dones.get(op, []))
        done = next(ended, None)
        for at, kernel in begun:
            while done is not None and done < at:
                done = next(ended, None)
            if done is None:
                break
            if any(low <= at < high for low, high in windows):
                what = kernel.removeprefix(COLLECTIVE_KERNELS).lower() or "collective"
                spans.append(
                    Span(rank, COLLECTIVE_THREAD, WAIT, f"{what}: until the result is back",
                         at, done, {"op": op, "type": kernel, "source": COLLECTIVE_SOURCE})
                )  # fmt: skip
            done = next(ended, None)
    return spans


def _stats(event, stat_names: dict) -> dict:
    """An XEvent's stats by name (a string stat may be stored as a reference to a name)."""
    found = {}
    for stat in event.stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind) if kind else None
        if kind == "ref_value":
            value = stat_names.get(value, value)
        found[stat_names.get(stat.metadata_id, "")] = value
    return found


def _host_plane(logdir: str):
    # deferred: TensorFlow; `archbench train --help` imports this module
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        return None
    space = xplane_pb2.XSpace()
    with open(files[0], "rb") as handle:
        space.ParseFromString(handle.read())
    return next((plane for plane in space.planes if plane.name == "/host:CPU"), None)
