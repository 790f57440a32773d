"""`archbench model fit/validate`: the scored configurations are never the fitted ones, and a
study generated from known parameters is predicted well on its held-out part."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from archbench.cli import main
from archbench.perfmodel.fit.fitting import split_random, split_where
from archbench.perfmodel.fit.records import study_observations
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.predictor import ArchParams, ModelParams, StepConfig, predict_step

# Made-up model sizes: the PS records name a model archbench cannot build ("toy"), so the
# shard plan falls back to an even split and no TensorFlow is needed.
PARAM_BYTES = {"toy": 4.0e5, "big": 8.0e6}
TRUTH = ModelParams(
    arch={
        "ring": ArchParams(alpha_s=2e-4, efficiency=1.3, overlap=0.3),
        "p2p-staggered": ArchParams(alpha_s=5e-4, efficiency=1.6, gamma_s_per_byte=1e-9),
        "ps-sync": ArchParams(alpha_s=1e-3, efficiency=1.2, gamma_s_per_byte=2e-9),
    },
    cpu_contention=0.4,
    compute={"toy": ComputeLine(0.002, 2e-5), "big": ComputeLine(0.01, 3e-4)},
)
CALIB = Calibration(intra=F.LinkCost(2e-5, 5e-10), inter=F.LinkCost(6e-5, 1e-10))


def _record(
    run_id: str,
    arch: str,
    model: str,
    workers: int,
    batch: int,
    link: str,
    num_ps: int,
    step_s: float,
    compute_s: float,
) -> dict:
    world = workers + num_ps
    roles = ["ps"] * num_ps + ["chief"] + ["worker"] * (workers - 1)
    return {
        "schema": "archbench.run/1", "run_id": run_id, "study": "synthetic", "status": "ok",
        "config": {"arch": arch, "model": model, "dataset": "synthetic", "batch_size": batch,
                   "num_ps": num_ps, "sync": "sync", "ps_sharding": "round-robin",
                   "p2p_schedule": "staggered" if arch == "p2p" else None, "seed": 1},
        "cluster": {"world_size": world, "num_workers": workers, "num_ps": num_ps,
                    "hosts": [f"node{i + 1}" for i in range(world)], "roles": roles, "link": link},
        "model_stats": {"params": PARAM_BYTES[model] / 4, "param_bytes": PARAM_BYTES[model]},
        "timing": {"step_s_median": step_s, "compute_s_median": compute_s, "comm_s_median": None},
    }  # fmt: skip


def write_study(folder: Path, noise: float = 0.0, seed: int = 3) -> Path:
    """A study whose step times come from TRUTH (times a little noise), two repetitions each."""
    rng = random.Random(seed)
    lines = []
    count = 0
    for arch, num_ps in (("ring", 0), ("p2p", 0), ("ps", 1), ("ps", 2)):
        for model in PARAM_BYTES:
            for workers in (2, 3):
                for batch in (32, 128):
                    for link in ("200mbit", "1gbit"):
                        world = workers + num_ps
                        placement = F.Placement(
                            hosts=tuple(f"node{i + 1}" for i in range(world)),
                            roles=(F.PS,) * num_ps + (F.WORKER,) * workers,
                        )
                        config = StepConfig(
                            arch=arch, model=model, batch_size=batch, param_bytes=PARAM_BYTES[model],
                            placement=placement, bandwidth_bits=200e6 if link == "200mbit" else 1e9,
                            cpu_sharing_ranks=world,
                        )  # fmt: skip
                        pred = predict_step(config, TRUTH, CALIB)
                        for _rep in range(2):
                            count += 1
                            jitter = 1 + rng.uniform(-noise, noise)
                            lines.append(
                                _record(
                                    f"r{count:04d}",
                                    arch,
                                    model,
                                    workers,
                                    batch,
                                    link,
                                    num_ps,
                                    pred.step_s * jitter,
                                    pred.compute_s * jitter,
                                )
                            )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


def write_calibration(path: Path) -> Path:
    """The machine constants TRUTH was generated with, as a saved calibration file."""
    path.write_text(json.dumps({"calibration": CALIB.to_json()}))
    return path


def test_random_split_is_by_configuration_and_stratified(tmp_path: Path) -> None:
    observations = study_observations(write_study(tmp_path / "study"))
    split = split_random(observations, 0.5, seed=1)
    split.check_disjoint()
    train_keys = {o.config_key for o in split.train}
    test_keys = {o.config_key for o in split.test}
    assert not train_keys & test_keys
    # both repetitions of a configuration fall on the same side
    assert len(split.train) == 2 * len(train_keys)
    # every variant is fitted and scored
    variants = {o.arch_key for o in observations}
    assert {o.arch_key for o in split.train} == variants == {o.arch_key for o in split.test}
    by_link = split_where(observations, "cluster.link", "200mbit")
    assert {o.record["cluster"]["link"] for o in by_link.train} == {"200mbit"}
    assert {o.record["cluster"]["link"] for o in by_link.test} == {"1gbit"}


def test_fit_then_validate_never_scores_fitted_runs(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study", noise=0.03)
    calib = write_calibration(tmp_path / "calib.json")
    assert (
        main(
            [
                "model",
                "fit",
                str(study),
                "--train-fraction",
                "0.5",
                "--seed",
                "2",
                "--calibration",
                str(calib),
            ]
        )
        == 0
    )
    fit = json.loads((study / "report" / "perfmodel_fit.json").read_text())
    assert main(["model", "validate", str(study), "--calibration", str(calib)]) == 0
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    scored_labels = {row["config"] for row in validation["rows"]}
    observations = study_observations(study)
    fitted = {o.config_key for o in observations if o.run_id in set(fit["train_run_ids"])}
    scored = {o.config_key for o in observations if o.run_id not in set(fit["train_run_ids"])}
    assert fitted == set(fit["train_config_keys"])
    assert not fitted & scored
    assert len(validation["rows"]) == len(scored) > 0
    assert len(scored_labels) == len(scored)  # labels say which configuration each row is
    # the study was generated by the model itself (3% noise): held-out error stays small
    summary = validation["summary"]
    assert {"all", "p2p", "ps", "ring", "ps / toy", "ring / big"} <= set(summary)
    assert summary["all"]["mape_pct"] < 6.0
    assert (study / "report" / "perfmodel_validation.png").stat().st_size > 0
    assert (study / "report" / "perfmodel_validation.svg").stat().st_size > 0
    out = capsys.readouterr().out
    assert "MAPE" in out


def test_validate_refuses_when_everything_was_fitted(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    calib = write_calibration(tmp_path / "calib.json")
    # fit on every link level -> nothing held out
    fit_path = tmp_path / "all.json"
    assert (
        main(
            [
                "model",
                "fit",
                str(study),
                "--train-where",
                "study=synthetic",
                "--calibration",
                str(calib),
                "--out",
                str(fit_path),
            ]
        )
        == 0
    )
    assert main(["model", "validate", str(study), "--fit", str(fit_path)]) == 2
    assert "nothing is left to score" in capsys.readouterr().err


def test_extrapolates_to_an_unseen_bandwidth(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study")
    calib = write_calibration(tmp_path / "calib.json")
    assert (
        main(
            [
                "model",
                "validate",
                str(study),
                "--train-where",
                "cluster.link=1gbit",
                "--calibration",
                str(calib),
            ]
        )
        == 0
    )
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    assert all("200Mbit" in row["config"] for row in validation["rows"])
    # one bandwidth cannot tell link efficiency from per-byte host cost, so extrapolating to
    # a fifth of the bandwidth is looser than interpolating
    assert validation["summary"]["all"]["mape_pct"] < 15.0


@pytest.mark.parametrize("argv, message", [
    (["model", "fit", "/nonexistent/study"], "does not exist"),
    (["model", "fit", "{study}", "--train-fraction", "1.5"], "--train-fraction"),
    (["model", "fit", "{study}", "--train-where", "nonsense"], "FIELD=VALUE"),
])  # fmt: skip
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys, argv, message) -> None:
    study = write_study(tmp_path / "study")
    argv = [a.replace("{study}", str(study)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (study / "report").exists()


def test_ps_records_use_the_recorded_shard_plan() -> None:
    from archbench.perfmodel.fit.records import observation_from_record

    record = _record("p1", "ps", "toy", 2, 32, "1gbit", 2, 0.5, 0.01)
    record["comm"] = {"ps": {"sharding": {"bytes_per_server": [3.0e5, 1.0e5],
                                          "variables_per_server": [3, 1]}}}  # fmt: skip
    obs = observation_from_record(record)
    assert obs is not None and obs.config.ps_plan == ((3.0e5, 1.0e5), (3, 1))
    assert obs.config.cpu_sharing_ranks == 4  # emulated link: every rank on this machine's cores
    # the emulated 1gbit links let a tbf bucket of 1e9/8/500 = 250 kB through at once
    assert obs.config.link_burst_bytes == 250_000
    # the busiest server carries 3e5 of the 4e5 bytes: 2 workers x 3e5 per phase, less the
    # bucket, at 8e-9 s/B; push and pull each drain their own direction's bucket
    calib = Calibration(intra=F.LinkCost(0.0, 0.0), inter=F.LinkCost(0.0, 0.0),
                        compute={"toy": ComputeLine(0.0, 0.0)})  # fmt: skip
    pred = predict_step(obs.config, ModelParams(), calib)
    assert pred.comm_s == pytest.approx(2 * (2 * 3.0e5 - 250_000) * 8e-9)
