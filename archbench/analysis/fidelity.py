"""Did the emulated cluster hold its promise? Each worker's compute against the baseline, and the
machine's cores against the nodes' demand.

On a real cluster a worker's compute (forward + backward, `timing.compute_s_median_per_rank`)
does not change with the number of workers. On the emulated cluster it does when nodes share
cores or a node's own threads eat its virtual cores, and then every comparison of architectures
measures that instead. So a run on the emulated cluster is judged against the `single` runs of
the same study with the same workload and per-worker batch, and each `single` run against the
other `single` runs (are the nodes alike?): a worker whose compute differs from that baseline by
more than `DRIFT_LIMIT` is named under the report's *Data quality*.

Part of a compute pass is the engine's own call, not the model's work (`timing.dispatch_s_per_rank`,
the call timed with nothing to compute): the notes give its median per architecture, so a reader
sees how much of a drift is that call (a parameter server's session run costs more than a
tf.function). It is not subtracted: timed once per run apart from the compute passes, it can be as
large as the whole pass and as noisy.

The nodes of one machine also share its memory and caches: two nodes computing at once slow each
other down a little however their cores are capped. A baseline measured with companions (W - 1
copies of the same training on other nodes, `--companions`, `baseline_load: loaded`) sees the
same interference as a W-worker run, so a run with W workers is judged against the baseline run
with W - 1 companions where the study has one (the `single` runs of any load otherwise, and the
note says so).

Each worker's drift has two parts (`timing.compute_core_share_per_rank`, archbench.cluster.cpumeter):
the virtual cores its process's own threads got while computing, and the CPU one pass took of
them. The note names for each drifted run which part moved. The first is the emulation's fault.
The second has several causes, which the note lists: a thread's caches emptied while its cap
stopped it (on a machine whose cache other work shares, a pass capped at 1/D of a core cost
1.2-2.3x its uncapped CPU at a 12.5 ms period, by how much the neighbours took: benchmarks/
cap_cost.py), the machine's own speed when each run ran
(measured here: the same TensorFlow pass cost 0.25-0.69 ms of CPU in capped processes started
minutes apart, against 0.26 ms uncapped, while a plain matrix product cost within 7% of its
uncapped CPU), caches shared with nodes computing at once, the engine's own call, and other
threads of the process working during the pass (a parameter server's gRPC pollers).

On a time-dilated cluster each record also says whether its nodes got what the dilation promised:
a thread that was runnable, not held back by a cap and still not running waited for one of the
machine's cores (`core_wait_share`, per second of CPU), and a machine with no idle time left over
the run had none to spare. Either means the machine was oversubscribed (D too small for the
nodes, or other work on it), and such runs are named too. So is every run on an emulated cluster
whose nodes had no caps at all.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from archbench.analysis import arch_rows
from archbench.archs import is_baseline, sort_key

DRIFT_LIMIT = 0.10
# Waiting for a core per second of CPU a node's threads used: a few percent is the scheduler's
# wake-up latency on a machine with idle cores.
CORE_WAIT_LIMIT = 0.10
# The machine's idle share below which its cores were saturated over a run's window.
MIN_IDLE_SHARE = 0.02
SHOWN = 6  # runs named in a note; the rest are counted


def _load(frame: pd.DataFrame) -> pd.Series:
    """Nodes computing at once per run (older frames: one)."""
    return frame["load_nodes"] if "load_nodes" in frame else pd.Series(1.0, index=frame.index)


def _cpu_per_pass(frame: pd.DataFrame) -> pd.Series:
    """A `single` run's CPU seconds per compute pass (compute x the virtual cores it used; NaN
    where its record metered none)."""
    if "core_share_per_worker" not in frame:
        return pd.Series(math.nan, index=frame.index)
    share = frame["core_share_per_worker"].map(
        lambda shares: shares[0] if isinstance(shares, list) and shares else math.nan
    )
    return frame["compute_s"] * share


def baselines(ok: pd.DataFrame) -> dict[tuple, tuple[float, float]]:
    """(median compute, median CPU seconds per pass) of the `single` runs per (workload,
    per-worker batch, nodes computing at once), and per (workload, per-worker batch) over every
    load."""
    single = ok[arch_rows.baseline(ok) & ok["compute_s"].notna()]
    single = single.assign(load=_load(single), cpu_s=_cpu_per_pass(single))
    table: dict[tuple, tuple[float, float]] = {}
    for columns in (["workload", "batch_size"], ["workload", "batch_size", "load"]):
        for key, group in single.groupby(columns):
            table[key] = (float(group["compute_s"].median()), float(group["cpu_s"].median()))
    return table


def _reference(
    ok: pd.DataFrame, run: pd.Series, base: dict[tuple, tuple[float, float]]
) -> tuple[float, float, bool]:
    """The baseline a run is judged against, (compute, CPU per pass), and whether it ran under
    the same load: the `single` runs' medians at this run's load (any load where the study has
    none), or for a `single` run the medians of the other `single` runs at its load (none where
    it is the only one: baselines under different loads are not alike)."""
    load = run.get("load_nodes", 1.0)
    key = (run["workload"], run["batch_size"])
    if not is_baseline(run["arch"]):
        if (*key, load) in base:
            return (*base[(*key, load)], True)
        return (*base.get(key, (math.nan, math.nan)), False)
    same = (
        arch_rows.baseline(ok)
        & (ok["workload"] == run["workload"])
        & (ok["batch_size"] == run["batch_size"])
        & (ok["run_id"] != run["run_id"])
    )
    at_load = ok[same & (_load(ok) == load)]
    compute = at_load["compute_s"].dropna()
    if not len(compute):
        return math.nan, math.nan, True
    return float(compute.median()), float(_cpu_per_pass(at_load).median()), True


def drift_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Per run on the emulated cluster: the worst worker's compute drift from the baseline."""
    base = baselines(ok)
    rows = []
    for _, run in ok[ok["emulated"]].iterrows():
        reference, reference_cpu_s, same_load = _reference(ok, run, base)
        shares = run.get("core_share_per_worker")
        if not isinstance(shares, list) or len(shares) != len(run["compute_s_per_worker"]):
            shares = [math.nan] * len(run["compute_s_per_worker"])
        workers = [
            (value, share)
            for value, share in zip(run["compute_s_per_worker"], shares)
            if not math.isnan(value)
        ]
        if math.isnan(reference) or not workers:
            continue
        ratios = np.array([value for value, _ in workers]) / reference
        worst_index = int(np.argmax(np.abs(ratios - 1)))
        worst = ratios[worst_index]
        worst_compute, worst_share = workers[worst_index]
        rows.append(
            {
                "run_id": run["run_id"],
                "workload": run["workload"],
                "config": run["config"],
                "baseline_compute_s": reference,
                "baseline_same_load": same_load,
                "worst_ratio": float(worst),
                "drift": float(abs(worst - 1)),
                # the worst worker's drift = its CPU per pass over the baseline's, divided by
                # its virtual cores over the baseline's (NaN where a record metered no CPU)
                "cpu_ratio": worst_compute * worst_share / reference_cpu_s,
                "core_share": worst_share,
                "baseline_core_share": reference_cpu_s / reference,
            }
        )
    return pd.DataFrame(rows)


