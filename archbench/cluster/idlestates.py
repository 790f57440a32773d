"""Keeping the machine's cores polling, not halted, between a dilated node's bursts.

A time-dilated node runs in bursts: each thread computes for 1/D of every CFS period and is
stopped by its cap for the rest. With nothing else to run, the machine's core goes idle; on a
virtual machine whose idle cores halt at once (the guest `haltpoll` cpuidle driver with
`guest_halt_poll_ns` 0), the halt hands the physical core back to the hypervisor, and the burst
that follows costs more CPU: cold caches, a core clocked down. A host of the emulated cluster
computes without such gaps. Measured here, one process capped at 0.2 of a core, TensorFlow's mlp
forward + backward pass (batch 32), four alternating pairs: 0.30-0.43 ms of CPU a pass with the
cores halting when idle, 0.22-0.30 ms with them polling, against 0.26 ms uncapped
(`python benchmarks/idle_states.py` measures it).

So `cluster up` of a dilated cluster lets idle cores poll up to `POLL_NS` before they halt
(haltpoll's `guest_halt_poll_ns`, with the poll starting at that limit and never shrinking), and
the last dilated cluster's `down` puts back what it found. The parameters' original values are
kept in one file for every cluster on the machine (`/run/archbench/idle-states.json`): the first
dilated cluster saves them, the last one restores them, and a `down` after a killed `up` restores
them too. Polling is idle time in the kernel's accounting, so the fidelity probe's idle share of
the machine reads the same. A machine without haltpoll (bare metal, another hypervisor's guest) is
left as it is, and records say so (`fidelity.idle_halt_poll_us` null). So is a machine whose kernel
has haltpoll's parameters but idles with another driver (or none: `cpuidle/current_driver`): the
parameters are there and can be written, but no idle core reads them, and saying that its cores
poll would be false. On such machines the cores poll in user space instead
(`archbench.cluster.idlepollers`).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from archbench.common.jsonl import read_json

PARAMETERS = Path("/sys/module/haltpoll/parameters")
# The cpuidle driver the machine's idle cores run: the parameters count only under haltpoll.
DRIVER = Path("/sys/devices/system/cpu/cpuidle/current_driver")
SAVED = Path("/run/archbench/idle-states.json")
# How long an idle core polls before it halts: longer than any gap between a node's bursts (the
# CFS period, 10-20 ms up to D = 8), so a core waiting for the next period never halts.
POLL_NS = 50_000_000
# (parameter, value while held): the limit; the first poll already that long; no shrinking
HELD = (
    ("guest_halt_poll_ns", str(POLL_NS)),
    ("guest_halt_poll_grow_start", str(POLL_NS)),
    ("guest_halt_poll_allow_shrink", "N"),
)


def driving(driver: Path = DRIVER) -> bool:
    """Whether haltpoll is the driver the machine's idle cores run."""
    try:
        return driver.read_text().strip() == "haltpoll"
    except OSError:
        return False


def _available(parameters: Path, driver: Path) -> bool:
    return driving(driver) and all((parameters / name).exists() for name, _ in HELD)


def hold(parameters: Path = PARAMETERS, saved: Path = SAVED, driver: Path = DRIVER) -> int | None:
    """Lets idle cores poll up to POLL_NS (saving the parameters as they were, unless a cluster
    already did): the limit now set, or None where the machine's idle cores do not run haltpoll
    or its parameters cannot be set."""
    if not _available(parameters, driver):
        return None
    try:
        original = {name: (parameters / name).read_text().strip() for name, _ in HELD}
    except OSError:
        return None
    if not saved.exists():
        saved.parent.mkdir(parents=True, exist_ok=True)
        partial = saved.with_suffix(".partial")
        partial.write_text(json.dumps({"parameters": str(parameters), **original}, indent=1))
        os.replace(partial, saved)  # saved whole, or not at all
    try:
        for name, value in HELD:
            (parameters / name).write_text(value)
    except OSError:  # not ours to set (a read-only /sys in a container): leave it as it was
        release(saved)
        return None
    return POLL_NS


def release(saved: Path = SAVED) -> None:
    """Puts the parameters back as `hold` found them, and forgets them. Safe to repeat."""
    try:
        original = read_json(saved, max_bytes=1 << 20)
    except (OSError, ValueError):
        return
    if not isinstance(original, dict):
        return
    parameters = Path(original.pop("parameters", str(PARAMETERS)))
    # the limit last: shrinking stays off until the limit is back
    for name in sorted(original, key=lambda name: name == "guest_halt_poll_ns"):
        with contextlib.suppress(OSError):
            (parameters / name).write_text(original[name])
    saved.unlink(missing_ok=True)


def poll_us(parameters: Path = PARAMETERS, driver: Path = DRIVER) -> int | None:
    """How long an idle core polls before it halts now, in µs (None: the machine's idle cores
    do not run haltpoll)."""
    if not driving(driver):
        return None
    with contextlib.suppress(OSError, ValueError):
        return int((parameters / "guest_halt_poll_ns").read_text()) // 1000
    return None
