"""Where a run's wall time goes, in real seconds: the record's `launch.phases_s`.

A run's wall (from the rank's start to its record) splits into start-up phases, the training
loop and the end:

- `imports`: TensorFlow and the engines (a cold run's; a warm group's later runs have them);
- `data`: reading and preparing the data set;
- `model`: model, optimizer, the architecture's set-up (broadcast, servers' variables);
- `hosts`: the ranks telling each other their hosts, the emulation's probe;
- `first_batch`: from there to the first step (the data pipeline's first batch);
- inside the loop: `warmup` (the first steps: tracing, connections), `train` (the steps the
  record times), `probe_windows` (the compute probes' repeated passes: measurement),
  `evaluation`, `batch_wait` (waiting for the next batch) and `loop_other` (the rest: per-step
  bookkeeping, the final parameters' digest);
- `finish`: gathering the ranks' results, the timeline, the trainer's end.

Real seconds, not virtual: on a time-dilated node start-up runs uncapped and the loop capped, so
only real seconds add up to the wall the study pays.
"""

from __future__ import annotations

import time
from typing import Any

PHASES = (
    "imports",
    "data",
    "model",
    "hosts",
    "first_batch",
    "warmup",
    "train",
    "probe_windows",
    "evaluation",
    "batch_wait",
    "loop_other",
    "finish",
)

# The phases in the four parts a person weighs a study's wall by (the sweep's last line), and
# the rest of a run's own time; what no run holds is the launches and the cluster.
WALL_SPLIT = {
    "training": ("train",),
    "start-up": ("imports", "data", "model", "hosts", "first_batch", "warmup"),
    "evaluation": ("evaluation",),
    "measurement": ("probe_windows",),
    "other in runs": ("batch_wait", "loop_other", "finish"),
}


def wall_split(phases_s: list[dict[str, Any]]) -> dict[str, float]:
    """The runs' `launch.phases_s`, summed into WALL_SPLIT's parts (real seconds)."""
    split = dict.fromkeys(WALL_SPLIT, 0.0)
    for phases in phases_s:
        for part, names in WALL_SPLIT.items():
            for name in names:
                value = phases.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    split[part] += float(value)
    return split


class PhaseClock:
    """Marks the end of each phase; `seconds` is what the record holds."""

    def __init__(self, started_at: float):
        self.started_at = started_at  # time.time() at the run's start
        self.last_mark = started_at
        self.seconds: dict[str, float] = {}

    def end(self, phase: str) -> None:
        """The phase named ends now (it began at the previous mark)."""
        now = time.time()
        self.seconds[phase] = now - self.last_mark
        self.last_mark = now

    def end_loop(self, loop: Any) -> None:
        """The training loop ended now; `loop` (archbench.runtime.loop.LoopResult) splits its time."""
        now = time.time()
        first_step_at = loop.first_step_at or now
        self.seconds["first_batch"] = max(0.0, first_step_at - self.last_mark)
        inside = {
            "warmup": loop.warmup_s,
            # train_s counts the probe steps' own timing; their windows come after it
            "train": loop.train_s,
            "probe_windows": loop.probe_window_s,
            "evaluation": loop.eval_s,
            "batch_wait": loop.batch_wait_s,
        }
        inside["loop_other"] = max(0.0, (now - first_step_at) - sum(inside.values()))
        self.seconds.update(inside)
        self.last_mark = now
