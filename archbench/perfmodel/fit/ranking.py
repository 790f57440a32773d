"""Does the model pick the right architecture? Ranking accuracy over held-out configurations.

MAPE says how far each prediction is from its measurement; a user acting on the model needs
something else: at a setting, does the configuration the model predicts fastest turn out fastest.
A *setting* is a workload (model and per-worker batch), a worker count and a link rate; its
candidates are the held-out configurations measured there (architectures, with their placement,
servers, mode and compression as distinct candidates). With equal workers and per-worker batch,
the shorter median step is the higher throughput, so steps are compared.

Per setting with two candidates or more: the model's pick (shortest predicted step) against the
measured fastest (shortest median step). The pick is `right` when it is the measured fastest,
`within noise` when its measured step exceeds the fastest's by no more than the larger noise
floor of the two (how far one repetition lies from the others: the measurements cannot order
them), and `wrong` otherwise, with its cost: the pick's measured step ÷ the fastest's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from archbench.perfmodel.fit.fitting import Scored

RIGHT, WITHIN_NOISE, WRONG = "right", "within noise", "wrong"


@dataclass(frozen=True)
class Ranked:
    """One setting's pick and what was measured there."""

    setting: str
    candidates: int
    picked: Scored
    fastest: Scored

    @property
    def cost(self) -> float:
        """The pick's measured step over the measured fastest's (1 when right)."""
        return self.picked.measured_s / self.fastest.measured_s

    @property
    def verdict(self) -> str:
        if self.picked is self.fastest:
            return RIGHT
        noise = max(self.picked.noise or 0.0, self.fastest.noise or 0.0)
        return WITHIN_NOISE if self.cost - 1 <= noise else WRONG


def rank_settings(rows: Sequence[Scored], setting_of: dict[str, str]) -> list[Ranked]:
    """Each setting (by `setting_of[config_key]`) with two candidates or more, in name order."""
    by_setting: dict[str, list[Scored]] = {}
    for row in rows:
        by_setting.setdefault(setting_of[row.config_key], []).append(row)
    ranked = []
    for setting, members in sorted(by_setting.items()):
        if len(members) < 2:
            continue  # one candidate: nothing to choose between
        picked = min(members, key=lambda row: row.predicted_s)
        fastest = min(members, key=lambda row: row.measured_s)
        ranked.append(Ranked(setting, len(members), picked, fastest))
    return ranked


def ranking_summary(ranked: Sequence[Ranked], settings: int) -> dict[str, object]:
    """Counts and the cost of the wrong picks; `settings`: every setting, one-candidate ones
    too (they are not ranking questions, and the summary says how many there were)."""
    wrong = [r.cost for r in ranked if r.verdict == WRONG]
    return {
        "settings": settings,
        "ranked_settings": len(ranked),
        "right": sum(r.verdict == RIGHT for r in ranked),
        "within_noise": sum(r.verdict == WITHIN_NOISE for r in ranked),
        "wrong": len(wrong),
        "wrong_cost_median": statistics.median(wrong) if wrong else None,
        "wrong_cost_worst": max(wrong) if wrong else None,
    }


def ranking_text(ranked: Sequence[Ranked], summary: dict[str, object]) -> str:
    """The summary line and a table of the settings, in Markdown."""
    count = summary["ranked_settings"]
    if not count:
        return (
            f"Ranking: none of the {summary['settings']} held-out settings measured two "
            "candidates, so there is no pick to check.\n"
        )
    line = (
        f"Ranking: picked the measured fastest in {summary['right']} of {count} settings with "
        f"two candidates or more ({summary['within_noise']} more within the measurement noise; "
        f"{summary['settings'] - count} settings had one candidate)"
    )
    if summary["wrong"]:
        line += (
            f"; {summary['wrong']} wrong pick(s) cost {summary['wrong_cost_median']:.2f}× "
            f"the fastest's step (median), worst {summary['wrong_cost_worst']:.2f}×"
        )
    lines = [
        line + ".",
        "",
        "| setting | candidates | predicted fastest | measured fastest | pick | cost |",
        "| --- | ---: | --- | --- | --- | ---: |",
    ]
    for r in ranked:
        lines.append(
            f"| {r.setting} | {r.candidates} | {r.picked.label} | {r.fastest.label} | "
            f"{r.verdict} | {r.cost:.2f}× |"
        )
    return "\n".join(lines) + "\n"
