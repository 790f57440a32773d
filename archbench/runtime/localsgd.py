"""Synchronization frequency (`--sync-every H`, `--sync-every-warmup-steps N`): which steps
communicate, and what kind of step each one is.

Three kinds of step:

- `sync`: today's synchronous step: the workers' gradients are averaged and one update is
  applied (the architecture's own exchange and optimizer). Every step is one when H = 1, and so
  are the first N steps, so H = 1 runs exactly the code it ran before the setting existed;
- `local`: the worker applies its own gradient with its own optimizer state (SGD momentum kept
  per worker); nothing travels;
- `average`: a local step, then the workers' parameters are averaged (ring: an allreduce of the
  parameters; p2p: the sharded exchange run on the parameter vector; ps: each worker pushes its
  parameter change since the last averaging and the servers add the mean of the W changes).

After the warm-up, steps come in rounds of H: H - 1 local steps, then one averaging step. The
last step of a run always averages, so every worker ends with the same parameters whatever the
run's length. The training loop owns the schedule (`archbench.runtime.loop` tells the trainer the kind of
each step before running it); the trainers own the mechanics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archbench.runtime.settings import applies

SYNC = "sync"
LOCAL = "local"
AVERAGE = "average"
KINDS = (SYNC, LOCAL, AVERAGE)


@dataclass(frozen=True)
class SyncSchedule:
    every: int = 1
    warmup_steps: int = 0
    total_steps: int | None = None  # the run's last step averages (None: unknown)

    @classmethod
    def for_config(cls, config: Any, total_steps: int | None = None) -> SyncSchedule:
        """The schedule of a run; synchronous every step where the setting does not apply."""

        if not applies("sync_every", config.arch):
            return cls(1, 0, total_steps)
        every = int(config.sync_every or 1)
        warmup = int(config.sync_every_warmup_steps or 0)
        return cls(every, warmup, total_steps)

    @property
    def local_steps(self) -> bool:
        """Whether any step may be local (H > 1): the trainer builds its local-step machinery."""
        return self.every > 1

    def kind(self, step: int) -> str:
        """The kind of step `step` (counted from 0)."""
        if self.every == 1 or step < self.warmup_steps:
            return SYNC
        if (step - self.warmup_steps + 1) % self.every == 0:
            return AVERAGE
        if self.total_steps is not None and step == self.total_steps - 1:
            return AVERAGE
        return LOCAL


def comm_record(schedule: SyncSchedule, counts: dict[str, int], bytes_total: float | None) -> dict:
    """The record's `comm` fields of the schedule: H, the warm-up, how many steps of each kind
    ran, and the bytes per step that communicated (`bytes_sent_per_exchange_step`; the
    `bytes_sent_per_step` beside it averages over every step, local ones included)."""
    exchanged = counts.get(SYNC, 0) + counts.get(AVERAGE, 0)
    return {
        "sync_every": schedule.every,
        "sync_every_warmup_steps": schedule.warmup_steps,
        "steps_by_kind": {kind: int(counts.get(kind, 0)) for kind in KINDS},
        "exchange_steps": exchanged,
        "bytes_sent_per_exchange_step": round(bytes_total / exchanged)
        if exchanged and bytes_total is not None
        else None,
    }
