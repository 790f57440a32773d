"""Which steps of a run are probes (`--probe-every`): the steps the loop runs in two timed phases
(compute, then exchange) and leaves out of the step statistics.

The loop (`archbench.loop`) runs them and the timeline's plan (`archbench.timeline.plan`) keeps
its traced steps off them; both ask here, so the rule has one home.
"""


def is_probe(step: int, warmup_steps: int, probe_every: int) -> bool:
    """Probe steps: the periodic ones after warm-up, plus the last warm-up step, whose only job
    is to trace the two phase functions so that no counted probe pays for tracing."""
    if probe_every <= 0:
        return False
    if step < warmup_steps:
        return step == warmup_steps - 1
    return (step - warmup_steps) % probe_every == probe_every - 1