CORES, COST = "cores", "cost"  # the two parts of a drift (see drift_causes)


def drift_causes(row: pd.Series) -> list[tuple[str, str]]:
    """Why a worker's compute differs from the baseline's, as (part, words): the virtual cores
    the process got while computing (CORES), and the CPU a pass cost (COST). Empty where the
    records metered no CPU."""
    cpu_ratio, share, base_share = row["cpu_ratio"], row["core_share"], row["baseline_core_share"]
    if any(math.isnan(value) for value in (cpu_ratio, share, base_share)) or base_share <= 0:
        return []
    causes = []
    share_ratio = share / base_share
    if abs(share_ratio - 1) > DRIFT_LIMIT:
        causes.append((
            CORES,
            f"{'less' if share_ratio < 1 else 'more'} of a core while computing "
            f"({share:.2f} virtual cores against the baseline's {base_share:.2f})",
        ))  # fmt: skip
    if abs(cpu_ratio - 1) > DRIFT_LIMIT:
        causes.append((COST, f"each pass cost {cpu_ratio:.2f}× the baseline's CPU"))
    return causes


def oversubscribed(ok: pd.DataFrame) -> pd.DataFrame:
    """Runs on a dilated cluster whose threads waited for a core, or whose machine had no idle
    time left: the nodes did not get their virtual cores."""
    if "core_wait_share" not in ok:
        return ok.iloc[0:0]
    waited = ok["core_wait_share"] > CORE_WAIT_LIMIT
    saturated = ok["machine_idle_share"] < MIN_IDLE_SHARE
    return ok[ok["emulated"] & (waited | saturated)]


