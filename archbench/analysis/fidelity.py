"""Did the emulated cluster hold its promise? Each worker's compute against its own engine's pass
with one worker, judged against the noise that baseline showed; and the machine's cores against
the nodes' demand.

On a real cluster a worker's compute (forward + backward, `timing.compute_s_median_per_rank`)
does not change with the number of workers. On the emulated cluster it can: nodes share the
machine's cores and caches, a node's own threads eat its virtual cores. "Faithful" means that a
worker of a W-worker run computes as that engine's one worker did on the same cluster, within the
noise of that one-worker run's own repetitions. So a run is judged against the runs of the same
architecture (its engine: single's tf.function, the ring's, p2p's, a parameter server's session
call) with one worker and no companions, of the same workload and per-worker batch: that is what
the emulation did to that engine, not what one engine costs against another (a parameter server's
session call costs more than a tf.function on any host; `engine_cost_findings` reports that
as a finding with its interval).

The tolerance is the baseline's own noise: a run is flagged when its workers' median compute lies
outside the 95% prediction interval of one more repetition of the baseline (Student's t on the
logarithm of the repetitions' compute, n - 1 degrees of freedom), and never inside `FLOOR`. One
statistic a run, whatever its W: the workers of one run ran at the same moments, so they are not
W independent draws, and a faithful 12-worker run must not be flagged twelve times as often. The
note also gives the worst worker's ratio.

A run is also flagged where a worker got so much less of a virtual core while computing than
the baseline did that the shortfall alone would move its compute outside the baseline's noise
(`short_of_cores`): a pass's time is its CPU over the share of a core it got, so at the same CPU a
worker on share s computes base_share / s times as long. The dilation promised every thread a
virtual core, and a node crowded past its cores breaks that promise even where the compute time
lands inside the noise (a pass that costs less CPU while the share halves moves the time less than
the share: a crowded node measured 0.61x the baseline's CPU a pass). The shortfall is judged with
the compute's own noise, the verdict's yardstick, not with the spread of the baseline's shares:
three repetitions of one worker vary by about 1% in share while faithful runs of several workers
vary by 5% and more (their other threads' work during the pass), so a bound from the shares
flagged faithful runs whose threads never waited for a core (2 of 39 in a demo, at 0.95 of the
baseline's share). It is one-sided (more of a core is the process's other threads working during
the pass, as they would on a host) and for the lowest of the W workers (one crowded node among
several is a crowded run), and its bound is the verdict's own tolerance: the share at which the
shortfall alone would move a pass just outside it. One bound a run, as for the compute: the
compute's noise is between runs (the machine's speed when each ran), which the W workers of one
run share, so they are not W draws of it. (A Bonferroni bound over the workers,
tried first, lay about 5 standard deviations of the baselines' log compute below their share
with five baselines, this one 3: where that deviation is 0.30, as in one CI run, both still let
a node of eight ranks on four virtual cores, 0.42 of a core each, pass; past 0.23 a halved
share lies inside the noise.) So a run is also flagged for its cores, whatever the meters read,
where one of its nodes holds more processes than its virtual cores give each its cap
(`crowded_node`: the record's hosts against `fidelity.vcpus_per_node` and
`fidelity.vcpus_per_process`): a placement the dilation cannot honour, as a host of that many
cores could not, known without noise. An engine with
fewer than `MIN_REPETITIONS` one-worker runs has no noise to judge by: its runs are listed as not
judged, never judged by another engine's. A baseline whose repetitions spread more than
`UNSTABLE` (relative standard deviation; pyperf calls a benchmark unstable past 10%) is named.

What the verdict cannot catch: a cost every node pays alike, the one-worker baseline too (capped
work's cache cost, the machine's speed the whole study long), moves nothing it compares. The
cap cost measured at `cluster up` is reported beside the verdict (`_cap_cost_note`).

Each worker's drift has two parts (`timing.compute_core_share_per_rank`, archbench.cluster.cpumeter):
the virtual cores its process's own threads got while computing, and the CPU one pass took of
them. The note names for each flagged run which part moved beyond the tolerance. The first is the
emulation's fault (cores shared with other nodes, or the run's own threads in its budget). The
second has several causes, which the note lists: caches shared with nodes computing at once, a
capped thread's caches emptied while its cap stopped it, the machine's speed when each run ran,
and other threads of the process working during the pass.

On a time-dilated cluster each record also says whether its nodes got what the dilation promised:
a thread that was runnable, not held back by a cap and still not running waited for one of the
machine's cores (`core_wait_share`, per second of CPU), and a machine with no idle time left over
the run had none to spare. Either means the machine was oversubscribed (D too small for the
nodes, or other work on it), and such runs are named too. So is every run on an emulated cluster
whose nodes had no caps at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from archbench.analysis.stats import ratio_of_means
from archbench.common.archs import is_baseline, sort_key

LEVEL = 0.95  # of the prediction interval a faithful run's workers fall in
FLOOR = 0.05  # below this a difference is not called drift, however alike the baseline's runs
MIN_REPETITIONS = 3  # one-worker runs an engine needs before its noise can be measured
UNSTABLE = 0.10  # relative standard deviation past which a baseline is named unstable
# Waiting for a core per second of CPU a node's threads used: a few percent is the scheduler's
# wake-up latency on a machine with idle cores.
CORE_WAIT_LIMIT = 0.10
# The machine's idle share below which its cores were saturated over a run's window.
MIN_IDLE_SHARE = 0.02
# The cap cost (capped CPU over uncapped) past which the note says capped work costs more.
CAP_COST_LIMIT = 0.10
SHOWN = 6  # runs named in a note; the rest are counted


def _first(values: object) -> float:
    return values[0] if isinstance(values, list) and values else math.nan


@dataclass(frozen=True)
class EngineBaseline:
    """An engine's one-worker runs of one workload and per-worker batch."""

    compute_s: list[float]  # each repetition's compute median
    core_shares: list[float]  # the virtual cores each used while computing (NaN: not metered)

    @property
    def repetitions(self) -> int:
        return len(self.compute_s)

    @property
    def center_s(self) -> float:
        """The geometric mean of the repetitions (the ratios are judged on a log scale)."""
        return float(np.exp(np.mean(np.log(self.compute_s))))

    @property
    def relative_std(self) -> float:
        values = np.asarray(self.compute_s)
        return float(values.std(ddof=1) / values.mean()) if self.repetitions > 1 else math.nan

    @property
    def core_share(self) -> float:
        shares = [share for share in self.core_shares if not math.isnan(share)]
        return float(np.median(shares)) if shares else math.nan

    def log_tolerance(self) -> float:
        """The half-width, in log(compute ÷ center), of the prediction interval of one more
        repetition, never under FLOOR; NaN with too few repetitions."""
        return _log_half_width(self.compute_s)

    def core_share_floor(self) -> float:
        """The least share of a virtual core a faithful worker gets: the baseline's share over
        1 + the tolerance (a shortfall past it would, at the same CPU a pass, slow the compute
        outside the noise); NaN where the shares were not metered or too few ran."""
        return float(self.core_share * math.exp(-self.log_tolerance()))


