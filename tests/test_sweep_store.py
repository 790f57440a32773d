"""results.jsonl: one record per run id, half-written lines ignored and cut, retries replace."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from archbench.common.errors import UsageError
from archbench.sweep.store import ResultStore, StudyLock


def record(run_id: str, status: str = "ok", **extra) -> dict:
    return {"run_id": run_id, "status": status, **extra}


def lines(store: ResultStore) -> list[dict]:
    return [json.loads(line) for line in store.path.read_text().splitlines()]


def test_records_are_appended_once_per_run_id(tmp_path):
    store = ResultStore(tmp_path / "study")
    assert store.load() == {}
    assert store.add(record("a"))
    assert store.add(record("b", "failed"))
    assert not store.add(record("a", note="second copy"))  # an ok record is never written twice
    assert [r["run_id"] for r in lines(store)] == ["a", "b"]
    assert "note" not in lines(store)[0]
    assert set(ResultStore(tmp_path / "study").load()) == {"a", "b"}


def test_a_retried_run_replaces_its_failed_record(tmp_path):
    store = ResultStore(tmp_path)
    store.add(record("a"))
    store.add(record("b", "timeout"))
    store.add(record("c"))
    assert store.add(record("b", "ok", attempt=2))
    assert [(r["run_id"], r["status"]) for r in lines(store)] == [
        ("a", "ok"),
        ("c", "ok"),
        ("b", "ok"),
    ]
    assert not list(tmp_path.glob(".results.jsonl.*.tmp"))


def test_a_half_written_last_line_is_ignored_then_cut_off(tmp_path, capsys):
    store = ResultStore(tmp_path)
    store.add(record("a"))
    store.add(record("b"))
    whole = store.path.read_bytes()
    store.path.write_bytes(whole + b'{"run_id": "c", "status": "o')  # the driver died mid-write
    assert set(ResultStore(tmp_path).load(repair=False)) == {"a", "b"}
    assert store.path.read_bytes().endswith(b'"o')  # reading alone changes nothing
    assert set(store.load()) == {"a", "b"}
    assert store.path.read_bytes() == whole
    assert "half-written last line" in capsys.readouterr().err
    store.add(record("c"))
    assert [r["run_id"] for r in lines(store)] == ["a", "b", "c"]


def test_a_partial_line_is_cut_before_an_append_even_without_a_load(tmp_path):
    store = ResultStore(tmp_path)
    store.add(record("a"))
    with open(store.path, "ab") as handle:
        handle.write(b'{"run_id": "b"')
    ResultStore(tmp_path).add(record("c"))
    assert [r["run_id"] for r in lines(store)] == ["a", "c"]


def test_a_corrupt_middle_line_is_skipped_but_kept(tmp_path):
    store = ResultStore(tmp_path)
    store.path.write_text(
        '{"run_id": "a", "status": "ok"}\nnot json\n{"run_id": "b", "status": "ok"}\n'
    )
    assert set(store.load()) == {"a", "b"}
    assert store.skipped_lines == 1
    assert "not json" in store.path.read_text()


def test_one_driver_per_study(tmp_path):
    with StudyLock(tmp_path):
        # another process (a second driver) is refused with one clear line
        probe = (
            "import sys; from archbench.sweep.store import StudyLock\n"
            "from archbench.common.errors import UsageError\n"
            f"try:\n    StudyLock({str(tmp_path)!r}).__enter__()\n"
            "except UsageError as e:\n    print(e); sys.exit(2)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2
        assert "already being run" in proc.stdout
    with StudyLock(tmp_path):  # released on exit
        pass


def test_the_lock_names_the_holder(tmp_path):
    with StudyLock(tmp_path):
        with pytest.raises(UsageError, match="already being run"):
            StudyLock(tmp_path).__enter__()
