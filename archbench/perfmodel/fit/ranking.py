"""Does the model pick the right architecture? Ranking accuracy over held-out configurations.

MAPE says how far each prediction is from its measurement; a user acting on the model needs
something else: at a setting, does the configuration the model predicts fastest turn out fastest.

A *setting* is what held-out configurations share when they differ only in the architecture
choice: the workload (model, data and per-worker batch, with every other training setting that
applies to every architecture), the worker count and the link (rate, and latency where the
record has one). Its *candidates* are the held-out configurations measured there: each
architecture, with its own choices (PS placement, server count, sync mode, sharding, p2p
schedule, compression, ... — every setting that applies to some architectures only) as distinct
candidates. A setting with one candidate is no ranking question: counted, not ranked.

Compared is what the validation scores, the median step: at equal workers and per-worker batch
the global batch is equal, so the shorter step is the higher throughput (time per sample).

Per setting with two candidates or more, the model's pick (shortest predicted step) against the
measured fastest (shortest median step). The call rests on one measured gap: the pick's step
over the fastest's when the pick is not the fastest, else the runner-up's over the pick's. When
that gap is within the noise floor (the larger of the two configurations' floors, as the
validation reports them: how far one repetition lies from the others; a configuration run once
takes the held-out configurations' mean floor), the measurements cannot order the two: the
setting is `too close to call`, reported apart, neither a hit nor a miss. Otherwise the pick is
`right` (it is the fastest) or `wrong`, with its cost: the pick's measured step ÷ the
fastest's.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from archbench.common.archs import ARCHITECTURES
from archbench.common.bandwidth import Bandwidth, format_bits
from archbench.perfmodel.fit.fitting import Scored
from archbench.perfmodel.fit.records import Observation
from archbench.record import RunRecord
from archbench.runtime.settings import SETTINGS

RIGHT, TOO_CLOSE, WRONG = "right", "too close to call", "wrong"

SETTING_RULE = (
    "A setting: the held-out configurations alike in all but the architecture choice — the "
    "workload (model, data, per-worker batch and every other training setting), the worker "
    "count and the link; its candidates are the architectures with their own choices (PS "
    "placement, server count, sync mode, p2p schedule, compression, ...). Compared: the median "
    "step (equal workers and per-worker batch, so equal global batch: the shorter step is the "
    "higher throughput)."
)
TOO_CLOSE_RULE = (
    "Too close to call: the measured gap the call rests on (the pick's step over the fastest's; "
    "for a pick that is the fastest, the runner-up's over the pick's) is within the noise floor, "
    "the larger of the two configurations' (a configuration run once: the held-out mean); "
    "reported apart, neither hit nor miss."
)
# record config entries that name a run, not what it ran (as records.config_key drops them)
_RUN_ONLY = frozenset({"seed", "run_id", "out", "study", "timeline"})
# link entries that give its rate (Bandwidth.of_link reads them); the others (latency) stay
_RATE_KEYS = frozenset({"bandwidth_bits", "bandwidth_bps", "rate_bits", "bandwidth", "rate"})
_NAMED = ("model", "batch_size", "workers", "link")  # said in every setting's name


def _architecture_choice(name: str) -> bool:
    """A config entry that is the architecture or one of its own choices: a setting that does
    not apply to every architecture (records hold its not-applicable value for the others)."""
    row = SETTINGS.get(name)
    return name == "arch" or (row is not None and not row.applies_to >= set(ARCHITECTURES))


def setting_identity(obs: Observation) -> dict[str, Any]:
    """What a configuration shares with its rivals: its record's config less the architecture
    choice and the run's own names, its worker count and its link. An entry archbench does not
    know stays in (never compare configurations that may differ in something else)."""
    view = RunRecord(obs.record)
    identity = {
        name: value
        for name, value in view.config.items()
        if name not in _RUN_ONLY and not _architecture_choice(name)
    }
    link = view.cluster.get("link")
    extra = sorted(
        (k, v) for k, v in link.items() if k not in _RATE_KEYS and v not in (None, "")
    ) if isinstance(link, dict) else []  # fmt: skip
    rate = Bandwidth.of_link(link)
    identity["link"] = [None if rate is None else rate.bits_per_s, extra]
    identity["workers"] = obs.config.num_workers
    return identity


def _setting_name(identity: dict[str, Any], varying: Sequence[str]) -> str:
    bits, extra = identity["link"]
    link = format_bits(bits) + "".join(f", {k} {v}" for k, v in extra)
    name = (
        f"{identity.get('model')}, batch {identity.get('batch_size')}/worker, "
        f"{identity['workers']} workers, {link}"
    )
    return name + "".join(f", {key}={identity.get(key)}" for key in varying)


def settings_of(observations: Sequence[Observation]) -> dict[str, str]:
    """Each configuration's setting (by config_key), named by its workload, workers and link,
    and by whatever else varies among `observations` (so two settings never share a name)."""
    identities = {o.config_key: setting_identity(o) for o in observations}
    keys = sorted({key for identity in identities.values() for key in identity} - set(_NAMED))
    varying = [key for key in keys if _levels(key, identities.values()) > 1]
    return {key: _setting_name(identity, varying) for key, identity in identities.items()}


def _levels(key: str, identities: Iterable[dict[str, Any]]) -> int:
    return len({json.dumps(i.get(key), sort_keys=True, default=str) for i in identities})


@dataclass(frozen=True)
class Ranked:
    """One setting's pick and what was measured there."""

    setting: str
    candidates: int
    picked: Scored
    fastest: Scored
    runner_up: Scored  # the second-shortest measured step
    noise: float  # the noise floor the call's gap is held against (a fraction)

    @property
    def cost(self) -> float:
        """The pick's measured step over the measured fastest's (1 when it is the fastest)."""
        return self.picked.measured_s / self.fastest.measured_s

    @property
    def gap(self) -> float:
        return call_gap(
            self.picked.measured_s, self.fastest.measured_s, self.runner_up.measured_s,
            self.picked is self.fastest,
        )  # fmt: skip

    @property
    def verdict(self) -> str:
        return verdict_of(self.gap, self.noise, self.picked is self.fastest)


