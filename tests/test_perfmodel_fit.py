"""`archbench model fit/validate`: the scored configurations are never the fitted ones, and a
study generated from known parameters is predicted well on its held-out part."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from record_files import write_records

from archbench.cli import main
from archbench.perfmodel.fit.fitting import (
    describe,
    fit_model,
    noise_floor,
    split_link,
    split_random,
    split_where,
    split_workers,
)
from archbench.perfmodel.fit.records import observation_from_record, study_observations
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.predictor import ArchParams, ModelParams, predict_step

# Made-up model sizes: the PS records name a model archbench cannot build ("toy"), so the
# shard plan falls back to an even split and no TensorFlow is needed.
PARAM_BYTES = {"toy": 4.0e5, "big": 8.0e6}
# Made with the terms a fit may add (per-step overhead, the links' efficiency shared by every
# architecture, the ring's overlap, host per-byte work shared by ring and p2p, the PS's pulls
# served partly in turn), so a fit can recover them.
TRUTH = ModelParams(
    arch={
        "ring": ArchParams(overhead_s=1e-3, efficiency=1.2, overlap=0.3, gamma_s_per_byte=1e-9),
        "p2p-staggered": ArchParams(overhead_s=2e-3, efficiency=1.2, gamma_s_per_byte=1e-9),
        "ps-sync": ArchParams(overhead_s=5e-4, efficiency=1.2, pull_stagger=0.4),
    },
    compute={"toy": ComputeLine(0.002, 2e-5), "big": ComputeLine(0.01, 3e-4)},
)
CALIB = Calibration(intra=F.LinkCost(2e-5, 5e-10), inter=F.LinkCost(6e-5, 1e-10))
WORKERS = (2, 3)


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
                    "hosts": [f"node{i + 1}" for i in range(world)], "roles": roles, "link": link,
                    "dilation": 2.0, "vcpus_per_node": 4},
        "env": {"cpu": "test cpu"},
        "model_stats": {"params": PARAM_BYTES[model] / 4, "param_bytes": PARAM_BYTES[model]},
        "timing": {"step_s_median": step_s, "compute_s_median": compute_s, "comm_s_median": None},
    }  # fmt: skip


def write_study(
    folder: Path,
    noise: float = 0.0,
    seed: int = 3,
    workers: tuple[int, ...] = WORKERS,
    archs: tuple[tuple[str, int], ...] = (("ring", 0), ("p2p", 0), ("ps", 1), ("ps", 2)),
    models: tuple[str, ...] = tuple(PARAM_BYTES),
    batches: tuple[int, ...] = (32, 128),
    links: tuple[str, ...] = ("200mbit", "1gbit"),
    truth: ModelParams = TRUTH,
) -> Path:
    """A study whose step times come from `truth` (times a little noise), two repetitions
    each."""
    rng = random.Random(seed)
    lines = []
    count = 0
    for arch, num_ps in archs:
        for model in models:
            for w in workers:
                for batch in batches:
                    for link in links:
                        # the configuration as the fit will read it from the record
                        shape = _record("x", arch, model, w, batch, link, num_ps, 1.0, 1.0)
                        config = observation_from_record(shape).config
                        pred = predict_step(config, truth, CALIB)
                        for _rep in range(2):
                            count += 1
                            jitter = 1 + rng.uniform(-noise, noise)
                            lines.append(
                                _record(
                                    f"r{count:04d}",
                                    arch,
                                    model,
                                    w,
                                    batch,
                                    link,
                                    num_ps,
                                    pred.step_s * jitter,
                                    pred.compute_s,
                                )  # fmt: skip
                            )
    write_records(folder / "results.jsonl", lines)
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
    # by link rate: the fastest by default
    fastest = split_link(observations)
    assert {o.config.bandwidth_bits for o in fastest.train} == {1e9}
    assert {o.config.bandwidth_bits for o in fastest.test} == {200e6}


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_worker_split_holds_out_every_worker_count_above_the_cut(tmp_path: Path, cut) -> None:
    observations = study_observations(
        write_study(tmp_path / "study", workers=(1, 2, 3, 4), batches=(32,), links=("1gbit",))
    )
    split = split_workers(observations, cut)
    split.check_disjoint()
    assert {o.config.num_workers for o in split.train} == set(range(1, cut + 1))
    assert {o.config.num_workers for o in split.test} == set(range(cut + 1, 5))
    # every run above the cut is scored, every run at or below it fitted
    assert all(o.config.num_workers > cut for o in split.test)
    assert len(split.train) + len(split.test) == len(observations)


def test_a_single_baseline_with_companions_is_one_worker(tmp_path: Path) -> None:
    record = _record("s1", "single", "toy", 1, 32, "1gbit", 0, 0.01, 0.009)
    record["cluster"].update(world_size=3, hosts=["node1", "node2", "node3"],
                             roles=["chief", "companion", "companion"])  # fmt: skip
    obs = observation_from_record(record)
    assert (
        obs is not None and obs.config.num_workers == 1 and obs.config.placement.hosts == ("node1",)
    )


def test_noise_floor_by_hand() -> None:
    # 10 and 12: each is 2 from the other, 2/12 and 2/10 -> mean 0.18333
    assert noise_floor([10.0, 12.0]) == pytest.approx((2 / 12 + 2 / 10) / 2)
    # 9, 10, 11: 9 is 1.5 from 10.5, 10 is 0 from 10, 11 is 1.5 from 9.5
    assert noise_floor([9.0, 10.0, 11.0]) == pytest.approx((1.5 / 10.5 + 0 + 1.5 / 9.5) / 3)
    assert noise_floor([10.0]) is None


def test_a_fit_with_fewer_configurations_than_terms_keeps_them_by_name(tmp_path: Path) -> None:
    # one ring configuration (mlp at 1 Gbit, W=2): one term at most can be fitted from it
    one = study_observations(
        write_study(
            tmp_path / "one",
            archs=(("ring", 0),),
            models=("toy",),
            workers=(2,),
            batches=(32,),
            links=("1gbit",),
        )  # fmt: skip
    )
    result = fit_model(one, CALIB)
    fitted = [t for t in result.terms if t.fitted]
    kept = {t.term.name: t for t in result.terms if not t.fitted}
    assert [t.term.name for t in fitted] == ["per-step overhead [ring]"]
    assert fitted[0].configurations == 1
    overlap = kept["overlap with compute [ring]"]
    assert overlap.value == 0.0 and "1 fitted configuration(s)" in overlap.reason
    assert "per-step overhead [ring]" in overlap.reason
    assert kept["link efficiency [ring]"].value == 1.0
    # the kept terms keep their calibrated values in the parameters used for predictions
    ring = result.params.for_key("ring")
    assert ring.overlap == 0.0 and ring.efficiency == 1.0 and ring.gamma_s_per_byte == 0.0


def test_shared_terms_are_one_value_for_every_architecture(tmp_path: Path) -> None:
    observations = study_observations(write_study(tmp_path / "study"))
    result = fit_model(split_workers(observations, 2).train, CALIB)
    terms = {t.term.name: t for t in result.terms}
    efficiency = terms["link efficiency [p2p-staggered, ps-sync, ring]"]
    assert efficiency.fitted
    values = {result.params.for_key(k).efficiency for k in efficiency.term.keys}
    assert len(values) == 1 and values.pop() == pytest.approx(1.2, rel=0.05)
    # the PS's own term: how far its server sends the pulls in turn (one server, two workers
    # on its link tell it from the links' efficiency)
    stagger = terms["pulls served in turn [ps-sync]"]
    assert stagger.fitted and result.params.for_key("ps-sync").pull_stagger == pytest.approx(
        0.4, abs=0.05
    )
    # p2p exchanges after the backward pass: it has no overlap term to fit
    assert "overlap with compute [p2p-staggered]" not in terms


def test_a_term_the_fit_puts_on_its_bound_lets_the_terms_it_hid_be_fitted(tmp_path: Path) -> None:
    # a ring with no per-step overhead: at the start every term is free, and the overhead's
    # effect on these four configurations is too like the overlap's to fit both; the fit then
    # puts the overhead on its bound (0), so it is kept there and the overlap fitted without it
    truth = ModelParams(
        arch={"ring": ArchParams(overhead_s=0.0, overlap=0.5)}, compute=TRUTH.compute
    )
    ring = study_observations(
        write_study(
            tmp_path / "ring",
            archs=(("ring", 0),),
            workers=(2,),
            links=("1gbit",),
            truth=truth,
        )  # fmt: skip
    )
    result = fit_model(ring, CALIB)
    terms = {t.term.name: t for t in result.terms}
    overhead = terms["per-step overhead [ring]"]
    assert not overhead.fitted and overhead.value == 0.0
    assert "the fit put it on its bound (0)" in overhead.reason
    overlap = terms["overlap with compute [ring]"]
    assert overlap.fitted and result.params.for_key("ring").overlap == pytest.approx(0.5, abs=0.01)
    assert result.params.for_key("ring").efficiency == pytest.approx(1.0, abs=0.01)
    # the report keeps the order the terms are tried in, whichever pass settled them
    assert [t.term.field for t in result.terms][:3] == ["overhead_s", "efficiency", "overlap"]


def test_a_term_the_calibration_measured_is_not_fitted_again(tmp_path: Path) -> None:
    observations = study_observations(write_study(tmp_path / "study"))
    measured = replace(CALIB, measured=(*CALIB.measured, "link_efficiency"))
    result = fit_model(split_workers(observations, 2).train, measured)
    terms = {t.term.name: t for t in result.terms}
    shared = terms["link efficiency [p2p-staggered, ps-sync, ring]"]
    assert not shared.fitted and "measured by the calibration" in shared.reason
    # the calibrated value stands in the predictions (the links' own efficiency is the
    # calibration's: 1 here), where the study's links were 1.2: the fit cannot undo it
    assert result.params.for_key("ring").efficiency == 1.0
    # the PS's own term is still the fit's to settle (here it would have to undo the links'
    # slower rate, below its bound: kept there, by name)
    stagger = terms["pulls served in turn [ps-sync]"]
    assert stagger.fitted or "the fit put it on its bound" in stagger.reason


def test_fit_then_validate_never_scores_fitted_runs(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study", noise=0.03)
    calib = write_calibration(tmp_path / "calib.json")
    assert main(["model", "fit", str(study), "--split", "random", "--train-fraction", "0.5",
                 "--seed", "2", "--calibration", str(calib)]) == 0  # fmt: skip
    fit = json.loads((study / "report" / "perfmodel_fit.json").read_text())
    assert main(["model", "validate", str(study), "--split", "random", "--train-fraction",
                 "0.5", "--seed", "2", "--calibration", str(calib)]) == 0  # fmt: skip
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    assert validation["fit"].endswith("perfmodel_fit.json") and validation["split"] == fit["split"]
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
    assert summary["all"]["noise_floor_pct"] is not None
    assert (study / "report" / "perfmodel_validation.png").stat().st_size > 0
    assert (study / "report" / "perfmodel_validation.svg").stat().st_size > 0
    out = capsys.readouterr().out
    assert "MAPE" in out and "noise floor" in out
    # the ranking over the same held-out configurations: every setting counted once, each
    # ranked one a pick among its candidates, as the text says
    ranking = validation["ranking"]
    assert (
        ranking["right"] + ranking["too_close_to_call"] + ranking["wrong"]
        == len(ranking["settings_ranked"])
        == ranking["ranked_settings"]
        <= ranking["settings"]
    )
    for setting in ranking["settings_ranked"]:
        assert setting["candidates"] >= 2 and setting["cost"] >= 1.0
        # a right pick is the measured fastest, a wrong one is not (a too-close call either)
        if setting["verdict"] in ("right", "wrong"):
            assert (setting["verdict"] == "right") == (
                setting["predicted_fastest"] == setting["measured_fastest"]
            )
    assert ranking["ranked_settings"] > 0
    assert f"picked the measured fastest in {ranking['right']} of" in out


def test_validate_by_default_fits_two_workers_and_scores_more(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study", noise=0.03, workers=(1, 2, 3, 4), batches=(32,))
    calib = write_calibration(tmp_path / "calib.json")
    assert main(["model", "validate", str(study), "--calibration", str(calib)]) == 0
    out = capsys.readouterr().out
    assert "fit W <= 2" in out and "fitted  per-step overhead [ring]" in out
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    assert {" W=3 " in r["config"] or " W=4 " in r["config"] for r in validation["rows"]} == {True}
    fit = json.loads((study / "report" / "perfmodel_fit.json").read_text())
    observations = study_observations(study)
    assert {o.config.num_workers for o in observations if o.run_id in fit["train_run_ids"]} == {
        1, 2,
    }  # fmt: skip
    assert validation["summary"]["all"]["mape_pct"] < 8.0


def test_validate_refuses_when_everything_was_fitted(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    calib = write_calibration(tmp_path / "calib.json")
    fit_path = tmp_path / "all.json"
    assert main(["model", "fit", str(study), "--train-where", "study=synthetic",
                 "--calibration", str(calib), "--out", str(fit_path)]) == 0  # fmt: skip
    assert main(["model", "validate", str(study), "--fit", str(fit_path)]) == 2
    assert "nothing is left to score" in capsys.readouterr().err


def test_extrapolates_to_an_unseen_bandwidth(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study")
    calib = write_calibration(tmp_path / "calib.json")
    assert main(["model", "validate", str(study), "--split", "link", "--train-link", "1gbit",
                 "--calibration", str(calib)]) == 0  # fmt: skip
    validation = json.loads((study / "report" / "perfmodel_validation.json").read_text())
    assert all("200Mbit" in row["config"] for row in validation["rows"])
    assert validation["summary"]["all"]["mape_pct"] < 10.0


def test_the_study_calibration_must_be_of_its_kind_of_cluster(tmp_path: Path, capsys) -> None:
    from archbench.perfmodel.fit.cli_model import study_calibration
    from archbench.perfmodel.measure.calibration import fingerprint

    study = write_study(tmp_path / "study", archs=(("ring", 0),), models=("toy",))
    observations = study_observations(study)
    here = fingerprint(True, 2.0, 4, None, "test cpu")
    other = fingerprint(True, 3.0, 4, 1, "test cpu")

    def bench(fp: dict, request_s: float) -> list[dict]:
        return [{"kind": "microbench", "bench": "ps_requests", "requests": n, "time_s": 1e-3 +
                 n * request_s, "fingerprint": fp} for n in (2, 16, 64)]  # fmt: skip

    (study / "calibration.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in bench(other, 9e-5) + bench(here, 4e-5))
    )
    calib, said = study_calibration(study, observations, None)
    assert calib.ps_request_s == pytest.approx(4e-5) and "calibration.jsonl" in said
    # only records of another dilation: the defaults, and the line says why
    (study / "calibration.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in bench(other, 9e-5))
    )
    calib, said = study_calibration(study, observations, None)
    assert calib.source == "defaults" and "dilation 2" in said


@pytest.mark.parametrize("argv, message", [
    (["model", "fit", "/nonexistent/study"], "does not exist"),
    (["model", "fit", "{study}", "--split", "random", "--train-fraction", "1.5"], "--train-fraction"),
    (["model", "fit", "{study}", "--train-where", "nonsense"], "FIELD=VALUE"),
    (["model", "fit", "{study}", "--cut", "0"], "--cut"),
    (["model", "fit", "{study}", "--split", "link", "--train-link", "10gbit"], "no run has link"),
])  # fmt: skip
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys, argv, message) -> None:
    study = write_study(tmp_path / "study")
    argv = [a.replace("{study}", str(study)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (study / "report").exists()


def test_ps_records_use_the_recorded_shard_plan() -> None:
    record = _record("p1", "ps", "toy", 2, 32, "1gbit", 2, 0.5, 0.01)
    del record["cluster"]["dilation"]  # the emulated cluster before time dilation
    record["comm"] = {"ps": {"sharding": {"bytes_per_server": [3.0e5, 1.0e5],
                                          "variables_per_server": [3, 1]}}}  # fmt: skip
    obs = observation_from_record(record)
    assert obs is not None and obs.config.ps_plan == ((3.0e5, 1.0e5), (3, 1))
    assert obs.config.cpu_sharing_ranks == 4  # undilated: every rank on this machine's cores
    # the emulated 1gbit links let a tbf bucket of 1e9/8/500 = 250 kB through at once
    assert obs.config.link_burst_bytes == 250_000
    # the busiest server carries 3e5 of the 4e5 bytes: 2 workers x 3e5 per phase, less the
    # bucket, at 8e-9 s/B; push and pull each drain their own direction's bucket
    calib = Calibration(intra=F.LinkCost(0.0, 0.0), inter=F.LinkCost(0.0, 0.0),
                        compute={"toy": ComputeLine(0.0, 0.0)}, ps_request_s=0.0,
                        ps_accumulate_s_per_byte=0.0, ps_apply_s_per_byte=0.0)  # fmt: skip
    pred = predict_step(obs.config, ModelParams(), calib)
    assert pred.comm_s == pytest.approx(2 * (2 * 3.0e5 - 250_000) * 8e-9)
    # dilated by 2: each node has cores of its own (the chief's host holds one rank), and tc
    # shapes the links to 500 Mbit/s, whose bucket is 125 kB
    dilated = observation_from_record(_record("p2", "ps", "toy", 2, 32, "1gbit", 2, 0.5, 0.01))
    assert dilated.config.cpu_sharing_ranks == 1
    assert dilated.config.link_burst_bytes == 125_000


def test_a_configuration_is_named_by_where_its_servers_run() -> None:
    """Validation tables name each configuration: a server on a host of its own, beside a
    worker, or every process on one host (which crosses no link) are three configurations."""
    spread = _record("p1", "ps", "toy", 2, 32, "1gbit", 1, 0.5, 0.01)
    beside = _record("p2", "ps", "toy", 2, 32, "1gbit", 1, 0.5, 0.01)
    beside["cluster"]["hosts"] = ["node1", "node1", "node2"]
    one_host = _record("p3", "ps", "toy", 2, 32, "1gbit", 1, 0.5, 0.01)
    one_host["cluster"]["hosts"] = ["node1"] * 3
    names = [describe(observation_from_record(r)) for r in (spread, beside, one_host)]
    assert [name.split(" ps=1 ")[1].split()[0] for name in names] == [
        "dedicated",
        "colocated",
        "one-host",
    ]
