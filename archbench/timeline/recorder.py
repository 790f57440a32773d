"""What a process records itself while a traced step runs: its own spans (p2p's sends, receives
and waits, timed around the MPI calls; the step thread's call into the engine that computes the
step) and TensorFlow's step statistics of the session runs (ps). Inactive outside traced
steps, where every call is a cheap no-op: trainers hold a recorder always (`NULL_RECORDER`
unless the run traces)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from archbench.timeline.spans import COMPUTE, Span

_NOTHING = contextlib.nullcontext()
# The step thread's calls into the engine get a row of their own on the rank's track: the host
# edges on its `python` row overlap a call's head and tail without nesting in it.
CALL_THREAD = "engine call"
CALL_SOURCE = (
    "the step's thread: from its call into the engine to the call's return, results in hand"
)


class _Timed:
    __slots__ = ("recorder", "cat", "name", "thread", "args", "started")

    def __init__(self, recorder: Recorder, cat: str, name: str, thread: str, args: dict):
        self.recorder, self.cat, self.name, self.thread, self.args = (
            recorder, cat, name, thread, args,
        )  # fmt: skip

    def __enter__(self) -> None:
        self.started = time.time_ns()

    def __exit__(self, *exc) -> None:
        self.recorder.add(
            self.cat, self.name, self.started, time.time_ns(), self.thread, **self.args
        )


class Recorder:
    def __init__(self, rank: int = 0):
        self.rank = rank
        self.active = False
        # ps: a warm-up step run fully traced, its statistics dropped (Tracer.primer)
        self.priming = False
        self.step: int | None = None
        self.spans: list[Span] = []
        self.run_metadata: list[tuple[int, Any]] = []  # (step, RunMetadata) of session runs

    def now(self) -> int:
        """This host's clock in ns while recording, else 0 (no clock read)."""
        return time.time_ns() if self.active else 0

    def span(self, cat: str, name: str, thread: str = "mpi", **args: Any):
        """`with recorder.span(cat, name, peer=..., bytes=...):` times the block."""
        if not self.active:
            return _NOTHING
        return _Timed(self, cat, name, thread, args)

    def call(self, work: str):
        """`with recorder.call("forward + backward"):` around the step thread's call into the
        engine that computes `work` (a tf.function), the results read inside the block: a
        `compute` span from the call to its return, on a row of its own. The engine's ops
        fall inside it; the breakdown gives it only the time they leave."""
        if not self.active:
            return _NOTHING
        return _Timed(self, COMPUTE, f"{work} (call)", CALL_THREAD, {"source": CALL_SOURCE})

    def add(self, cat: str, name: str, start_ns: int, end_ns: int, thread: str = "mpi", **args):
        if self.active:
            args["step"] = self.step
            self.spans.append(Span(self.rank, thread, cat, name, start_ns, end_ns, args))

    def session_run_options(self) -> dict[str, Any]:
        """Keyword arguments for a TF1 `session.run` of a traced step: full tracing into a fresh
        RunMetadata kept here (the step statistics of every device the run touched, the
        parameter servers' included); none outside traced steps."""
        if not (self.active or self.priming):
            return {}
        # deferred: TensorFlow; `archbench train --help` imports this module
        import tensorflow as tf

        metadata = tf.compat.v1.RunMetadata()
        if self.active:  # a primer's statistics are dropped
            self.run_metadata.append((self.step, metadata))
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        return {"options": options, "run_metadata": metadata}


NULL_RECORDER = Recorder()  # never activated: what a trainer holds when the run does not trace
