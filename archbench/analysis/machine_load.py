"""Runs measured on a busy machine: a 1-minute load average above the cores the run could use.

The records say the chief host's load when training started and ended (`env.load_avg_start`,
`env.load_avg_end`) and the chief's usable cores (`env.cores`); records written before those
keys existed are not judged.
"""

from __future__ import annotations

import math

import pandas as pd

SHOWN = 6  # runs named in the note; the rest are counted


def overloaded_runs(ok: pd.DataFrame) -> pd.DataFrame:
    """Finished runs whose load at the start or the end of training exceeded their cores."""
    peak = ok[["load_avg_start", "load_avg_end"]].max(axis=1)  # one of the two may be missing
    return ok[peak > ok["cores"]]


def _load(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def overload_note(ok: pd.DataFrame) -> str | None:
    """One data-quality line naming the overloaded runs; None when there are none."""
    busy = overloaded_runs(ok)
    if busy.empty:
        return None
    measured = ok["cores"].notna() & ok[["load_avg_start", "load_avg_end"]].notna().any(axis=1)
    named = [
        f"`{row['run_id']}` ({row['workload']}, {row['config']}: load {_load(row['load_avg_start'])} "
        f"at start, {_load(row['load_avg_end'])} at end, on {int(row['cores'])} cores)"
        for _, row in busy.head(SHOWN).iterrows()
    ]
    more = f" and {len(busy) - SHOWN} more" if len(busy) > SHOWN else ""
    return (
        f"{len(busy)} of {int(measured.sum())} runs with a recorded machine load ran with a "
        "1-minute load average above their usable cores, so processes waited for a core "
        "(other work on the machine, or more ranks than cores) and their times may be noisy: "
        + "; ".join(named)
        + more
        + "."
    )
