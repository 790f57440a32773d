"""`archbench optimize`: measures only the chosen configurations, through the real sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from record_files import read_records

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


def _calibration(folder: Path) -> Path:
    """A calibration file of round numbers: the tests check what the optimizer does with a
    prediction, not the prediction."""
    calibration = folder / "calib.json"
    calib = Calibration(intra=F.LinkCost(1e-5, 1e-9), compute={"mlp": ComputeLine(1e-3, 2e-5)})
    calibration.write_text(json.dumps({"calibration": calib.to_json()}))
    return calibration


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
    calibration = _calibration(tmp_path)
    status = main(["optimize", str(spec), "--budget", "1", "--calibration", str(calibration)])
    assert status == 0
    results = tmp_path / "opt-tiny" / "results.jsonl"
    records = read_records(results)
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


@pytest.mark.timeout(400)
def test_optimize_by_time_to_target_uses_the_steps_its_convergence_group_measured(
    tmp_path: Path, capsys
) -> None:
    # single at global batch 32 and ring with 2 workers of 16 apply the same updates (the
    # equivalence oracle): one convergence group; single at batch 16 is another
    spec = tmp_path / "conv.yaml"
    spec.write_text(
        "study: conv\n"
        "cluster: localhost\n"
        "timeout_s: 240\n"
        "fixed: {model: mlp, dataset: fashion_mnist, steps: 20, eval_every: 4, eval_samples: 300,"
        " warmup_steps: 2, probe_every: 3, threads: 1}\n"
        "factors:\n"
        "  arch: [single, ring]\n"
        "  batch_size: [16, 32]\n"
        "  workers: [1, 2]\n"
        "exclude:\n"
        "  - {arch: single, workers: 2}\n"
        "  - {arch: ring, workers: 1}\n"
        "  - {arch: ring, batch_size: 32}\n"
    )
    assert main(["sweep", str(spec)]) == 0
    records = read_records(tmp_path / "conv" / "results.jsonl")
    assert len(records) == 3 and all(r["status"] == "ok" for r in records)
    # a target every run reaches, but not at its first evaluation in all of them
    first = sorted(r["timing"]["epochs"][0]["test_accuracy"] for r in records)
    best = min(max(p["test_accuracy"] for p in r["timing"]["epochs"]) for r in records)
    target = round((first[-1] + best) / 2, 4) if best > first[-1] else best
    capsys.readouterr()
    status = main(
        ["optimize", str(spec), "--no-measure", "--budget", "3", "--objective",
         "time_to_target", "--target-accuracy", str(target),
         "--calibration", str(_calibration(tmp_path))]
    )  # fmt: skip
    assert status == 0
    report = json.loads((tmp_path / "conv" / "report" / "optimize.json").read_text())
    assert report["summary"]["target_accuracy"] == pytest.approx(target)

    def reached_at(record: dict) -> tuple[int, float]:
        point = next(p for p in record["timing"]["epochs"] if p["test_accuracy"] >= target)
        return point["step"], point["train_s"]

    by_label = {c["label"]: c for c in report["candidates"]}
    for record in records:
        arch, batch = record["config"]["arch"], record["config"]["batch_size"]
        workers = record["cluster"]["num_workers"]
        candidate = by_label[f"{arch} mlp W={workers} b={batch}"]
        step, train_s = reached_at(record)
        assert candidate["measured_s"] == pytest.approx(train_s)
        assert candidate["predicted_s"] == pytest.approx(
            candidate["predicted_step_s"] * candidate["steps_to_target"]
        )
    single_32, ring_2x16 = by_label["single mlp W=1 b=32"], by_label["ring mlp W=2 b=16"]
    # one group, one count of steps: the median over both runs' first steps at the target
    group_steps = sorted(
        reached_at(r)[0]
        for r in records
        if r["config"]["batch_size"] * r["cluster"]["num_workers"] == 32
    )
    assert (
        single_32["steps_to_target"]
        == ring_2x16["steps_to_target"]
        == pytest.approx(sum(group_steps) / 2)
    )
    single_16 = next(
        r for r in records if r["cluster"]["num_workers"] == 1 and r["config"]["batch_size"] == 16
    )
    assert by_label["single mlp W=1 b=16"]["steps_to_target"] == reached_at(single_16)[0]
    assert "steps to target" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--objective", "time_to_target"], "needs --target-accuracy"),
        (["--objective", "time_to_target", "--target-accuracy", "1.5"], "must be in (0, 1]"),
        (["--target-accuracy", "0.5"], "applies only to --objective time_to_target"),
        (["--objective", "time_to_target", "--target-accuracy", "0.5", "--no-measure"],
         "no configuration of t has steps to test accuracy 0.5"),
    ],
)  # fmt: skip
def test_optimize_time_to_target_bad_input(tmp_path: Path, capsys, extra, message) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text(
        "study: t\ncluster: localhost\nfixed: {arch: single}\nfactors:\n  batch_size: [8, 16]\n"
    )
    assert main(["optimize", str(spec), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t" / "report").exists()
