"""Records that are never lost or half-written, runs that diverge, synthetic data made per batch."""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from cluster_fixture import launcher_env
from conftest import REPO, launcher_prefix, run_train
from record_files import read_records

TINY = ["--arch", "single", "--model", "mlp", "--steps", "6", "--eval-samples", "100"]


def test_a_torn_last_line_is_cut_before_the_next_record(tmp_path):
    out = tmp_path / "r.jsonl"
    proc, _ = run_train(TINY, out=out)
    assert proc.returncode == 0, proc.stderr
    whole = out.read_bytes()
    out.write_bytes(whole + whole[: len(whole) // 2])  # a writer died half-way through a line
    proc, _ = run_train(TINY, out=out)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith(b"\n") for line in lines)
    assert all(record["status"] == "ok" for record in read_records(out))


def _limit_file_size(limit: int):
    def limit_it() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_it


def test_a_record_that_does_not_fit_leaves_the_file_as_it_was(tmp_path):
    out = tmp_path / "r.jsonl"
    run_train(TINY, out=out)
    before = out.read_bytes()
    # Room for the up-front check's probe, not for a second record: the disk fills up mid-run.
    limit = len(before) + 1000
    assert limit > 4096
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.train", *TINY, "--out", str(out)],
        cwd=REPO,
        env=launcher_env(),
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size(limit),
        timeout=300,
    )
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "could not be written" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and "appended" not in proc.stdout
    assert out.read_bytes() == before


def test_a_diverging_run_fails_as_diverged_with_its_step(tmp_path):
    out = tmp_path / "r.jsonl"
    args = ["--model", "charlm", "--dataset", "text", "--seq-len", "16", "--lr", "1e6"]
    proc, records = run_train([*args, "--steps", "20", "--eval-samples", "50"], out=out)
    assert proc.returncode == 1
    (record,) = records
    assert record["status"] == "failed"
    assert record["error"]["type"] == "Diverged"
    assert 1 <= record["error"]["step"] <= 20
    assert f"at step {record['error']['step']}" in record["error"]["message"]


def test_an_argument_error_under_mpirun_is_said_once(tmp_path):
    for bad in (["--batch-size", "0"], ["--arch", "butterfly"]):
        command = [*launcher_prefix("mpirun", 2), sys.executable, "-m", "archbench.train", *bad]
        proc = subprocess.run(
            command, cwd=REPO, env=launcher_env(), capture_output=True, text=True, timeout=120
        )
        said = [line for line in proc.stderr.splitlines() if "archbench train: error" in line]
        assert len(said) == 1, proc.stderr


def test_synthetic_batches_are_made_per_step_and_rank():
    import tensorflow as tf

    from archbench.workloads.data import BatchPlan, SyntheticData, test_batches, train_batches

    data = SyntheticData((8, 8, 3), 10, 64, seed=3)
    plan = BatchPlan(data.train_size, 4, 2, seed=3)
    first = [[b for b in train_batches(data, plan, 0, worker)] for worker in (0, 1)]
    again = list(train_batches(data, plan, 0, 1))
    assert len(first[0]) == plan.steps_per_epoch == 8
    np.testing.assert_array_equal(first[1][5][0], again[5][0])  # the same step, the same batch
    assert not np.array_equal(first[0][5][0], first[1][5][0])  # another rank, another batch
    assert not np.array_equal(first[0][4][0], first[0][5][0])  # another step, another batch
    resumed = list(train_batches(data, plan, 0, 1, first_step=5))
    np.testing.assert_array_equal(resumed[0][1], first[1][5][1])
    x, y = first[0][0]
    assert x.dtype == tf.float32 and x.shape == (4, 8, 8, 3)
    assert int(tf.reduce_min(y)) >= 0 and int(tf.reduce_max(y)) < 10
    tests = [list(test_batches(data, 0, 4)) for _ in range(2)]
    assert sum(len(b[1]) for b in tests[0]) == data.test_size == 8
    np.testing.assert_array_equal(tests[0][1][0], tests[1][1][0])
    assert data.x_train.nbytes == 0  # nothing held


