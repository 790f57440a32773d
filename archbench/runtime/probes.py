"""Which steps of a run are probes (`--probe-every`) and which are traced (`--timeline FILE`,
`--timeline-steps N`).

Probes are the steps the loop runs in two timed phases (compute, then exchange) and leaves out of
the step statistics. The traced steps are the first N steps after the warm-up that are not
probes: a traced step is an ordinary fused step, run with the engines' tracing on. Like probes,
traced steps train but are left out of the step statistics, so a traced run also needs at least
one ordinary timed step. The loop (`archbench.runtime.loop`), the tracer (`archbench.timeline.tracer`)
and the checks of a run's flags (`archbench.runtime.config`, the sweep's plan) all ask here, so the rules
have one home and reading them loads nothing.
"""

from __future__ import annotations


def is_probe(step: int, warmup_steps: int, probe_every: int) -> bool:
    """Probe steps: the periodic ones after warm-up, plus the last warm-up step, whose only job
    is to trace the two phase functions so that no counted probe pays for tracing."""
    if probe_every <= 0:
        return False
    if step < warmup_steps:
        return step == warmup_steps - 1
    return (step - warmup_steps) % probe_every == probe_every - 1


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
