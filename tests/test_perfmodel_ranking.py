"""Ranking accuracy: does the model's pick at a setting turn out the measured fastest?
Worked by hand on scored configurations with known steps."""

from __future__ import annotations

import pytest

from archbench.perfmodel.fit.fitting import Scored
from archbench.perfmodel.fit.ranking import (
    RIGHT,
    WITHIN_NOISE,
    WRONG,
    rank_settings,
    ranking_summary,
    ranking_text,
)


def _scored(key: str, measured: float, predicted: float, noise: float | None = 0.02) -> Scored:
    return Scored(key, key, key.split("-")[0], "mlp", key, measured, predicted, 0.0, 0.0, 3, noise)


def test_a_pick_is_right_within_noise_or_wrong_with_its_cost() -> None:
    rows = [
        # setting A: the model picks ring, the measured fastest: right
        _scored("ring-a", 0.010, 0.009), _scored("p2p-a", 0.012, 0.011),
        # setting B: the model picks p2p, measured 1% behind ring, inside the 2% noise floor
        _scored("ring-b", 0.0100, 0.0110), _scored("p2p-b", 0.0101, 0.0100),
        # setting C: the model picks ps, measured 1.5x ring's step: wrong, costing 1.5x
        _scored("ring-c", 0.010, 0.012), _scored("ps-c", 0.015, 0.011),
        # setting D: p2p alone: no choice to check
        _scored("p2p-d", 0.010, 0.020),
    ]  # fmt: skip
    setting_of = {row.config_key: row.config_key.split("-")[1].upper() for row in rows}
    ranked = {r.setting: r for r in rank_settings(rows, setting_of)}
    assert sorted(ranked) == ["A", "B", "C"]
    assert ranked["A"].verdict == RIGHT and ranked["A"].cost == 1.0
    assert ranked["B"].verdict == WITHIN_NOISE
    assert ranked["C"].verdict == WRONG and ranked["C"].cost == pytest.approx(1.5)
    summary = ranking_summary(list(ranked.values()), settings=4)
    assert (summary["right"], summary["within_noise"], summary["wrong"]) == (1, 1, 1)
    assert summary["wrong_cost_worst"] == pytest.approx(1.5)
    text = ranking_text(list(ranked.values()), summary)
    assert text.startswith(
        "Ranking: picked the measured fastest in 1 of 3 settings with two candidates or more "
        "(1 more within the measurement noise; 1 settings had one candidate); 1 wrong pick(s) "
        "cost 1.50× the fastest's step (median), worst 1.50×."
    ), text


def test_without_a_noise_floor_a_slower_pick_is_wrong() -> None:
    rows = [_scored("ring-a", 0.0100, 0.0110, None), _scored("p2p-a", 0.0101, 0.0100, None)]
    (ranked,) = rank_settings(rows, {"ring-a": "A", "p2p-a": "A"})
    assert ranked.verdict == WRONG and ranked.cost == pytest.approx(1.01)


def test_no_setting_with_two_candidates_says_so() -> None:
    rows = [_scored("ring-a", 0.01, 0.01), _scored("ring-b", 0.01, 0.01)]
    ranked = rank_settings(rows, {"ring-a": "A", "ring-b": "B"})
    assert ranked == []
    assert "none of the 2 held-out settings measured two candidates" in ranking_text(
        ranked, ranking_summary(ranked, 2)
    )