def call_gap(
    picked_s: float, fastest_s: float, runner_up_s: float, picked_is_fastest: bool
) -> float:
    """The measured gap a call rests on: the pick behind the fastest, or (the pick being the
    fastest) the runner-up behind the pick."""
    return (runner_up_s if picked_is_fastest else picked_s) / fastest_s - 1


def verdict_of(gap: float, noise: float, picked_is_fastest: bool) -> str:
    """The call on a pick whose measured gap (see `Ranked.gap`) is `gap`, against the noise
    floor `noise` (both fractions): the rule of the ranking and of the map's markers."""
    if gap <= noise:
        return TOO_CLOSE
    return RIGHT if picked_is_fastest else WRONG


def rank_settings(rows: Sequence[Scored], setting_of: dict[str, str]) -> list[Ranked]:
    """Each setting (by `setting_of[config_key]`) with two candidates or more, in name order."""
    floors = [row.noise for row in rows if row.noise is not None]
    # a configuration run once has no floor of its own: the held-out mean (the table's `all`)
    held_out_floor = statistics.mean(floors) if floors else 0.0
    by_setting: dict[str, list[Scored]] = {}
    for row in rows:
        by_setting.setdefault(setting_of[row.config_key], []).append(row)
    ranked = []
    for setting, members in sorted(by_setting.items()):
        if len(members) < 2:
            continue  # one candidate: nothing to choose between
        picked = min(members, key=lambda row: row.predicted_s)
        fastest, runner_up = sorted(members, key=lambda row: row.measured_s)[:2]
        rival = runner_up if picked is fastest else picked
        noise = max(held_out_floor if row.noise is None else row.noise for row in (fastest, rival))
        ranked.append(Ranked(setting, len(members), picked, fastest, runner_up, noise))
    return ranked


def ranking_summary(ranked: Sequence[Ranked], settings: int) -> dict[str, Any]:
    """Counts and the cost of the wrong picks; `settings`: every held-out setting, one-candidate
    ones too (no ranking question: counted apart)."""
    wrong = [r.cost for r in ranked if r.verdict == WRONG]
    right = sum(r.verdict == RIGHT for r in ranked)
    too_close = sum(r.verdict == TOO_CLOSE for r in ranked)
    return {
        "settings": settings,
        "ranked_settings": len(ranked),
        "single_candidate_settings": settings - len(ranked),
        "decided_settings": right + len(wrong),
        "right": right,
        "too_close_to_call": too_close,
        "wrong": len(wrong),
        "wrong_cost_median": statistics.median(wrong) if wrong else None,
        "wrong_cost_worst": max(wrong) if wrong else None,
        "setting_rule": SETTING_RULE,
        "too_close_rule": TOO_CLOSE_RULE,
        "compared": "median step time (s)",
    }


def summary_line(summary: dict[str, Any]) -> str:
    """'picked the measured fastest in K of N settings; wrong picks cost X× (median), worst
    Y×', N the settings decided (right or wrong)."""
    line = (
        f"picked the measured fastest in {summary['right']} of {summary['decided_settings']} "
        "settings"
    )
    if not summary["wrong"]:
        return line + "; no wrong picks"
    return (
        f"{line}; wrong picks cost {summary['wrong_cost_median']:.2f}× (median), "
        f"worst {summary['wrong_cost_worst']:.2f}×"
    )


def ranking_text(ranked: Sequence[Ranked], summary: dict[str, Any]) -> str:
    """The summary line, the counts, the rules and a table of the settings, in Markdown."""
    counts = (
        f"{summary['ranked_settings']} of {summary['settings']} held-out settings had two "
        f"candidates or more: {summary['right']} right, {summary['wrong']} wrong, "
        f"{summary['too_close_to_call']} too close to call; "
        f"{summary['single_candidate_settings']} had one candidate (not ranked)."
    )
    rules = ["", SETTING_RULE, TOO_CLOSE_RULE]
    if not ranked:
        return "\n".join(["Ranking: no pick to check. " + counts, *rules]) + "\n"
    lines = [
        f"Ranking: {summary_line(summary)}.",
        counts,
        *rules,
        "",
        "| setting | candidates | predicted fastest | measured fastest | verdict | gap | "
        "noise floor | pick's step ÷ fastest's |",
        "| --- | ---: | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in ranked:
        lines.append(
            f"| {r.setting} | {r.candidates} | {r.picked.label} | {r.fastest.label} | "
            f"{r.verdict} | {r.gap * 100:.1f}% | {r.noise * 100:.1f}% | {r.cost:.2f}× |"
        )
    return "\n".join(lines) + "\n"