def _oversubscription_note(ok: pd.DataFrame) -> str | None:
    runs = oversubscribed(ok)
    if runs.empty:
        return None
    judged = int((ok["emulated"] & ok["core_wait_share"].notna()).sum())

    def why(row: pd.Series) -> str:
        parts = []
        if row["core_wait_share"] > CORE_WAIT_LIMIT:
            parts.append(
                f"threads waited {row['core_wait_share']:.0%} of their CPU time for a core"
            )
        if row["machine_idle_share"] < MIN_IDLE_SHARE:
            parts.append(f"the machine was {1 - row['machine_idle_share']:.0%} busy")
        else:
            parts.append(f"the machine {row['machine_idle_share']:.0%} idle on average")
        return ", ".join(parts)

    named = [
        f"`{row['run_id']}` ({row['workload']}, {row['config']}: {why(row)})"
        for _, row in runs.head(SHOWN).iterrows()
    ]
    more = f" and {len(runs) - SHOWN} more" if len(runs) > SHOWN else ""
    # A machine with idle time left on average can still lack a core at an instant: the caps
    # bound each thread's share per CFS period, not how many threads run at once.
    idle = int((runs["machine_idle_share"] >= MIN_IDLE_SHARE).sum())
    causes = []
    if idle < len(runs):
        causes.append(
            f"{len(runs) - idle} on a machine with no idle time left (the nodes' threads together "
            "wanted more than it has at this dilation, or other work ran beside them: raise "
            "--dilation or run them on a quiet machine)"
        )
    if idle:
        causes.append(
            f"{idle} while the machine had idle time on average (the nodes' threads woke at the "
            "same moments, more of them at once than it has cores: a larger dilation shortens "
            "each burst but does not remove this)"
        )
    return (
        f"Oversubscribed: {len(runs)} of {judged} runs on the dilated cluster did not get the "
        "virtual cores the dilation promised, so their times are slower than the emulated hosts "
        "would be: " + "; ".join(causes) + ". " + "; ".join(named) + more + "."
    )


def _cap_cost_note(ok: pd.DataFrame) -> str | None:
    """Where the study's clusters measured, when they came up, that capped work costs more CPU
    than uncapped (archbench.cluster.capcost): every compute time is slower than a host's."""
    if "cap_cost_ratio" not in ok:
        return None
    ratios = ok.loc[ok["emulated"], "cap_cost_ratio"].dropna()
    if ratios.empty or ratios.max() <= 1 + DRIFT_LIMIT:
        return None
    low, high = ratios.min(), ratios.max()
    measured = f"{low:.2f}×" if round(low, 2) == round(high, 2) else f"{low:.2f}-{high:.2f}×"
    costly = int((ratios > 1 + DRIFT_LIMIT).sum())
    return (
        f"Capped work costs more here: when the cluster came up, a capped thread's 2 MB working "
        f"set cost {measured} its uncapped CPU (over {1 + DRIFT_LIMIT:.1f}× for {costly} of the "
        f"{len(ratios)} runs whose cluster measured it). Its caches emptied while its cap "
        "stopped it (other work on the same hardware took them), so a dilated node computes "
        "slower than the host it stands for, by about that much and more for a larger working "
        "set (`python benchmarks/cap_cost.py` measures a model's pass), and by how much moves "
        "with that other work from minute to minute. Compute times, and the share of a step "
        "they take, are overstated by it; a longer `cluster up --cfs-period-ms` stops the "
        "threads less often, at the price of longer stalls (archbench/cluster/README.md)."
    )


