"""One run's timeline, from the flag to the file: the three calls `archbench.train` makes.

1. `for_run(config, place, data, workers)` before the trainer's set-up: None without
   --timeline; checks that the run is long enough to trace (with --epochs its length is known
   only now: one line, exit status 2); sets what an engine must read at start-up (Horovod's
   dynamic timeline).
2. `Tracer.prepare(trainer)` after set-up, on every rank (collective): measures the clocks'
   offsets and hands the trainer its recorder.
3. The training loop runs each traced step through `Tracer.run_step`; traced steps are left out
   of the step statistics, as probes are (their times are kept to state tracing's cost).
4. `Tracer.finish(...)` after training, on every rank (collective): gathers every rank's spans;
   the chief builds the trace, writes it and returns the record's `timeline` figures.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from archbench.common.archs import uses_horovod
from archbench.common.errors import UsageError
from archbench.runtime.emulation import STOP_SAMPLE_INTERVAL_US, factor, step_throttle, virtual
from archbench.runtime.probes import is_probe, too_short, traced_steps
from archbench.timeline import breakdown, build, clock, horovod
from archbench.timeline.capture import PROFILED, Captures
from archbench.timeline.derive import LOOP
from archbench.timeline.recorder import Recorder
from archbench.timeline.spans import STEP, STOPPED, Span
from archbench.timeline.traceformat import dumps

if TYPE_CHECKING:
    from archbench.runtime.config import TrainConfig
    from archbench.runtime.launch import ProcessPlace
    from archbench.trainers.base import Trainer


def for_run(config: TrainConfig, place: ProcessPlace, data, workers: int) -> Tracer | None:
    """The run's tracer, or None without --timeline (see the module's docstring, step 1)."""
    if config.timeline is None:
        return None
    # deferred: the training loop (numpy) loads only with --timeline
    from archbench.runtime.loop import batch_plan, schedule

    total, _ = schedule(config, batch_plan(config, data, workers))
    problem = too_short(total, config.warmup_steps, config.probe_every, config.timeline_steps)
    if problem:
        raise UsageError(problem)
    if uses_horovod(config.arch):
        os.environ.update(horovod.environment())
    steps = traced_steps(total, config.warmup_steps, config.probe_every, config.timeline_steps)
    return Tracer(config, place, steps)


STOP_SOURCE = (
    "kernel: the budget groups' throttled time (cpu.stat), read every "
    f"{STOP_SAMPLE_INTERVAL_US} us of real time; the stop's end is within that"
)


class Tracer:
    def __init__(self, config: TrainConfig, place: ProcessPlace, steps: list[int]):
        self.config = config
        self.place = place
        self.steps = steps
        self.recorder = Recorder(place.rank)
        self.captures: Captures | None = None
        self.rounds: list | None = None
        self.frames: list[Span] = []
        self.traced_s: list[float] = []
        self.throttle, self.sampler = step_throttle(config.stop_sampler == "on")
        self.stops: list[Span] = []
        self.primer_step = _primer_step(config, steps)

    def prepare(self, trainer: Trainer) -> None:
        """Collective: the clocks' offsets; the trainer's recorder."""
        self.rounds = _clock_rounds(trainer)
        trainer.attach_recorder(self.recorder)
        if trainer.is_worker:
            self.captures = Captures(self.config.arch, trainer, self.recorder)

    def traces(self, step: int) -> bool:
        return step in self.steps

    @contextlib.contextmanager
    def primer(self, step: int) -> Iterator[None]:
        """Around an untraced step's run: the primer step (see `_primer_step`) runs its engine
        call fully traced, and drops what it recorded."""
        if step != self.primer_step:
            yield
            return
        self.recorder.priming = True
        try:
            yield
        finally:
            self.recorder.priming = False

    def run_step(
        self, step: int, kind: str, train_step: Callable[[], float]
    ) -> tuple[float, float]:
        """One traced step: (loss, seconds it took)."""
        captures = self.captures
        if step == self.steps[0]:
            captures.begin()
        self.recorder.active, self.recorder.step = True, step
        before = self.throttle.read()
        if self.sampler is not None:
            self.sampler.start(before)
        try:
            with captures.step(step):
                started_ns, started = time.time_ns(), time.perf_counter()
                loss = train_step()
                elapsed, ended_ns = time.perf_counter() - started, time.time_ns()
        finally:  # a failed step (a warm group goes on to its next run) leaves no sampler behind
            stops = self.sampler.stop() if self.sampler is not None else None
        throttled = self.throttle.since(before)
        self.recorder.active = False
        self.stops += [
            Span(self.place.rank, "cpu budget", STOPPED, "stopped by the node's CPU budget",
                 stop.end_ns - stop.length_ns, stop.end_ns,
                 {"step": step, "source": STOP_SOURCE})
            for stop in stops or []
        ]  # fmt: skip
        self.traced_s.append(elapsed)
        args = {"step": step, "kind": kind, "source": LOOP}
        if stops is not None:
            args["stops_sampled"] = True  # its stops are spans: none left to place
        if throttled is not None:
            args["throttled_s"] = throttled  # a CPU budget stopped the thread running the step
        self.frames.append(
            Span(self.place.rank, "step", STEP, f"step {step}", started_ns, ended_ns, args)
        )
        if step == self.steps[-1]:
            captures.end()
        return loss, elapsed

    def _payload(self) -> dict[str, Any]:
        windows = [(s.start_ns, s.end_ns) for s in self.frames]
        spans = self.frames + self.stops + (self.captures.spans(windows) if self.captures else [])
        return {"spans": [span.as_tuple() for span in spans], "dilation": factor()}

    def finish(self, trainer: Trainer, cluster: dict, timed_step_s: float | None) -> dict | None:
        """Collective: gathers the spans; the chief writes the trace and returns the record's
        `timeline` figures (None elsewhere). `timed_step_s`: the timed steps' median, real s."""
        gathered = trainer.allgather_object(self._payload())
        if not trainer.is_chief:
            return None
        offsets = clock.offsets(self.rounds)
        spans = [Span.from_tuple(t) for payload in gathered for t in payload["spans"]]
        dilation = factor()
        arranged = build.arrange(spans, offsets, self.config.arch, cluster["roles"])
        described = self._describe(cluster, offsets, gathered, dilation)
        trace = build.trace(arranged, dilation, described)
        _write(self.config.timeline, trace)
        figures = breakdown.summary(trace)
        traced = statistics.median(self.traced_s) if self.traced_s else None
        return {
            "file": os.path.abspath(self.config.timeline),
            "steps": self.steps,
            **figures,
            "dilation": dilation,
            "clock_bound_s": virtual(max(o.bound_ns for o in offsets) / 1e9, dilation),
            "cost": {  # both in virtual time (`timed_step_s` comes in real seconds)
                "traced_step_s_median": virtual(traced, dilation),
                "timed_step_s_median": virtual(timed_step_s, dilation),
                "ratio": traced and timed_step_s and traced / timed_step_s,
                **({"whole_run": horovod.WHOLE_RUN_COST} if uses_horovod(self.config.arch) else {}),
            },
        }

    def _describe(
        self, cluster: dict, offsets: list, gathered: list[dict], dilation: float
    ) -> dict[str, Any]:
        config, hosts, roles = self.config, cluster["hosts"], cluster["roles"]
        ranks = [
            f"rank {rank}: {role} on {host}" for rank, (role, host) in enumerate(zip(roles, hosts))
        ]
        return {
            "ranks": ranks,
            "meta": {
                "generator": "archbench --timeline",
                "run_id": config.run_id,
                "arch": config.arch,
                "model": config.model,
                "workers": cluster["num_workers"],
                "traced_steps": self.steps,
                "dilation_factor_per_rank": [payload["dilation"] for payload in gathered],
                "clock": {
                    "method": "offset of each rank's wall clock against rank 0's from rounds "
                    "that each bound it (MPI ping-pongs with rank 0, or allgathers, which no "
                    "rank leaves before every rank entered them); the middle of the rounds' "
                    "common interval, off by at most the bound (archbench.timeline.clock)",
                    "rounds": [len(rounds) for rounds in self.rounds],
                    "offset_us": [round(virtual(o.offset_ns / 1000, dilation), 3) for o in offsets],
                    "bound_us": [round(virtual(o.bound_ns / 1000, dilation), 3) for o in offsets],
                },
            },
        }