def test_a_synthetic_run_records_startup_and_warmup_and_skips_evaluation(tmp_path):
    out = tmp_path / "r.jsonl"
    args = ["--model", "mlp", "--dataset", "synthetic", "--synthetic-shape", "8x8x3"]
    proc, records = run_train([*args, "--steps", "8", "--warmup-steps", "2"], out=out)
    assert proc.returncode == 0, proc.stderr
    (record,) = records
    timing = record["timing"]
    assert timing["startup_s"] > 0 and timing["warmup_s"] > 0 and timing["eval_s"] == 0
    assert timing["wall_s"] >= timing["startup_s"] + timing["warmup_s"] + timing["train_s"]
    assert record["result"]["test_accuracy"] is None
    assert record["config"]["dataset_source"].startswith("generated per batch")
    assert record["env"]["packages"]["numpy"] == np.__version__
    asked, _ = run_train([*args, "--steps", "6", "--eval-samples", "16"], out=tmp_path / "e.jsonl")
    assert asked.returncode == 0
    (record,) = read_records(tmp_path / "e.jsonl")
    assert record["result"]["test_accuracy"] is not None


def _sweep(
    spec: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec), *extra],
        cwd=REPO,
        env=launcher_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _chattr_works(folder: Path) -> bool:
    probe = folder / "chattr-probe"
    probe.write_text("")
    works = (
        shutil.which("chattr") is not None
        and subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    )
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    probe.unlink()
    return works


def test_results_made_unwritable_mid_sweep_stop_it_with_one_line_and_it_resumes(tmp_path):
    if not _chattr_works(tmp_path):
        pytest.skip("needs chattr +i (root on a file system that supports it)")
    results = tmp_path / "io" / "results.jsonl"
    # The second run, as it starts, makes results.jsonl immutable, as a user might mid-sweep: a
    # sitecustomize on the sweep's PYTHONPATH (which its runs inherit), since a spec's python:
    # must be a real interpreter, not a wrapper script.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""\
            import pathlib, subprocess
            results = pathlib.Path({str(results)!r})
            if b"archbench.train" in pathlib.Path("/proc/self/cmdline").read_bytes():
                if results.exists() and results.stat().st_size:
                    subprocess.run(["chattr", "+i", str(results)])
            """
        )
    )
    spec = tmp_path / "io.yaml"
    # One launch per run (warm: false): the hook acts when the second run's launch starts.
    spec.write_text(
        "order: design\ncluster: localhost\nwarm: false\n"
        "fixed: {arch: single, model: mlp, steps: 6, eval_samples: 50}\n"
        "factors: {lr: [0.1, 0.2]}\n"
    )
    try:
        stopped = _sweep(spec, env={"PYTHONPATH": f"{hook}:{REPO}"})
        immutable_line = [line for line in stopped.stderr.splitlines() if "error:" in line]
        assert stopped.returncode == 1, stopped.stderr
        assert "Traceback" not in stopped.stderr
        assert len(immutable_line) == 1 and str(results) in immutable_line[0]
        assert "chattr -i" in immutable_line[0] and "1 finished record" in immutable_line[0]
        assert len(results.read_text().splitlines()) == 1
    finally:
        subprocess.run(["chattr", "-i", str(results)], capture_output=True)
    resumed = _sweep(spec)
    assert resumed.returncode == 0, resumed.stderr
    assert "recorded 1 run(s) that an interrupted sweep had finished" in resumed.stderr
    lines = results.read_text().splitlines()
    assert len(lines) == 2 and len({record["run_id"] for record in read_records(results)}) == 2


def test_a_sweep_refuses_a_python_that_is_not_there(tmp_path):
    spec = tmp_path / "py.yaml"
    spec.write_text("python: /nonexistent/python\ncluster: localhost\nfixed: {steps: 6}\n")
    proc = _sweep(spec)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"archbench sweep: error: {spec}: python: /nonexistent/python does not exist; "
        "set python: to a Python with archbench"
    )
    assert not (tmp_path / "py").exists()
