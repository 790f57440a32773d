"""Did the emulated cluster hold its promise? Each worker's compute against the one-node baseline.

On a real cluster a worker's compute (forward + backward, `timing.compute_s_median_per_rank`)
does not change with the number of workers. On the emulated cluster it does when nodes share
cores or a node's own threads eat its budget, and then every comparison of architectures
measures that instead. So a run on the emulated cluster is judged against the `single` runs of
the same study with the same workload and per-worker batch (which run inside one node's budget), and each `single` run
against the other `single` runs (are the nodes alike?): a worker whose compute differs from that
baseline by more than `DRIFT_LIMIT` is named under the report's *Data quality*, as is every run on
an emulated cluster whose nodes had no CPU budget.

The compute phases of different trainers are not cut at quite the same place, and under a CFS
budget a phase shorter than a period takes the throttled stretches that fall into it: on two
identical nodes a one-rank p2p run's compute median read 0.85x a `single` run's while their step
times agreed to 0.1%, and two identical `single` runs on two nodes read 10.8 and 12.6 ms (cnn,
0.6-CPU nodes, 10 ms period); repeated pairs differed by up to 1.5x. A drift of that size is
within the noise of a phase about one period long; the 2.7-2.9x of two ranks in one budget is
not.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

DRIFT_LIMIT = 0.10
SHOWN = 6  # runs named in a note; the rest are counted


def baselines(ok: pd.DataFrame) -> dict[tuple, float]:
    """Median compute of the `single` runs per (workload, per-worker batch)."""
    single = ok[(ok["arch"] == "single") & ok["compute_s"].notna()]
    return {
        key: float(group["compute_s"].median())
        for key, group in single.groupby(["workload", "batch_size"])
    }


def _reference(ok: pd.DataFrame, run: pd.Series, base: dict[tuple, float]) -> float | None:
    """The baseline a run is judged against: the `single` runs' median compute, or for a
    `single` run the median of the other `single` runs (are the nodes alike?)."""
    if run["arch"] != "single":
        return base.get((run["workload"], run["batch_size"]))
    others = ok[
        (ok["arch"] == "single")
        & (ok["workload"] == run["workload"])
        & (ok["batch_size"] == run["batch_size"])
        & (ok["run_id"] != run["run_id"])
    ]["compute_s"].dropna()
    return float(others.median()) if len(others) else None


def drift_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Per run on the emulated cluster: the worst worker's compute drift from the baseline."""
    base = baselines(ok)
    rows = []
    emulated = ok[ok["emulated"]]
    for _, run in emulated.iterrows():
        reference = _reference(ok, run, base)
        workers = [value for value in run["compute_s_per_worker"] if not math.isnan(value)]
        if reference is None or not workers:
            continue
        ratios = np.array(workers) / reference
        worst = ratios[np.argmax(np.abs(ratios - 1))]
        rows.append(
            {
                "run_id": run["run_id"],
                "workload": run["workload"],
                "config": run["config"],
                "baseline_compute_s": reference,
                "worst_ratio": float(worst),
                "drift": float(abs(worst - 1)),
            }
        )
    return pd.DataFrame(rows)


def fidelity_notes(ok: pd.DataFrame) -> list[str]:
    """Data-quality lines: runs whose workers drifted from the baseline, nodes with no budget."""
    if "emulated" not in ok or not ok["emulated"].any():
        return []
    notes = []
    unbudgeted = ok[ok["emulated"] & ok["cpus_per_node"].isna()]
    if len(unbudgeted):
        notes.append(
            f"{len(unbudgeted)} run(s) ran on an emulated cluster whose nodes had no CPU budget "
            "(`cluster up --cpus-per-node off`): the nodes shared the machine's cores, so their "
            "times describe contention as much as the architecture."
        )
    table = drift_table(ok)
    judged = len(table)
    if ok["emulated"].any() and not judged:
        notes.append(
            "No run on the emulated cluster could be checked for fidelity: the study has no "
            "`single` run of the same workload and per-worker batch to compare each worker's "
            "compute with."
        )
        return notes
    drifted = table[table["drift"] > DRIFT_LIMIT].sort_values("drift", ascending=False)
    if drifted.empty:
        if judged:
            notes.append(
                f"Fidelity: in all {judged} judged runs on the emulated cluster every "
                f"worker's compute was within {DRIFT_LIMIT:.0%} of the one-node `single` baseline "
                f"(worst {table['drift'].max():.1%})."
            )
        return notes
    named = [
        f"`{row['run_id']}` ({row['workload']}, {row['config']}: {row['worst_ratio']:.2f}× the "
        f"baseline's {1000 * row['baseline_compute_s']:.2f} ms)"
        for _, row in drifted.head(SHOWN).iterrows()
    ]
    more = f" and {len(drifted) - SHOWN} more" if len(drifted) > SHOWN else ""
    notes.append(
        f"Fidelity: {len(drifted)} of {judged} judged runs on the emulated cluster had a "
        f"worker whose compute (forward + backward) differed from the one-node `single` "
        f"baseline by more than {DRIFT_LIMIT:.0%}, so the node did not compute like a separate "
        "host of its budget (shared cores, or the run's own threads using the budget): "
        + "; ".join(named)
        + more
        + "."
    )
    return notes