def _log_half_width(values: list[float]) -> float:
    """Student's t half-width, on the log scale, of the LEVEL prediction interval of one more of
    `values`; never under log(1 + FLOOR); NaN with fewer than MIN_REPETITIONS values."""
    count = len(values)
    if count < MIN_REPETITIONS:
        return math.nan
    t = float(scipy_stats.t.ppf(1 - (1 - LEVEL) / 2, count - 1))
    spread = t * float(np.std(np.log(values), ddof=1)) * math.sqrt(1 + 1 / count)
    return max(math.log1p(FLOOR), spread)


def _one_worker(frame: pd.DataFrame) -> pd.Series:
    """Runs with one worker and nothing computing beside it (no companions)."""
    load = frame["load_nodes"] if "load_nodes" in frame else pd.Series(1.0, index=frame.index)
    return (load == 1) & frame["compute_s"].notna()


def engine_baselines(ok: pd.DataFrame) -> dict[tuple, EngineBaseline]:
    """Per (arch, workload, per-worker batch): the one-worker runs on the emulated cluster."""
    base = ok[ok["emulated"] & _one_worker(ok)]
    table = {}
    for key, group in base.groupby(["arch", "workload", "batch_size"]):
        shares = [_first(value) for value in group.get("core_share_per_worker", [])]
        shares = shares or [math.nan] * len(group)
        table[key] = EngineBaseline(group["compute_s"].astype(float).tolist(), shares)
    return table


