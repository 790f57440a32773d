"""`archbench model map`: the crossover between two architectures is found at the grid cell
where the model's own predictions change order, the study's runs are marked as agreeing or not,
and bad input writes nothing.

The synthetic study is priced by TRUTH under CALIB: a Horovod call costing 5 ms makes the ring
slow to start while the one server's link carries W gradients, so at 10 Gbit/s a PS on a host
of its own wins at few workers and the ring at many; at 1 Gbit/s the ring wins throughout.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from record_files import write_records
from test_perfmodel_fit import _record

from archbench.analysis.report import write_report
from archbench.cli import main
from archbench.perfmodel.fit.fitfile import FIT_NAME, FIT_SCHEMA
from archbench.perfmodel.fit.ranking import TOO_CLOSE, WRONG
from archbench.perfmodel.fit.records import observation_from_record
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine, fingerprint
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.predictor import ModelParams, predict_step
from archbench.perfmodel.optimize.crossover import Marker, axis_values, parse_range

TRUTH = ModelParams(compute={"toy": ComputeLine(0.002, 2e-5)})
CALIB = Calibration(
    intra=F.LinkCost(2e-5, 5e-10),
    inter=F.LinkCost(6e-5, 1e-10),
    ring_call_s={2: 5e-3},
    ps_request_s=1e-6,
    ps_accumulate_s_per_byte=0.0,
    ps_apply_s_per_byte=0.0,
)
PS = "ps (dedicated, 1 PS)"
BATCH = 32
MEASURED = {"ring": (2, 4, 8), "ps": (2, 4, 8)}
LINKS = ("1gbit", "10gbit")
# a small, quick grid
AXES = ["--workers", "2:32", "--bandwidth", "1gbit:100gbit", "--points", "9"]


def _run(arch: str, workers: int, link: str, step_s: float | None = None, run_id: str = "x"):
    num_ps = 1 if arch == "ps" else 0
    if step_s is None:  # from a record of its own: reading one completes it in place
        step_s = predicted_step(_record(run_id, arch, "toy", workers, BATCH, link, num_ps, 1, 1))
    return _record(run_id, arch, "toy", workers, BATCH, link, num_ps, step_s, 1.0)


def predicted_step(record: dict) -> float:
    """The step TRUTH predicts for the configuration as the record reader reads it."""
    return predict_step(observation_from_record(record).config, TRUTH, CALIB).step_s


def write_study(folder: Path, slower: dict | None = None, fit: bool = True) -> Path:
    """Two repetitions of ring and ps at each measured worker count and link, priced by TRUTH;
    `slower` scales the measured step of some (arch, workers, link); with `fit` a saved fit
    of TRUTH and CALIB that saw the runs of W <= 4."""
    records = []
    for arch, counts in MEASURED.items():
        for workers in counts:
            for link in LINKS:
                for rep in range(2):
                    run_id = f"{arch}-{workers}-{link}-{rep}"
                    record = _run(arch, workers, link, run_id=run_id)
                    factor = (slower or {}).get((arch, workers, link), 1.0)
                    record["timing"]["step_s_median"] *= factor
                    step_s = record["timing"]["step_s_median"]  # the report's throughput
                    record["timing"]["samples_per_s"] = BATCH * workers / step_s
                    records.append(record)
    folder.mkdir(parents=True)
    write_records(folder / "results.jsonl", records)
    if fit:
        fitted = [r["run_id"] for r in records if r["cluster"]["num_workers"] <= 4]
        document = {
            "schema": FIT_SCHEMA,
            "study": str(folder),
            "split": "test: TRUTH",
            "train_run_ids": fitted,
            "train_config_keys": [],
            "params": TRUTH.to_json(),
            "calibration": CALIB.to_json(),
            "in_sample_error": {"all": {"mape_pct": 2.0}},
        }
        (folder / "report").mkdir()
        (folder / "report" / FIT_NAME).write_text(json.dumps(document))
    return folder


def run_map(study: Path, *extra: str, capsys) -> dict:
    assert main(["model", "map", str(study), *AXES, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def expected_crossover(workers: list[float], link: str) -> float | None:
    """The first worker count of the grid where TRUTH prices the ring below the PS, computed
    configuration by configuration from records as the fit reads them."""
    for w in workers:
        ring = predicted_step(_run("ring", int(w), link))
        ps = predicted_step(_run("ps", int(w), link))
        if ring < ps:
            return w
    return None


def test_the_crossover_is_at_the_cell_where_the_predictions_change_order(
    tmp_path: Path, capsys
) -> None:
    study = write_study(tmp_path / "study")
    document = run_map(study, capsys=capsys)
    (workload,) = document["workloads"]
    assert workload["candidates"] == ["ring", PS]
    xs, ys = workload["x"]["values"], workload["y"]["values"]
    assert workload["x"]["axis"] == "workers" and workload["y"]["axis"] == "bandwidth"
    assert 1e10 in ys and 1e9 in ys  # the study's links are grid lines
    at = expected_crossover(xs, "10gbit")
    assert at is not None and 4 < at < 32  # a real crossover, inside the grid
    row = workload["winner"][ys.index(1e10)]
    index = xs.index(at)
    assert set(row[:index]) == {PS} and set(row[index:]) == {"ring"}
    found = [
        c for c in workload["crossovers"] if c["along"] == "workers" and c["other_value"] == 1e10
    ]
    assert len(found) == 1
    (crossing,) = found
    assert (crossing["loser"], crossing["winner"]) == (PS, "ring")
    assert (crossing["before"], crossing["at"]) == (xs[index - 1], at)
    # the server's link carries one gradient more per worker: it grows fastest
    assert crossing["deciding_term"] in (F.SERVER_LINK, F.LINK)
    assert crossing["text"].startswith(f"ring overtakes {PS} at {at:g} workers")
    # at 1 Gbit/s the PS's link costs ten times as much: the ring wins all along
    assert set(workload["winner"][ys.index(1e9)]) == {"ring"}
    # along the bandwidth at two workers the PS takes over as the links get faster
    up = [c for c in workload["crossovers"] if c["along"] == "bandwidth" and c["other_value"] == 2]
    assert [(c["loser"], c["winner"]) for c in up] == [("ring", PS)]


def test_the_margin_under_the_validated_error_is_too_close_to_call(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    first = run_map(study, capsys=capsys)
    assert "in-sample" in first["too_close_source"] and first["too_close_pct"] == 2.0
    (study / "report" / "perfmodel_validation.json").write_text(
        json.dumps({"summary": {"all": {"mape_pct": 15.0}}})
    )
    document = run_map(study, capsys=capsys)
    assert "held-out" in document["too_close_source"] and document["too_close_pct"] == 15.0
    (workload,) = document["workloads"]
    margins = [m for row in workload["margin_pct"] for m in row]
    close = [c for row in workload["too_close"] for c in row]
    assert close == [m < 15.0 for m in margins]
    assert any(close) and not all(close)
    # a crossover whose new winner leads by less than the error says so
    assert main(["model", "map", str(study), *AXES]) == 0
    out = capsys.readouterr().out
    assert "a margin under 15.0% (the held-out MAPE of `model validate`" in out
    flagged = [c for c in workload["crossovers"] if c["too_close"]]
    assert flagged and all(c["winner_margin_pct"] < 15.0 for c in flagged)
    assert "[too close to call: margin" in out


def test_measured_markers_agree_or_not(tmp_path: Path, capsys) -> None:
    # at 4 workers and 10 Gbit/s TRUTH prices the PS faster than the ring...
    xs = list(axis_values("workers", *parse_range("workers", "2:32"), 9, [2, 4, 8]))
    assert expected_crossover(xs, "10gbit") > 4
    # ...and there the study's PS runs took three times as long: that setting disagrees
    study = write_study(tmp_path / "study", slower={("ps", 4, "10gbit"): 3.0})
    document = run_map(study, capsys=capsys)
    (workload,) = document["workloads"]
    marks = {(m["x"], m["y"]): m for m in workload["measured"]}
    assert set(marks) == {(w, b) for w in (2, 4, 8) for b in (1e9, 1e10)}
    assert all(m["compared"] for m in marks.values())
    disagree = {k for k, m in marks.items() if not m["agrees"]}
    assert disagree == {(4, 1e10)}
    odd = marks[(4, 1e10)]
    assert odd["predicted_fastest"] == PS and odd["measured_fastest"] == "ring"
    assert odd["map_winner"] == PS


def test_files_beside_the_figure_and_the_outline(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    assert main(["model", "map", str(study), *AXES]) == 0
    out = capsys.readouterr().out
    assert f"ring overtakes {PS} at " in out and "at 10 Gbit/s" in out
    assert "deciding term" in out and "the study's runs" in out
    folder = study / "map"
    for name in ("toy_b32.png", "toy_b32.svg", "toy_b32_crossovers.md", "toy_b32_crossovers.csv"):
        assert (folder / name).stat().st_size > 0, name
    with open(folder / "toy_b32_crossovers.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["loser"], r["winner"]) for r in rows} == {(PS, "ring"), ("ring", PS)}
    assert all(r["deciding_term"] for r in rows)
    assert "toy_b32.png" in (folder / "toy_b32_crossovers.md").read_text()
    document = run_map(study, capsys=capsys)
    (workload,) = document["workloads"]
    xs, ys = workload["x"]["values"], workload["y"]["values"]
    # the fit saw W <= 4 at 1 and 10 Gbit/s: the outline spans those cells
    assert workload["fitted_cells"] == {
        "workers": [xs.index(2), xs.index(4)],
        "bandwidth": [ys.index(1e9), ys.index(1e10)],
    }


def test_other_axes_and_a_held_value(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    argv = ["--x", "model-size", "--y", "latency", "--workers", "8", "--bandwidth", "10gbit",
            "--points", "5", "--model-size", "40kB:40MB", "--latency", "10us:10ms"]  # fmt: skip
    assert main(["model", "map", str(study), "--json", *argv]) == 0
    (workload,) = json.loads(capsys.readouterr().out)["workloads"]
    assert workload["held"] == {"workers": 8.0, "bandwidth": 1e10}
    assert workload["x"]["axis"] == "model-size" and 4e5 in workload["x"]["values"]
    assert 6e-5 in workload["y"]["values"]  # the calibration's latency
    # runs at 8 workers and 10 Gbit/s sit at the model's bytes and the calibration's latency
    assert [(m["x"], m["y"]) for m in workload["measured"]] == [(4e5, 6e-5)]
    # a larger gradient loads the one server's link W times: the ring wins the big models
    winners = workload["winner"]
    assert winners[0][-1] == "ring"


def test_no_fit_fits_now_on_the_study_calibration(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study", fit=False)
    here = fingerprint(True, 2.0, 4, None, "test cpu")
    bench = [
        {"kind": "microbench", "bench": "ps_requests", "requests": n, "time_s": 1e-3 + n * 4e-5,
         "fingerprint": here}
        for n in (2, 16, 64)
    ]  # fmt: skip
    (study / "calibration.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench))
    assert main(["model", "map", str(study), *AXES]) == 0
    out = capsys.readouterr().out
    assert "made now on every configuration" in out and "in-sample MAPE" in out
    assert (study / "map" / "toy_b32.png").is_file()
    assert not (study / "report").exists()  # the fit made now is not saved


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{missing}"], "does not exist"),
        (["{empty}"], "no successful run records"),
        (["{unfitted}"], "no fit"),
        (["{study}", "--x", "latency", "--y", "latency"], "two different axes"),
        (["{study}", "--workers", "0:64"], "above 0"),
        (["{study}", "--workers=-2:64"], "above 0"),
        (["{study}", "--bandwidth", "10gbit:1gbit"], "LO must be below HI"),
        (["{study}", "--bandwidth", "0gbit:1gbit"], "bandwidth must be"),
        (["{study}", "--workers", "8"], "--workers is an axis of the map: give a range"),
        (["{study}", "--latency", "1ms:2ms", "--y", "latency", "--bandwidth", "1gbit:2gbit"],
         "not an axis"),
        (["{study}", "--model-size", "0MB"], "above 0"),
        (["{study}", "--points", "1"], "--points"),
        (["{study}", "--out", "{study}/a/b/c"], "cannot be written"),
        (["{single}"], "no workload with two architectures"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_status_2_and_writes_nothing(
    tmp_path: Path, capsys, argv, message
) -> None:
    study = write_study(tmp_path / "study")
    (tmp_path / "empty").mkdir()
    write_study(tmp_path / "unfitted", fit=False)
    single = tmp_path / "single"
    single.mkdir()
    write_records(single / "results.jsonl", [_run("ring", 2, "1gbit", run_id="only")])
    names = {"study": study, "missing": tmp_path / "missing", "empty": tmp_path / "empty",
             "unfitted": tmp_path / "unfitted", "single": single}  # fmt: skip
    argv = [a.format(**names) for a in argv]
    before = sorted(p for p in tmp_path.rglob("*"))
    assert main(["model", "map", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_an_unknown_axis_is_refused_by_the_parser(tmp_path: Path, capsys) -> None:
    study = write_study(tmp_path / "study")
    with pytest.raises(SystemExit) as stop:
        main(["model", "map", str(study), "--x", "depth"])
    assert stop.value.code == 2
    assert "invalid choice: 'depth'" in capsys.readouterr().err
    assert not (study / "map").exists()


def test_a_colocated_candidate_needs_as_many_workers_as_servers() -> None:
    from archbench.perfmodel.optimize.crossover import Point, candidates_of

    record = _record("c", "ps", "toy", 4, BATCH, "1gbit", 2, 0.01, 0.002)
    record["cluster"]["hosts"] = ["node1", "node2", "node1", "node2", "node3", "node4"]
    obs = observation_from_record(record)
    (candidate,) = candidates_of({"ps (colocated, 2 PS)": [obs]})
    assert candidate.layout == "colocated"
    assert candidate.config_at(Point(1, 1e9)) is None
    config = candidate.config_at(Point(3, 1e9))
    assert config is not None and config.num_ps == 2 and config.num_workers == 3
    bigger = candidate.config_at(Point(3, 1e9, model_bytes=8e5))
    assert bigger is not None and bigger.param_bytes == pytest.approx(8e5)
    assert replace(bigger, param_bytes=4e5).placement == config.placement


def test_the_report_draws_the_map_and_says_beside_the_answer_where_it_changes(
    tmp_path: Path,
) -> None:
    study = write_study(tmp_path / "study", slower={("ps", 4, "10gbit"): 3.0})
    report = write_report(study)
    text = report.markdown.read_text()
    answer = text[text.index("## The answer") : text.index("## Findings")]
    findings = text[text.index("## Findings") : text.index("## The study")]
    # beside the answer, once: along the workers at each of the study's own links
    assert "Where the performance model says this changes" in answer
    assert re.search(
        rf"ring overtakes {re.escape(PS)} at \d+ workers \(\d+ before\) at 10 Gbit/s", answer
    )
    assert "ring fastest all along" in answer and "at 1 Gbit/s" in answer
    assert "not at 4 workers, 10 Gbit/s: measured ring, predicted ps" in answer
    assert "overtakes" not in findings
    # the section: the figure, the crossovers, the study's runs against the map
    assert "## Where the answer changes: the crossover map" in text
    assert (study / "report" / "figures" / "map_toy_b32.png").stat().st_size > 0
    assert "DISAGREES" in (study / "report" / "tables" / "map_measured.csv").read_text()
    assert "a margin under 2.0% (the fit's in-sample MAPE" in text
    # a report of a records file names why it has no map
    other = write_report(study / "results.jsonl", tmp_path / "records-report")
    assert "not records files" in other.markdown.read_text()
    assert "Where the performance model says" not in other.markdown.read_text()


def test_a_line_with_one_winner_says_where_it_is_too_close_and_a_missing_term_is_none(
    tmp_path: Path, capsys
) -> None:
    study = write_study(tmp_path / "study")
    (study / "report" / "perfmodel_validation.json").write_text(
        json.dumps({"summary": {"all": {"mape_pct": 40.0}}})
    )
    document = run_map(study, capsys=capsys)
    (workload,) = document["workloads"]
    ys = workload["y"]["values"]
    row = ys.index(1e9)
    close = sum(workload["too_close"][row])
    assert set(workload["winner"][row]) == {"ring"} and 0 < close < len(workload["x"]["values"])
    assert main(["model", "map", str(study), *AXES]) == 0
    out = capsys.readouterr().out
    count = len(workload["x"]["values"])
    assert (
        f"ring fastest all along 2 .. 32 workers at 1 Gbit/s [too close to call at {close} of "
        f"its {count} points]" in out
    )
    # the ring has no server link: its side of that term is said to be none, not "0 -> 0"
    assert "ring has none" in out and "0 -> 0" not in out


def test_a_marker_whose_measured_gap_is_within_the_runs_noise_is_too_close_to_call() -> None:
    """The ranking's rule: the gap the call rests on against the larger of the two floors."""
    predicted = {"ring": 0.0329, "p2p": 0.0350}  # the model picks the ring
    noise = {"ring": 0.005, "p2p": 0.004}
    # p2p measured fastest by 0.3%, within the ring's 0.5% floor: neither agrees nor disagrees
    close = Marker(2, 1e8, {"ring": 0.0348, "p2p": 0.0347}, predicted, "ring", noise)
    assert close.verdict == TOO_CLOSE and not close.agrees and close.too_close
    # by 15%: the runs order them, and the pick is wrong
    wrong = replace(close, measured_s={"ring": 0.0400, "p2p": 0.0347})
    assert wrong.verdict == WRONG and not wrong.agrees and not wrong.too_close
    # the pick fastest, its runner-up 0.3% behind: too close as well; 15% behind: right
    assert replace(close, measured_s={"ring": 0.0346, "p2p": 0.0347}).too_close
    assert replace(close, measured_s={"ring": 0.0300, "p2p": 0.0347}).agrees
    # without floors (every candidate run once, none known) any gap decides
    assert replace(close, noise={}).verdict == WRONG
