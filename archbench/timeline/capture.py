"""Per architecture, what records a worker's traced steps (besides the step frames the tracer
times itself):

| arch | engine events | how |
| --- | --- | --- |
| `single`, `ring`, `p2p` | TensorFlow ops of the tf.functions (forward, backward, update); ring's collective ops, each until its result is back | TensorFlow's profiler (`tfprofile`) |
| `p2p` | the step thread's call into the tf.function that computes the gradients | the trainer's recorder (`recorder.call`) |
| `ring` | Horovod's negotiations and allreduce activities | Horovod's timeline, started from Python (`horovod`) |
| `p2p` | every send, receive and wait, pieces included; averaging and SGD | the exchange's own recorder around its MPI calls |
| `ps` | worker ops and their waits for a thread (scheduled to start), pushes, pulls, the servers' aggregation and update | TensorFlow's step statistics of the traced `session.run`s (`stepstats`) |
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from archbench.common.archs import uses_horovod
from archbench.timeline import horovod, stepstats
from archbench.timeline.recorder import Recorder
from archbench.timeline.spans import Span
from archbench.timeline.tfprofile import ProfilerCapture

PROFILED = frozenset({"single", "ring", "p2p"})


class Captures:
    """The engine captures of one worker process, begun before its first traced step and ended
    after its last."""

    def __init__(self, arch: str, trainer, recorder: Recorder):
        self.arch = arch
        self.trainer = trainer
        self.recorder = recorder
        model = trainer.model
        self.layers = (
            frozenset(layer.name for layer in model.layers) if model is not None else frozenset()
        )
        self.optimizer = (
            type(trainer.optimizer).__name__ if trainer.optimizer is not None else "SGD"
        )
        self.profiler = (
            ProfilerCapture(trainer.rank, self.layers, self.optimizer) if arch in PROFILED else None
        )
        self.horovod_dir = (
            tempfile.mkdtemp(prefix="archbench-horovod-") if uses_horovod(arch) else None
        )

    @property
    def horovod_file(self) -> str:
        return os.path.join(self.horovod_dir, "timeline.json")

    def begin(self) -> None:
        if self.horovod_dir is not None:
            self.trainer.hvd.start_timeline(self.horovod_file, mark_cycles=False)
        if self.profiler is not None:
            self.profiler.begin()

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        if self.profiler is None:
            yield
            return
        with self.profiler.step(step):
            yield

    def end(self) -> None:
        if self.profiler is not None:
            self.profiler.end()
        if self.horovod_dir is not None:
            self.trainer.hvd.stop_timeline()

    def spans(self, windows: list[tuple[int, int]]) -> list[Span]:
        """This process's engine spans of the traced steps (its own wall clock)."""
        found = list(self.recorder.spans)
        if self.profiler is not None:
            found += self.profiler.spans(windows)
        if self.horovod_dir is not None:
            found += horovod.spans(horovod.read_events(self.horovod_file), self.trainer.rank)
            shutil.rmtree(self.horovod_dir, ignore_errors=True)
        num_ps = self.trainer.world_size - self.trainer.num_workers
        for step, metadata in self.recorder.run_metadata:
            found += stepstats.spans(
                metadata, step, self.trainer.rank, num_ps, self.layers, self.optimizer
            )
        return found
