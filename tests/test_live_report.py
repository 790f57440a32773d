"""The report while a study runs (refreshed by the sweep, whole records only), the progress
line's wall split, and the report's corners on a real study's records (issue 52, parts 2-4)."""

from __future__ import annotations

import copy
import io
import json
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from record_files import read_records

from archbench.analysis.accuracy import DEFAULT_TARGET_RULE, DEFAULT_TARGET_SHARE
from archbench.analysis.accuracy import build as build_accuracy
from archbench.analysis.load import load_study
from archbench.analysis.timesplit import timesplit_table
from archbench.analysis.tradeoff import tradeoff_table
from archbench.common.study_state import records_settled
from archbench.record import missing_keys, read_lines
from archbench.sweep.progress import Progress

REPO = Path(__file__).resolve().parents[1]
HOLDS = re.compile(r"This report holds (\d+) of (\d+) runs([^*]*)")

# Two repetitions, blocked, of two tiny single-process configurations: the sweep refreshes the
# report after the first block (the period is too long to trigger) and once at the end.
STUDY = """\
study: live
seed: 3
repetitions: 2
order: blocked
report_every_s: 3600
timeout_s: 180
cluster: {kind: localhost, slots: 2}
fixed:
  arch: single
  model: mlp
  dataset: fashion_mnist
  steps: 20
  batch_size: 32
  eval_samples: 500
  eval_every: 10
factors:
  lr: [0.02, 0.05]
design: full_factorial
"""


@pytest.fixture(scope="module")
def live_study(tmp_path_factory) -> dict:
    """Runs the study while a reader watches its folder; what the reader saw, and the folder."""
    folder = tmp_path_factory.mktemp("live")
    spec = folder / "live.yaml"
    spec.write_text(textwrap.dedent(STUDY))
    study = folder / "live"
    seen: dict = {"holds": [], "reloading": [], "reads": 0, "bad": [], "incomplete": []}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            results = study / "results.jsonl"
            if results.exists():
                with records_settled(study):
                    lines = read_lines(results)
                seen["reads"] += 1
                seen["bad"] += lines.bad
                seen["incomplete"] += [r["run_id"] for r in lines.records if missing_keys(r)]
            for page, key in ((study / "report" / "report.md", "holds"),):
                text = page.read_text() if page.exists() else ""
                match = HOLDS.search(text)
                if match and (not seen[key] or seen[key][-1] != match.groups()):
                    seen[key].append(match.groups())
            html = study / "report" / "report.html"
            if html.exists():
                text = html.read_text()
                match = HOLDS.search(text.replace("<strong>", "**").replace("</strong>", "**"))
                if match:
                    seen["reloading"].append((match.group(1), 'http-equiv="refresh"' in text))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    stop.set()
    watcher.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen["stderr"] = proc.stderr
    seen["folder"] = study
    return seen


def test_the_sweep_refreshes_the_report_while_the_study_runs(live_study):
    holds = live_study["holds"]
    # after the first block: half the runs, said to be a snapshot; at the end: all of them
    assert holds[0][:2] == ("2", "4") and "still running" in holds[0][2]
    assert holds[-1][:2] == ("4", "4") and "complete" in holds[-1][2]
    assert live_study["stderr"].count("report refreshed:") == 2
    # the page reloads itself only while the study is incomplete
    assert ("2", True) in live_study["reloading"]
    final = (live_study["folder"] / "report" / "report.html").read_text()
    assert "4 of 4 runs" in final and 'http-equiv="refresh"' not in final


def test_records_read_during_the_sweep_are_whole(live_study):
    assert live_study["reads"] > 0
    assert live_study["bad"] == [] and live_study["incomplete"] == []


def test_the_sweep_ends_with_its_wall_split(live_study):
    last = [line for line in live_study["stderr"].splitlines() if line.startswith("wall ")]
    assert len(last) == 1
    seconds = dict(re.findall(r"(?:: |, )([a-z -]+?) (\d+) s", last[0]))
    assert {"training", "start-up", "evaluation", "measurement"} <= set(seconds)
    assert int(seconds["start-up"]) > 0  # the launch imported TensorFlow: real seconds


def test_the_wall_split_sums_the_records_phases():
    clock = iter([0.0, 10.0, 100.0]).__next__  # made, first run ends, closed
    stream = io.StringIO()
    progress = Progress(2, stream=stream, tty=False, clock=clock)
    progress.finish("a", "ok", 10.0)
    assert "ETA 10s" in stream.getvalue()  # 10 s of wall per finished run, one left
    progress.finish("b", "ok", 30.0)
    phases = {"imports": 5.0, "train": 20.0, "evaluation": 3.0, "probe_windows": 2.0}
    records = [{"launch": {"phases_s": phases}}, {"launch": {"phases_s": {"train": 10.0}}}]
    progress.close(records)
    assert stream.getvalue().splitlines()[-1] == (
        "wall 1m40s: training 30 s, start-up 5 s, evaluation 3 s, measurement 2 s, "
        "other in runs 0 s, launches, cluster and reports 60 s"
    )


def test_no_target_in_the_records_gives_the_labelled_default(live_study, tmp_path):
    study = load_study(live_study["folder"])
    assert study.ok["target_accuracy"].isna().all()  # the runs named none
    section = build_accuracy(study, tmp_path)
    table = section.tables[0].frame
    target = DEFAULT_TARGET_SHARE * study.ok["test_accuracy"].max()
    assert table["target_accuracy"].tolist() == pytest.approx([target] * len(table))
    assert set(table["target_rule"]) == {DEFAULT_TARGET_RULE}
    assert table["time_to_target_s"].notna().any()  # measured, from the evaluations
    assert any(DEFAULT_TARGET_RULE in line for line in section.findings)
    assert not any("no time to target could be measured" in note for note in section.notes)


def test_partitioning_shows_only_where_it_ran(live_study, tmp_path):
    ok = [r for r in read_records(live_study["folder"] / "results.jsonl") if r["status"] == "ok"]
    # as a distributed run records it: the global shuffle (the default) timed at a microsecond
    for record in ok:
        record["comm"]["partition"] = {"data_partition": "random", "data_partition_s": 1.67e-7}
    partitioned = copy.deepcopy(ok[0])
    partitioned["run_id"] += "-contiguous"
    partitioned["config"]["data_partition"] = "contiguous"
    partitioned["comm"]["partition"]["data_partition_s"] = 0.25
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ok))
    assert tradeoff_table(load_study(path))["partition_s"].isna().all()
    path.write_text("".join(json.dumps(r) + "\n" for r in [*ok, partitioned]))
    assert tradeoff_table(load_study(path))["partition_s"].dropna().tolist() == [0.25]


def test_a_single_runs_step_beyond_compute_is_update_and_host_time(live_study):
    table = timesplit_table(load_study(live_study["folder"]))
    assert (table["arch"] == "single").all()
    assert table["exposed_comm_s"].isna().all() and table["comm_share"].isna().all()
    assert table["update_host_s"].notna().all()
