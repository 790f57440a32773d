"""A worker's TensorFlow ops during its traced steps, from TensorFlow's profiler (`single`,
`ring`, `p2p`: Keras models run eagerly through tf.functions, which TF2 traces only with its
profiler).

The profiler's host tracer records every op kernel an executor thread ran, with its start and
duration, into an XSpace whose times are relative to the session's start. That start is found
on this host's wall clock by marking each traced step with a profiler TraceMe: the wall clock
is read just before the mark begins and just after, so the session's start lies in an interval
per step (intersected over the steps; a few microseconds wide)."""

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
from archbench.timeline.spans import HOST, Span

STEP_MARK = "archbench_traced_step"
EXECUTOR = "ExecutorState::Process"  # an executor thread taking ready nodes, ops inside it
HOST_TRACER_LEVEL = 2  # every op kernel (3 adds framework detail, at a higher cost)


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
        for line in plane.lines:
            if not line.name.startswith("tf_"):
                continue  # the Python threads' events wrap the executor's (dispatch, waits)
            for event in line.events:
                name = names.get(event.metadata_id, "")
                begin = start_ns + line.timestamp_ns + event.offset_ps // 1000
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
        return spans

    def _session_start(self, plane, names: dict, stat_names: dict) -> int:
        """The profiler session's start on this host's wall clock (ns), from the step marks."""
        low, high = -math.inf, math.inf
        for line in plane.lines:
            for event in line.events:
                if names.get(event.metadata_id) != STEP_MARK:
                    continue
                step = next(
                    (s.int64_value or s.uint64_value for s in event.stats
                     if stat_names.get(s.metadata_id) == "step_num"),
                    None,
                )  # fmt: skip
                if step not in self.marks:
                    continue
                relative = line.timestamp_ns + event.offset_ps // 1000
                before, after = self.marks[step]
                low, high = max(low, before - relative), min(high, after - relative)
        if low > high or math.isinf(low):
            raise RuntimeError("the profiler's trace holds no step mark to place it in time")
        return int((low + high) / 2)


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
