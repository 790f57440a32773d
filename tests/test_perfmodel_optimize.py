"""`archbench optimize`: measures only the chosen configurations, through the real sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archbench.cli import main
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.optimize.optimizer import random_search_odds


def test_random_search_odds_by_hand() -> None:
    # N=4 measured 1,2,3,4; best of k=2 random draws is the r-th with C(4-r,1)/C(4,2):
    # r=1: 3/6, r=2: 2/6, r=3: 1/6 -> expected gap (0*3 + 100%*2 + 200%*1)/6 = 66.7%
    odds = random_search_odds([4.0, 2.0, 1.0, 3.0], budget=2, tolerance=0.05)
    assert odds["expected_gap_pct"] == pytest.approx(400 / 6)
    assert odds["p_within_tolerance"] == pytest.approx(0.5)
    # measuring everything always finds the best
    assert random_search_odds([4.0, 2.0, 1.0], 3, 0.05)["p_within_tolerance"] == pytest.approx(1)


@pytest.mark.timeout(300)
def test_optimize_measures_only_the_predicted_best(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "study: opt-tiny\n"
        "cluster: localhost\n"
        "timeout_s: 240\n"
        "fixed: {arch: single, model: mlp, dataset: fashion_mnist, steps: 12, warmup_steps: 2,"
        " probe_every: 3}\n"
        "factors:\n"
        "  batch_size: [8, 32, 128]\n"
    )
    calibration = tmp_path / "calib.json"
    calib = Calibration(intra=F.LinkCost(1e-5, 1e-9), compute={"mlp": ComputeLine(1e-3, 2e-5)})
    calibration.write_text(json.dumps({"calibration": calib.to_json()}))
    status = main(["optimize", str(spec), "--budget", "1", "--calibration", str(calibration)])
    assert status == 0
    results = tmp_path / "opt-tiny" / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    # one configuration measured: the one predicted to train an epoch fastest (the largest
    # batch: the fixed per-step cost is paid the fewest times)
    assert len(records) == 1 and records[0]["status"] == "ok"
    assert records[0]["config"]["batch_size"] == 128
    report = json.loads((tmp_path / "opt-tiny" / "report" / "optimize.json").read_text())
    summary = report["summary"]
    assert summary["configurations"] == 3 and summary["budget"] == 1
    assert summary["measured_of_chosen"] == 1 and summary["pick"].endswith("b=128")
    assert summary["ground_truth"] == "1 of 3 measured"
    assert "random_search" not in summary  # not scored without every configuration measured
    assert [c["predicted_rank"] for c in report["candidates"]] == [1, 2, 3]
    assert "ground truth: 1 of 3 measured" in capsys.readouterr().out


def test_optimize_bad_budget_is_usage_error(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "study: t\ncluster: localhost\nfixed: {arch: single}\nfactors:\n  batch_size: [8, 16]\n"
    )
    assert main(["optimize", str(spec), "--budget", "0"]) == 2
    assert "--budget" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()
