"""The run record has one reader: records written by schema 1 (checked in, made by the code before
the record had an owner) load, migrate and answer every accessor as a record written now does."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.record import SCHEMA, RunRecord, placement_of, read_lines
from archbench.runtime.settings import SETTINGS

DATA = Path(__file__).parent / "data"
OLD = DATA / "records-schema1.jsonl"
ACCESSORS = (
    "arch", "ok", "workers", "servers", "world_size", "placement", "sync_mode", "is_sync",
    "link", "link_bits", "roles", "factors", "emulated",
)  # fmt: skip
# settings that name the run or its files, not the configuration
NAMING = {"out", "run_id", "study"}


def accessor_values(record: dict) -> dict:
    view = RunRecord(record)
    values = {name: getattr(view, name) for name in ACCESSORS}
    values["hosts_distinct"] = len(set(view.hosts or []))
    values["settings"] = {k: v for k, v in view.settings.items() if k not in NAMING}
    return values


def test_old_records_load_and_migrate_and_a_cut_line_is_skipped(tmp_path):
    copy = tmp_path / "results.jsonl"
    text = OLD.read_text()
    copy.write_text(text + text.splitlines()[0][:100])  # a line cut by a crash
    lines = read_lines(copy)
    assert len(lines.records) == 6 and lines.bad == ["results.jsonl:7"]
    for record in lines.records:
        assert record["schema"] == SCHEMA and record["migrated_from"] == "archbench.run/1"
        assert record["config"]["sync"] in ("sync", "async")
    by_id = {r["run_id"]: RunRecord(r) for r in lines.records}
    assert by_id["old-ps-1"].placement == "colocated"  # every rank on one host
    assert by_id["old-ps-1"].workers == 2 and by_id["old-ps-1"].servers == 1
    assert by_id["old-ring-1"].placement is None and by_id["old-ring-1"].servers == 0
    assert by_id["ps-e8a5133212-r1"].sync_mode == "async"
    assert by_id["single-64fe6514de-r1"].workers == 1
    # written before records carried them: one epoch of Fashion-MNIST at the median step's rate
    for record in lines.records:
        timing = record["timing"]
        assert timing["samples_per_epoch"] == 60000
        assert timing["epoch_s"] == pytest.approx(60000 / timing["samples_per_s"], rel=1e-12)


def test_a_version_2_record_that_lacks_epoch_s_gets_it_on_read_and_a_failed_one_does_not(
    tmp_path,
):
    (record,) = [r for r in read_lines(OLD).records if r["run_id"] == "old-ring-1"]
    current = copy.deepcopy(record)
    current["schema"] = "archbench.run/2"
    del current["migrated_from"], current["timing"]["epoch_s"]
    current["timing"]["samples_per_epoch"] = 1000  # what the run trained on, when it says so
    failed = {**copy.deepcopy(current), "status": "failed", "timing": {"wall_s": 2.0}}
    synthetic = copy.deepcopy(current)
    synthetic["config"].update(dataset="synthetic", synthetic_samples=512)
    del synthetic["timing"]["samples_per_epoch"]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (current, failed, synthetic)))
    read = read_lines(path).records
    rate = current["timing"]["samples_per_s"]
    assert read[0]["timing"]["epoch_s"] == pytest.approx(1000 / rate)
    assert read[0]["migrated_from"] == "archbench.run/2" and read[0]["schema"] == SCHEMA
    assert read[0]["derived"]["timing.epoch_s"] == "timing.samples_per_epoch / timing.samples_per_s"
    assert "epoch_s" not in read[1]["timing"]
    assert read[2]["timing"]["epoch_s"] == pytest.approx(512 / rate)
    assert read[2]["timing"]["samples_per_epoch"] == 512


def test_canonical_placement():
    assert placement_of(["a", "b", "c"], ["ps", "chief", "worker"]) == "dedicated"
    assert placement_of(["a", "a", "b"], ["ps", "chief", "worker"]) == "colocated"
    assert placement_of(["a", "b"], ["chief", "worker"]) == "spread"
    assert placement_of(["a", "a"], ["chief", "worker"]) is None
    assert placement_of(["a"], None) is None


@pytest.mark.timeout(600)
def test_the_same_study_run_now_gives_the_same_accessor_values(tmp_path):
    """The checked-in records are the study in data/schema1-study.yaml; run it again now: the
    same run ids (the plan did not change) and the same accessors' values."""
    spec = tmp_path / "schema1-study.yaml"
    shutil.copy(DATA / "schema1-study.yaml", spec)
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec), "--cluster", "localhost"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    new = {r["run_id"]: r for r in read_lines(tmp_path / "oldschema" / "results.jsonl").records}
    old = {r["run_id"]: r for r in read_lines(OLD).records if "sweep" in r}
    assert set(new) == set(old) and len(old) == 4
    for run_id, record in old.items():
        assert new[run_id]["schema"] == SCHEMA and "migrated_from" not in new[run_id]
        then, now = accessor_values(record), accessor_values(new[run_id])
        # Settings added to the registry since the old records were written appear only in new
        # records; every setting the old record has must read the same.
        added = set(now["settings"]) - set(then["settings"])
        assert added <= set(SETTINGS), (run_id, added)
        now["settings"] = {k: v for k, v in now["settings"].items() if k not in added}
        assert now == then, run_id