def drift_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Per run with more than one node computing on the emulated cluster: its workers' median
    compute (and the worst worker's) against its engine's one-worker baseline, the tolerance that baseline's noise
    allows, and whether it was judged (`why_not` where it was not)."""
    base = engine_baselines(ok)
    rows = []
    for _, run in ok[ok["emulated"] & ~_one_worker(ok)].iterrows():
        workers = [
            (value, share)
            for value, share in zip(
                run["compute_s_per_worker"],
                _shares(run.get("core_share_per_worker"), len(run["compute_s_per_worker"])),
            )
            if not math.isnan(value)
        ]
        if not workers:
            continue
        baseline = base.get((run["arch"], run["workload"], run["batch_size"]))
        row = {
            "run_id": run["run_id"],
            "arch": run["arch"],
            "workload": run["workload"],
            "config": run["config"],
            "baseline_runs": baseline.repetitions if baseline else 0,
        }
        if baseline is None or baseline.repetitions < MIN_REPETITIONS:
            have = f"only {baseline.repetitions}" if baseline else "no"
            row.update(judged=False, flagged=False, why_not=f"{have} one-worker {run['arch']} run")
            rows.append(row)
            continue
        log_tolerance = baseline.log_tolerance()
        ratios = np.array([value for value, _ in workers]) / baseline.center_s
        median_ratio = float(np.median(ratios))
        worst_index = int(np.argmax(np.abs(np.log(ratios))))
        worst_compute, worst_share = workers[worst_index]
        baseline_share = baseline.core_share
        metered = [share for _, share in workers if not math.isnan(share)]
        lowest_share = min(metered) if metered else math.nan
        share_floor = baseline.core_share_floor()
        compute_outside = abs(math.log(median_ratio)) > log_tolerance
        crowded_node = str(run.get("crowded_node") or "")
        # False where either share is NaN
        short_of_cores = bool(lowest_share < share_floor) or bool(crowded_node)
        row.update(
            judged=True,
            why_not="",
            baseline_compute_s=baseline.center_s,
            baseline_relative_std=baseline.relative_std,
            tolerance=math.expm1(log_tolerance),
            median_ratio=median_ratio,
            worst_ratio=float(ratios[worst_index]),
            drift=float(abs(median_ratio - 1)),
            compute_outside=bool(compute_outside),
            short_of_cores=short_of_cores,
            flagged=bool(compute_outside or short_of_cores),
            # the worst worker's compute ratio = its CPU per pass over the baseline's times the
            # baseline's virtual cores over its own (NaN where a record metered no CPU)
            core_share=worst_share,
            baseline_core_share=baseline_share,
            cpu_ratio=worst_compute * worst_share / (baseline.center_s * baseline_share),
            lowest_core_share=lowest_share,
            core_share_floor=share_floor,
            crowded_node=crowded_node,
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _shares(shares: object, count: int) -> list[float]:
    if isinstance(shares, list) and len(shares) == count:
        return [math.nan if share is None else float(share) for share in shares]
    return [math.nan] * count


CORES, COST = "cores", "cost"  # the two parts of a drift (see drift_causes)


def drift_causes(row: pd.Series) -> list[tuple[str, str]]:
    """Why a run was flagged, as (part, words): the virtual cores its workers got while
    computing (CORES: a node holding more processes than its virtual cores, a worker below the
    share its baseline's noise allows, or the worst worker's share more than the tolerance above
    the baseline's), and the CPU a pass cost (COST: moved by more than the tolerance). Only the
    crowded node where the records metered no CPU."""
    cpu_ratio, share, base_share = row["cpu_ratio"], row["core_share"], row["baseline_core_share"]
    crowded = row.get("crowded_node") if isinstance(row.get("crowded_node"), str) else ""
    metered = not any(math.isnan(value) for value in (cpu_ratio, share, base_share))
    metered = metered and base_share > 0
    causes = []
    if crowded:
        got = (
            f"; its lowest worker got {row['lowest_core_share']:.2f} virtual cores while "
            f"computing against the baseline's {base_share:.2f}"
            if metered
            else ""
        )
        causes.append((CORES, f"a node crowded past its virtual cores ({crowded}{got})"))
    if not metered:
        return causes
    limit = math.log1p(row["tolerance"])
    short = row.get("short_of_cores")
    if not crowded and isinstance(short, (bool, np.bool_)) and short:
        causes.append((
            CORES,
            f"less of a core while computing ({row['lowest_core_share']:.2f} virtual cores "
            f"against the baseline's {base_share:.2f}, below the {row['core_share_floor']:.2f} "
            "its noise allows)",
        ))  # fmt: skip
    elif not crowded and math.log(share / base_share) > limit:
        causes.append((
            CORES,
            f"more of a core while computing ({share:.2f} virtual cores against the "
            f"baseline's {base_share:.2f})",
        ))  # fmt: skip
    if cpu_ratio > 0 and abs(math.log(cpu_ratio)) > limit:
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
    if ratios.empty or ratios.max() <= 1 + CAP_COST_LIMIT:
        return None
    low, high = ratios.min(), ratios.max()
    measured = f"{low:.2f}×" if round(low, 2) == round(high, 2) else f"{low:.2f}-{high:.2f}×"
    costly = int((ratios > 1 + CAP_COST_LIMIT).sum())
    return (
        f"Capped work costs more here: when the cluster came up, a capped thread's 2 MB working "
        f"set cost {measured} its uncapped CPU (over {1 + CAP_COST_LIMIT:.1f}× for {costly} of the "
        f"{len(ratios)} runs whose cluster measured it). Every node, the one-worker baselines "
        "too, pays it alike, so the fidelity verdict cannot see it. Its caches emptied while its cap "
        "stopped it (other work on the same hardware took them), so a dilated node computes "
        "slower than the host it stands for, by about that much and more for a larger working "
        "set (`python benchmarks/cap_cost.py` measures a model's pass), and by how much moves "
        "with that other work from minute to minute. Compute times, and the share of a step "
        "they take, are overstated by it; a longer `cluster up --cfs-period-ms` stops the "
        "threads less often, at the price of longer stalls (archbench/cluster/README.md)."
    )


def fidelity_notes(ok: pd.DataFrame) -> list[str]:
    """Data-quality lines: nodes with no caps, runs on an oversubscribed machine, the cap cost,
    and the verdict: runs whose workers' compute lay outside their engine's noise."""
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
    for note in (_oversubscription_note(ok), _cap_cost_note(ok), _verdict_note(ok)):
        if note:
            notes.append(note)
    return notes


def _noise_words(ok: pd.DataFrame) -> str:
    """Each engine's baseline: its one-worker repetitions and their spread."""
    parts = []
    for (arch, workload, _), baseline in sorted(
        engine_baselines(ok).items(), key=lambda item: (item[0][1], sort_key(item[0][0]))
    ):
        spread = baseline.relative_std
        words = f"{arch} on {workload}: {baseline.repetitions} run(s)"
        if not math.isnan(spread):
            words += f", {1000 * baseline.center_s:.2f} ms ± {spread:.0%}"
            if spread > UNSTABLE:
                words += " (unstable)"
        parts.append(words)
    return "; ".join(parts)


def _verdict_note(ok: pd.DataFrame) -> str | None:
    table = drift_table(ok)
    if table.empty:
        return None
    judged = table[table["judged"]]
    unjudged = table[~table["judged"]]
    rule = (
        "Fidelity (a run's workers' median compute, forward + backward, against its own engine's "
        "one-worker runs on this cluster: flagged outside the 95% prediction interval of one "
        f"more of those runs, Student's t on their log compute, never within {FLOOR:.0%}; "
        "and where a worker got so much less of a virtual core while computing than those runs "
        "did that the shortfall alone would slow its compute past that noise, for the lowest "
        "of its workers, or where one of its nodes holds more processes than its virtual cores "
        "give each its cap): "
    )
    if judged.empty:
        verdict = "no run could be judged"
    else:
        flagged = judged[judged["flagged"]].sort_values("drift", ascending=False)
        if flagged.empty:
            verdict = (
                f"all {len(judged)} judged runs computed within their engine's noise "
                f"(largest drift {judged['drift'].max():.1%})"
            )
        else:
            named = "; ".join(_flagged_words(row) for _, row in flagged.head(SHOWN).iterrows())
            more = f" and {len(flagged) - SHOWN} more" if len(flagged) > SHOWN else ""
            verdict = (
                f"{len(flagged)} of {len(judged)} judged runs flagged: {named}{more}"
                + _cause_words(flagged)
            )
    skipped = ""
    if not unjudged.empty:
        reasons = unjudged.groupby("why_not").size().sort_values(ascending=False)
        listed = ", ".join(f"{count} with {why}" for why, count in reasons.items())
        skipped = (
            f". Not judged, {len(unjudged)} run(s) whose engine has fewer than "
            f"{MIN_REPETITIONS} one-worker runs of their workload to measure its noise ({listed}): "
            "add `workers: 1` runs of that architecture to judge them"
        )
    baselines = _noise_words(ok)
    return f"{rule}{verdict}{skipped}." + (f" Baselines: {baselines}." if baselines else "")


def _flagged_words(row: pd.Series) -> str:
    causes = drift_causes(row)
    why = f": {' and '.join(words for _, words in causes)}" if causes else ""
    return (
        f"`{row['run_id']}` ({row['workload']}, {row['config']}: {row['median_ratio']:.2f}× its "
        f"engine's {1000 * row['baseline_compute_s']:.2f} ms (worst worker "
        f"{row['worst_ratio']:.2f}×), noise ±{row['tolerance']:.0%}{why})"
    )


def _cause_words(flagged: pd.DataFrame) -> str:
    """How many flagged runs each part explains."""
    metered = flagged[flagged["cpu_ratio"].notna()]
    if metered.empty:
        return (
            ". Their records metered no CPU (`timing.compute_core_share_per_rank`), so the note "
            "cannot say whether a node lacked its virtual core or the work cost more"
        )
    causes = [{part for part, _ in drift_causes(row)} for _, row in metered.iterrows()]
    cores = sum(CORES in found for found in causes)
    cost = sum(COST in found for found in causes)
    crowded = int((metered["crowded_node"].astype(str) != "").sum())
    on_crowded = f", {crowded} of them on a node crowded past its virtual cores" if crowded else ""
    return (
        f". Of the {len(metered)} whose CPU was metered, {cores} had a worker get a different "
        "share of a core than its baseline while computing (cores shared with other nodes, or "
        f"the run's own threads in its budget{on_crowded}), {cost} a worker whose pass took more or less "
        "CPU (caches shared with nodes computing at once, a capped thread's caches emptied "
        "while its cap stopped it, the machine's speed when each ran, other threads of the "
        "process working during the pass)"
    )


def engine_cost_findings(ok: pd.DataFrame) -> list[str]:
    """What each engine's pass costs against single's, one worker each on the same cluster, per
    workload: a property of the engines, not of the emulation, with its 95% interval."""
    base = engine_baselines(ok) if "emulated" in ok else {}
    lines = []
    for workload in sorted({key[1] for key in base}):
        singles = [key for key in base if key[1] == workload and is_baseline(key[0])]
        if not singles:
            continue
        reference = base[singles[0]]
        parts = []
        for key in sorted(base, key=lambda key: sort_key(key[0])):
            if key[1] != workload or key[2] != singles[0][2] or is_baseline(key[0]):
                continue
            ratio = ratio_of_means(base[key].compute_s, reference.compute_s)
            interval = (
                f" [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"
                if not math.isnan(ratio["ci_low"])
                else " (one run: no interval)"
            )
            parts.append(f"{key[0]} {ratio['ratio']:.2f}×{interval}")
        if parts:
            lines.append(
                f"Each engine's compute pass with one worker on this cluster, against single's "
                f"{1000 * reference.center_s:.2f} ms ({workload}): "
                + ", ".join(parts)
                + _dispatch_words(ok, workload)
                + ". That is the engine's own cost on any host, so the fidelity verdict judges "
                "each run against its own engine's."
            )
    return lines


def _dispatch_words(ok: pd.DataFrame, workload: str) -> str:
    """The engines' own call per compute pass (median per architecture), where records timed it."""
    if "dispatch_s_per_worker" not in ok:
        return ""
    runs = ok[ok["emulated"] & (ok["workload"] == workload)]
    calls = {}
    for name, group in runs.groupby("arch"):
        values = [v for run in group["dispatch_s_per_worker"] for v in run if not math.isnan(v)]
        if values:
            calls[name] = float(np.median(values))
    if not calls:
        return ""
    listed = ", ".join(
        f"{name} {1000 * calls[name]:.2f} ms" for name in sorted(calls, key=sort_key)
    )
    return (
        "; of which the engine's own call, timed with nothing to compute "
        f"(`timing.dispatch_s_per_rank`, median): {listed}"
    )