def fidelity_notes(ok: pd.DataFrame) -> list[str]:
    """Data-quality lines: runs whose workers drifted from the baseline, runs on an
    oversubscribed machine, nodes with no caps."""
    if "emulated" not in ok or not ok["emulated"].any():
        return []
    notes = []
    uncapped = ok["emulated"] & ok["cpus_per_node"].isna()
    if "dilation" in ok:
        uncapped &= ok["dilation"].isna()
    if uncapped.any():
        notes.append(
            f"{int(uncapped.sum())} run(s) ran on an emulated cluster whose nodes had no CPU caps "
            "(`cluster up --dilation off`): the nodes shared the machine's cores, so their "
            "times describe contention as much as the architecture."
        )
    overloaded = _oversubscription_note(ok)
    if overloaded:
        notes.append(overloaded)
    costly = _cap_cost_note(ok)
    if costly:
        notes.append(costly)
    table = drift_table(ok)
    judged = len(table)
    if not judged:
        notes.append(
            "No run on the emulated cluster could be checked for fidelity: the study has no "
            "`single` run of the same workload and per-worker batch to compare each worker's "
            "compute with."
        )
        return notes
    unmatched = int((~table["baseline_same_load"]).sum())
    load_words = (
        f" ({unmatched} of them against a baseline measured under another load: the study has "
        "no `single` run with as many companions as they have workers - 1)"
        if unmatched
        else " (each against the baseline measured with as many nodes computing at once)"
    )
    drifted = table[table["drift"] > DRIFT_LIMIT].sort_values("drift", ascending=False)
    calls = _dispatch_words(ok)
    if drifted.empty:
        notes.append(
            f"Fidelity: in all {judged} judged runs on the emulated cluster every worker's "
            f"compute was within {DRIFT_LIMIT:.0%} of the `single` baseline{load_words} "
            f"(worst {table['drift'].max():.1%}).{calls}"
        )
        return notes

    def named(row: pd.Series) -> str:
        causes = drift_causes(row)
        why = f": {' and '.join(words for _, words in causes)}" if causes else ""
        return (
            f"`{row['run_id']}` ({row['workload']}, {row['config']}: {row['worst_ratio']:.2f}× "
            f"the baseline's {1000 * row['baseline_compute_s']:.2f} ms{why})"
        )

    more = f" and {len(drifted) - SHOWN} more" if len(drifted) > SHOWN else ""
    notes.append(
        f"Fidelity: {len(drifted)} of {judged} judged runs on the emulated cluster had a "
        f"worker whose compute (forward + backward) differed from the `single` baseline by "
        f"more than {DRIFT_LIMIT:.0%}{load_words}: "
        + "; ".join(named(row) for _, row in drifted.head(SHOWN).iterrows())
        + more
        + "."
        + _cause_words(drifted)
        + calls
    )
    return notes


def _cause_words(drifted: pd.DataFrame) -> str:
    """How many drifted runs each part explains: a worker that got less (or more) of a core
    than the baseline while computing is the emulation's fault (shared cores, or threads in its
    budget); a pass that took more (or less) of its process's CPU has several causes, named."""
    metered = drifted[drifted["cpu_ratio"].notna()] if "cpu_ratio" in drifted else drifted[:0]
    if metered.empty:
        return (
            " Their records metered no CPU (`timing.compute_core_share_per_rank`), so the note "
            "cannot say whether a node lacked its virtual core or the work cost more."
        )
    causes = [{part for part, _ in drift_causes(row)} for _, row in metered.iterrows()]
    cores = sum(CORES in found for found in causes)
    cost = sum(COST in found for found in causes)
    neither = sum(not found for found in causes)
    both_small = (
        f", and {neither} moved less than {DRIFT_LIMIT:.0%} in each part but more in the two "
        "together"
        if neither
        else ""
    )
    return (
        f" Of the {len(metered)} whose CPU was metered, {cores} had a worker get a different "
        "share of a core than the baseline while computing (the node did not compute like a "
        "separate host: cores shared with other nodes, or the run's own threads in its budget), "
        f"{cost} a worker whose pass took a different amount of its process's CPU than the "
        "baseline's (the machine's speed when each ran, a capped thread's caches emptied while "
        "its cap stopped it, as much as the machine's other users took them at the time "
        "(`python benchmarks/cap_cost.py` measures it), caches shared with nodes computing at "
        "once, the engine's own call, or other threads of the process working during the pass: "
        f"a parameter server's gRPC pollers share their process's core){both_small}."
    )


def _dispatch_words(ok: pd.DataFrame) -> str:
    """The engines' own call per compute pass (median per architecture), where records timed it."""
    if "dispatch_s_per_worker" not in ok:
        return ""
    calls = {}
    for name, group in ok[ok["emulated"]].groupby("arch"):
        values = [v for run in group["dispatch_s_per_worker"] for v in run if not math.isnan(v)]
        if values:
            calls[name] = float(np.median(values))
    if not calls:
        return ""
    listed = ", ".join(
        f"{name} {1000 * calls[name]:.2f} ms" for name in sorted(calls, key=sort_key)
    )
    return (
        " Of each compute pass, the engine's own call, timed with nothing to compute "
        f"(`timing.dispatch_s_per_rank`, median per call): {listed}."
    )