def _primer_step(config: TrainConfig, steps: list[int]) -> int | None:
    """ps: the last warm-up step before the first traced one that is not a probe, or None.
    TensorFlow's first fully traced `session.run` in a process costs more than the next ones
    (on a capped node it met a CPU-budget stop its spans cannot show, in the first traced step
    only); run once in the warm-up, that cost falls outside the traced steps."""
    if config.arch in PROFILED or not steps:  # their engines' tracing starts in `begin`
        return None
    for step in range(min(steps[0], config.warmup_steps) - 1, -1, -1):
        if not is_probe(step, config.warmup_steps, config.probe_every):
            return step
    return None


def _clock_rounds(trainer: Trainer) -> list:
    """The clock rounds over MPI's own ping-pongs where the job runs on MPI (round trips of
    microseconds, two ranks at a time: a tight bound), else over the trainer's allgather
    (Horovod over Gloo, ps over gRPC: slower rounds, a wider bound). Collective."""
    try:
        # deferred: mpi4py.rc must be set before MPI is imported
        import mpi4py

        if "mpi4py.MPI" not in sys.modules:
            mpi4py.rc.initialize = False  # only look: a job without MPI must not start it
        # deferred: mpi4py.rc must be set before MPI is imported
        from mpi4py import MPI
    except ImportError:
        MPI = None
    if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        if MPI.COMM_WORLD.Get_size() == trainer.world_size:
            return clock.ping_pong_rounds(MPI.COMM_WORLD)
    return clock.allgather_rounds(trainer.allgather_object)


def _write(path: str, trace: dict) -> None:
    """The trace file, whole or not at all (a temporary file renamed into place)."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".archbench-trace-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(dumps(trace))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
