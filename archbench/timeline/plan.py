"""Which steps a run traces (`--timeline FILE`, `--timeline-steps N`), and whether it has them.

The traced steps are the first N steps after the warm-up that are not probes: a traced step is
an ordinary fused step, run with the engines' tracing on. Like probes, traced steps train but
are left out of the step statistics, so the run also needs at least one ordinary timed step.
"""

from __future__ import annotations

from archbench.probes import is_probe


def traced_steps(total_steps: int, warmup_steps: int, probe_every: int, count: int) -> list[int]:
    """The steps (counted from 0) a run of `total_steps` traces; fewer than `count` when the run
    is too short."""
    chosen: list[int] = []
    for step in range(warmup_steps, total_steps):
        if len(chosen) == count:
            break
        if not is_probe(step, warmup_steps, probe_every):
            chosen.append(step)
    return chosen


def timed_steps_left(total_steps: int, warmup_steps: int, probe_every: int, count: int) -> int:
    """Ordinary timed steps left once the warm-up, the probes and the traced steps are out."""
    traced = set(traced_steps(total_steps, warmup_steps, probe_every, count))
    return sum(
        1
        for step in range(warmup_steps, total_steps)
        if step not in traced and not is_probe(step, warmup_steps, probe_every)
    )


def too_short(total_steps: int, warmup_steps: int, probe_every: int, count: int) -> str | None:
    """Why a run of `total_steps` cannot be traced, as one line naming the fix, or None."""
    traced = traced_steps(total_steps, warmup_steps, probe_every, count)
    if len(traced) == count and timed_steps_left(total_steps, warmup_steps, probe_every, count):
        return None
    needed = total_steps + 1
    while len(traced_steps(needed, warmup_steps, probe_every, count)) < count or not (
        timed_steps_left(needed, warmup_steps, probe_every, count)
    ):
        needed += 1
    return (
        f"--timeline traces {count} step(s) after the {warmup_steps} warm-up steps and needs one "
        f"ordinary timed step besides (probes are not traced): a run of {total_steps} steps is "
        f"too short; give --steps {needed} or more, or fewer --timeline-steps"
    )
