"""The report survives what real studies contain: failed and timed-out runs, a half-written
line, records from an older schema, a single repetition, runs on a busy machine, and factors
listed by the sweep; and bad input gets one clear line, exit status 2 and nothing written."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import report_records
from conftest import REPO, launch_env
from record_files import minimal_record, read_records, write_records

from archbench.analysis import plotting, scaling
from archbench.analysis.report import write_report


@pytest.fixture(scope="session")
def real_study(tmp_path_factory) -> Path:
    return report_records.real_study(tmp_path_factory.mktemp("report-study"))


@pytest.fixture(scope="module")
def records(real_study) -> list[dict]:
    return read_records(real_study / "results.jsonl")


@pytest.fixture(scope="module")
def clean_report(records, tmp_path_factory):
    """The report of the unaltered records, to compare the altered ones against."""
    folder = tmp_path_factory.mktemp("clean")
    return write_report(write_records(folder / "results.jsonl", records))


def csv(report, name: str) -> pd.DataFrame:
    return pd.read_csv(report.markdown.parent / "tables" / f"{name}.csv")


def figure_stems(report) -> set[str]:
    return {f.stem for f in report.figures}


def figure_svg(report, stem: str) -> str:
    return (report.markdown.parent / "figures" / f"{stem}.svg").read_text()


def data_quality(report) -> str:
    markdown = report.markdown.read_text()
    return markdown.split("\n## Data quality", 1)[1].split("\n## ", 1)[0]


def test_failed_and_timed_out_runs_and_a_cut_line_are_reported_and_left_out(
    records, clean_report, tmp_path
):
    bad = [
        report_records.as_failed(records[0], "failed", "crash"),
        report_records.as_failed(records[2], "timeout", "hang"),
    ]
    path = write_records(
        tmp_path / "study" / "results.jsonl", records + bad, tail='{"schema": "archb'
    )
    report = write_report(path.parent)
    markdown = report.markdown.read_text()
    assert "2 of 14 runs did not finish (1 failed, 1 timeout)" in markdown
    assert "1 line(s) were not complete JSON records" in markdown
    failed = csv(report, "failed_runs")
    assert set(failed["run"]) == {r["run_id"] for r in bad}
    assert set(failed["status"]) == {"failed", "timeout"}
    assert failed["error"].str.contains("rank 1 exited").all()
    # The failed runs change no number: the speed-ups are those of the 12 finished runs.
    pd.testing.assert_frame_equal(csv(report, "scaling"), csv(clean_report, "scaling"))
    assert figure_stems(report) == figure_stems(clean_report)
    assert not any("internal error" in line for line in report.skipped)


def test_records_of_an_older_schema_still_give_a_report(records, clean_report, tmp_path):
    older = copy.deepcopy(records)
    for record in older:
        # Fields an older writer did not have: the report falls back or reads them off the curve
        # (the reader's migration to the current schema fills them from what the record has).
        record["schema"] = "archbench.run/2"
        del record["timing"]["exposed_comm_s"]
        del record["result"]["time_to_target_s"]
        record.pop("comm")
        record.pop("env")
        del record["cluster"]["num_workers"]
    report = write_report(write_records(tmp_path / "old" / "results.jsonl", older))
    markdown = report.markdown.read_text()
    assert "lack `timing.exposed_comm_s`" in markdown
    assert "lack `cluster.num_workers`" in markdown
    assert "timing.comm_s_median" in markdown  # the time split says what stands in
    assert "load average" not in markdown  # no machine load recorded: nothing to judge
    assert {"throughput_scaling", "time_split", "time_to_accuracy", "transfer"} <= figure_stems(
        report
    )
    # Workers counted from the roles; time to target read off the evaluation curve.
    scaling = csv(report, "scaling")
    assert set(scaling.loc[scaling["arch"] == "ring", "workers"]) == {2}
    derived = csv(report, "time_to_target")
    original = csv(clean_report, "time_to_target")
    np.testing.assert_allclose(
        derived["time_to_target_s"], original["time_to_target_s"], rtol=1e-5, equal_nan=True
    )


def test_records_without_curves_or_time_split_skip_those_figures_and_say_why(records, tmp_path):
    older = copy.deepcopy(records)
    for record in older:
        for field in ("epochs", "compute_s_median", "comm_s_median", "exposed_comm_s"):
            record["timing"].pop(field)
    report = write_report(write_records(tmp_path / "bare" / "results.jsonl", older))
    stems = figure_stems(report)
    assert "time_split" not in stems and "time_to_accuracy" not in stems
    assert {"throughput_scaling", "transfer", "effect_ranking"} <= stems
    skipped = "\n".join(report.skipped)
    assert "no successful run recorded both compute and communication times" in skipped
    assert "per-evaluation points" in skipped


def test_a_single_repetition_gets_each_runs_own_step_spread_as_bars(records, tmp_path):
    once = [r for r in records if r["config"]["seed"] == 1]
    report = write_report(write_records(tmp_path / "once" / "results.jsonl", once))
    assert "single repetition" in report.markdown.read_text()
    table = csv(report, "scaling")
    assert table["samples_per_s_std"].isna().all() and (table["n"] == 1).all()
    assert len(table) == len(once)
    # Computed here from each run's own record: samples per step over its p90 and p10 step.
    by_config = {report_records.key(r): r for r in once}
    throughput, slow, fast = [], [], []
    for _, row in table.iterrows():
        record = by_config[(row["workload"], row["arch"], int(row["batch_size"]))]
        samples_per_step = record["config"]["global_batch_size"]
        throughput.append(record["timing"]["samples_per_s"])
        slow.append(samples_per_step / record["timing"]["step_s_p90"])
        fast.append(samples_per_step / record["timing"]["step_s_p10"])
    np.testing.assert_allclose(table["samples_per_s"], throughput, rtol=1e-12)
    np.testing.assert_allclose(table["within_run_low"], slow, rtol=1e-12)
    np.testing.assert_allclose(table["within_run_high"], fast, rtol=1e-12)
    # The figure draws those bars, asymmetric around the median-step throughput.
    bars = scaling.throughput_bars(table)
    np.testing.assert_allclose(bars[0], np.subtract(throughput, slow), rtol=1e-9)
    np.testing.assert_allclose(bars[1], np.subtract(fast, throughput), rtol=1e-9)
    assert (bars > 0).any()
    svg = figure_svg(report, "throughput_scaling")
    assert plotting.WITHIN_RUN_BARS in svg and "std over repetitions" not in svg
    assert "transfer" in figure_stems(report)
    assert not any("internal error" in line for line in report.skipped)


def test_repetitions_keep_their_spread_over_repetitions_as_bars(clean_report):
    table = csv(clean_report, "scaling")
    assert (table["n"] == 2).all() and table["within_run_low"].isna().all()
    bars = scaling.throughput_bars(table)
    np.testing.assert_allclose(bars, [table["samples_per_s_std"]] * 2, rtol=1e-12)
    svg = figure_svg(clean_report, "throughput_scaling")
    assert "std over repetitions" in svg and plotting.WITHIN_RUN_BARS not in svg


def test_runs_on_a_busy_machine_are_named_under_data_quality(records, tmp_path):
    once = copy.deepcopy([r for r in records if r["config"]["seed"] == 1])
    for record in once:
        # The real records' own cores; their loads set to those of an idle machine ...
        record["env"]["load_avg_start"] = record["env"]["load_avg_end"] = 0.0
    # ... except one run, whose load at the end of training was above its cores.
    busy = once[4]
    cores = busy["env"]["cores"]
    busy["env"]["load_avg_end"] = cores + 1.5
    report = write_report(write_records(tmp_path / "busy" / "results.jsonl", once))
    quality = data_quality(report)
    assert f"1 of {len(once)} runs with a recorded machine load" in quality
    assert f"`{busy['run_id']}`" in quality
    assert f"load 0.00 at start, {cores + 1.5:.2f} at end, on {cores} cores" in quality
    assert not any(r["run_id"] in quality for r in once if r is not busy)

    busy["env"]["load_avg_end"] = float(cores)  # at the core count, nobody waits
    calm = write_report(write_records(tmp_path / "calm" / "results.jsonl", once))
    assert "load average" not in data_quality(calm)


def test_a_study_whose_runs_all_failed_still_reports_what_happened(records, tmp_path):
    dead = [report_records.as_failed(r, "failed", "x") for r in records[:3]]
    report = write_report(write_records(tmp_path / "dead" / "results.jsonl", dead))
    markdown = report.markdown.read_text()
    assert "3 of 3 runs did not finish (3 failed)" in markdown
    assert report.figures == []
    assert len(report.skipped) >= 5


def test_factors_listed_by_the_sweep_give_the_same_tables(records, clean_report, tmp_path):
    listed = copy.deepcopy(records)
    for record in listed:
        config = record["config"]
        factors = {
            "arch": config["arch"],
            "model": config["model"],
            "batch_size": config["batch_size"],
        }
        if config["arch"] == "ring":
            factors["workers"] = 2  # only multi-process runs list their workers
        record["sweep"] = {"factors": factors, "repetition": config["seed"]}
    inferred = clean_report
    declared = write_report(write_records(tmp_path / "b" / "results.jsonl", listed))
    assert "as the records list them" in declared.markdown.read_text()
    a, b = csv(inferred, "transfer"), csv(declared, "transfer")
    for column in ("pearson_r", "spearman_rho", "top_overlap", "a_best_slowdown_in_b"):
        assert a.at[0, column] == pytest.approx(b.at[0, column], rel=1e-12)
    np.testing.assert_allclose(
        csv(inferred, "scaling")["speedup"], csv(declared, "scaling")["speedup"], rtol=1e-12
    )


def _report_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "report", *args],
        cwd=REPO,
        env=launch_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bad_input_gets_one_line_exit_2_and_nothing_written(tmp_path):
    missing = _report_command(str(tmp_path / "nope"), "--out", str(tmp_path / "out1"))
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "no such file or folder" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("\n")
    no_records = _report_command(str(empty))
    assert no_records.returncode == 2 and "no run records" in no_records.stderr
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    bad_out = _report_command(str(empty), "--out", str(a_file))
    assert bad_out.returncode == 2 and "is not a folder" in bad_out.stderr
    assert not (tmp_path / "out1").exists() and not (empty / "report").exists()


def test_measurements_that_cannot_be_are_named_and_left_out(tmp_path):
    """NaN step time, infinite throughput and a negative epoch: Data quality names each run and
    field, and no table holds the value."""
    odd = {"samples_per_s": float("inf"), "step_s_median": float("nan"), "epoch_s": -3.0}
    records = [
        minimal_record(f"odd{index}", 0.01 * (index + 1), **{field: value})
        for index, (field, value) in enumerate(odd.items())
    ]
    report = write_report(write_records(tmp_path / "results.jsonl", records))
    quality = data_quality(report)
    assert "odd0: timing.samples_per_s infinite" in quality
    assert "odd1: timing.step_s_median NaN" in quality
    assert "odd2: timing.epoch_s negative (-3)" in quality
    tables = " ".join(p.read_text() for p in (report.markdown.parent / "tables").glob("*.csv"))
    assert not re.search(r"\binf\b|-3\.0\b|\bnan\b", tables, re.IGNORECASE), tables


def test_accuracies_beyond_a_share_and_records_of_the_wrong_shape_are_left_out(tmp_path):
    """Issue 49: an accuracy of inf or -1e300 is no share (0..1), and `config: "notadict"` is no
    run record: Data quality names each, and the report never shows inf% or nan for them."""
    records = [minimal_record(f"acc{index}", 0.01 * (index + 1)) for index in range(3)]
    records[0]["result"] = {"test_accuracy": float("inf")}
    records[1]["result"] = {"test_accuracy": -1e300}
    records[2]["config"] = "notadict"
    report = write_report(write_records(tmp_path / "results.jsonl", records))
    quality = data_quality(report)
    assert "acc0: result.test_accuracy infinite" in quality
    assert "acc1: result.test_accuracy negative (-1e+300)" in quality
    assert "acc2: config is str, not an object" in quality
    tables = " ".join(p.read_text() for p in (report.markdown.parent / "tables").glob("*.csv"))
    # the notes name the values left out; nothing else shows them
    text = report.markdown.read_text().replace(quality, "") + tables
    assert not re.search(r"\binf%|\bnan\b|-1e\+?300", text, re.IGNORECASE), text
