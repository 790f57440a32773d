"""Ranking accuracy: does the model's pick at a setting turn out the measured fastest? Worked by
hand on scored configurations with known steps and noise floors, and on hand-built records for
what a setting is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_perfmodel_fit import _record, write_calibration, write_study

from archbench.cli import main
from archbench.perfmodel.fit.fitting import Scored
from archbench.perfmodel.fit.ranking import (
    RIGHT,
    TOO_CLOSE,
    WRONG,
    rank_settings,
    ranking_summary,
    ranking_text,
    settings_of,
)
from archbench.perfmodel.fit.records import observation_from_record


def _scored(key: str, measured: float, predicted: float, noise: float | None = 0.02) -> Scored:
    """A held-out configuration named `<arch>-<setting>`, its median step and prediction (s)
    and its noise floor (a fraction)."""
    return Scored(key, key, key.split("-")[0], "mlp", key, measured, predicted, 0.0, 0.0, 3, noise)


# setting A: the model picks ring, measured 20% ahead of p2p (noise 2%): right
# setting B: the model picks p2p, measured 1% behind ring, inside the 2% floor: too close to call
# setting C: the model picks ring, the fastest, but ps is 1% behind it: too close to call
# setting D: the model picks ps, measured 0.015 s against ring's 0.010 s: wrong, 1.5×
# setting E: the model picks ps, measured 0.012 s against p2p's 0.010 s: wrong, 1.2×
# setting F: p2p alone: no ranking question
ROWS = [
    _scored("ring-a", 0.010, 0.009), _scored("p2p-a", 0.012, 0.011),
    _scored("ring-b", 0.0100, 0.0110), _scored("p2p-b", 0.0101, 0.0100),
    _scored("ring-c", 0.0100, 0.0090), _scored("ps-c", 0.0101, 0.0100),
    _scored("ring-d", 0.010, 0.012), _scored("ps-d", 0.015, 0.011), _scored("p2p-d", 0.011, 0.013),
    _scored("p2p-e", 0.010, 0.012), _scored("ps-e", 0.012, 0.011),
    _scored("p2p-f", 0.010, 0.020),
]  # fmt: skip
SETTING_OF = {row.config_key: row.config_key.split("-")[1].upper() for row in ROWS}


def test_a_pick_is_right_too_close_to_call_or_wrong_with_its_cost() -> None:
    ranked = {r.setting: r for r in rank_settings(ROWS, SETTING_OF)}
    assert sorted(ranked) == ["A", "B", "C", "D", "E"]  # F: one candidate, not ranked
    assert ranked["A"].verdict == RIGHT and ranked["A"].cost == 1.0
    assert ranked["A"].gap == pytest.approx(0.2)  # p2p's 0.012 s over ring's 0.010 s
    assert ranked["B"].verdict == TOO_CLOSE and ranked["B"].cost == pytest.approx(1.01)
    # the pick is the measured fastest, but the runner-up is within the noise: no hit either
    assert ranked["C"].verdict == TOO_CLOSE and ranked["C"].picked is ranked["C"].fastest
    assert ranked["D"].verdict == WRONG and ranked["D"].cost == pytest.approx(0.015 / 0.010)
    assert ranked["D"].candidates == 3 and ranked["D"].runner_up.label == "p2p-d"
    assert ranked["E"].verdict == WRONG and ranked["E"].cost == pytest.approx(0.012 / 0.010)

    summary = ranking_summary(list(ranked.values()), settings=6)
    assert summary["settings"] == 6 and summary["ranked_settings"] == 5
    assert summary["single_candidate_settings"] == 1
    assert (summary["right"], summary["too_close_to_call"], summary["wrong"]) == (1, 2, 2)
    assert summary["decided_settings"] == 3  # the too-close ones are neither hit nor miss
    assert summary["wrong_cost_median"] == pytest.approx((1.5 + 1.2) / 2)
    assert summary["wrong_cost_worst"] == pytest.approx(1.5)

    text = ranking_text(list(ranked.values()), summary)
    assert (
        "Ranking: picked the measured fastest in 1 of 3 settings; wrong picks cost 1.35× "
        "(median), worst 1.50×.\n"
        "5 of 6 held-out settings had two candidates or more: 1 right, 2 wrong, 2 too close to "
        "call; 1 had one candidate (not ranked).\n"
    ) in text, text
    assert text.startswith("Ranking: picked the measured fastest in 1 of 3 settings")
    assert "\nA setting: the held-out configurations alike in all but the architecture" in text
    assert "Too close to call: the measured gap the call rests on" in text
    assert "| D | 3 | ps-d | ring-d | wrong | 50.0% | 2.0% | 1.50× |" in text
    assert "| C | 2 | ring-c | ring-c | too close to call | 1.0% | 2.0% | 1.00× |" in text


def test_a_configuration_run_once_takes_the_held_out_mean_floor() -> None:
    # p2p ran once: its 3% gap behind ring is held against the larger of ring's own 2% floor
    # and the held-out mean, (2% + 6%) / 2 = 4%, so too close to call
    rows = [
        _scored("ring-a", 0.0100, 0.0110, 0.02), _scored("p2p-a", 0.0103, 0.0100, None),
        _scored("ring-b", 0.0100, 0.0100, 0.06),
    ]  # fmt: skip
    (ranked,) = rank_settings(rows, {"ring-a": "A", "p2p-a": "A", "ring-b": "B"})
    assert ranked.noise == pytest.approx(0.04) and ranked.verdict == TOO_CLOSE


def test_without_any_noise_floor_every_gap_counts() -> None:
    rows = [_scored("ring-a", 0.0100, 0.0110, None), _scored("p2p-a", 0.0101, 0.0100, None)]
    (ranked,) = rank_settings(rows, {"ring-a": "A", "p2p-a": "A"})
    assert ranked.noise == 0.0
    assert ranked.verdict == WRONG and ranked.cost == pytest.approx(1.01)


def test_no_setting_with_two_candidates_says_so() -> None:
    rows = [_scored("ring-a", 0.01, 0.01), _scored("ring-b", 0.01, 0.01)]
    ranked = rank_settings(rows, {"ring-a": "A", "ring-b": "B"})
    assert ranked == []
    text = ranking_text(ranked, ranking_summary(ranked, 2))
    assert "Ranking: no pick to check. 0 of 2 held-out settings had two candidates" in text


def _observation(run_id: str, arch: str, num_ps: int = 0, workers: int = 3, **more: object):
    record = _record(run_id, arch, "toy", workers, 32, "200mbit", num_ps, 0.01, 0.005)
    for key, value in more.items():
        section, name = key.split("__")
        record[section][name] = value
    return observation_from_record(record)


def test_a_setting_is_all_but_the_architecture_choice() -> None:
    observations = [
        _observation("r1", "ring"),
        _observation("r2", "p2p"),
        _observation("r3", "ps", num_ps=1),
        _observation("r4", "ps", num_ps=2),  # a server count: a candidate of its own
        _observation("r5", "ps", num_ps=1, config__sync="async"),  # a mode: a candidate too
        _observation("r6", "ring", workers=2),  # another worker count
        _observation("r7", "ring", cluster__link="1gbit"),  # another link
        _observation("r8", "ring", config__dataset="words"),  # another workload
    ]
    names = settings_of(observations)
    setting = {o.run_id: names[o.config_key] for o in observations}
    home = "toy, batch 32/worker, 3 workers, 200 Mbit/s, dataset=synthetic"
    assert {setting[r] for r in ("r1", "r2", "r3", "r4", "r5")} == {home}
    assert setting["r6"] == "toy, batch 32/worker, 2 workers, 200 Mbit/s, dataset=synthetic"
    assert setting["r7"] == "toy, batch 32/worker, 3 workers, 1 Gbit/s, dataset=synthetic"
    assert setting["r8"] == "toy, batch 32/worker, 3 workers, 200 Mbit/s, dataset=words"
    # what does not vary among them is not said
    assert settings_of(observations[:2])[observations[0].config_key] == (
        "toy, batch 32/worker, 3 workers, 200 Mbit/s"
    )


def test_validate_prints_and_saves_the_ranking(tmp_path: Path, capsys) -> None:
    # fitted on W = 2, scored at W = 3: one setting of ring, p2p and ps
    study = write_study(
        tmp_path / "study", archs=(("ring", 0), ("p2p", 0), ("ps", 1)), models=("toy",),
        batches=(32,), links=("200mbit",),
    )  # fmt: skip
    calib = write_calibration(tmp_path / "calib.json")
    assert main(["model", "validate", str(study), "--calibration", str(calib)]) == 0
    out = capsys.readouterr().out
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    ranking = validation["ranking"]
    assert ranking["settings"] == ranking["ranked_settings"] == 1
    assert ranking["setting_rule"].startswith("A setting: the held-out configurations alike")
    (setting,) = ranking["settings_ranked"]
    assert setting["setting"] == "toy, batch 32/worker, 3 workers, 200 Mbit/s"
    assert setting["candidates"] == 3
    assert setting["cost"] == pytest.approx(
        setting["predicted_fastest_measured_s"] / setting["measured_fastest_s"]
    )
    assert f"Ranking: picked the measured fastest in {ranking['right']} of " in out
    markdown = (study / "report" / "perfmodel_validation.md").read_text()
    assert "| setting | candidates | predicted fastest | measured fastest | verdict |" in markdown
