"""`archbench train` as a user types it: bad input, records, plain-process ring."""

from __future__ import annotations

import os

import pytest

from archbench.record import missing_keys

BAD_INPUT = [
    (["--model", "nosuchnet"], "unknown model"),
    (["--arch", "butterfly"], "--arch"),
    (["--dataset", "imagenet"], "--dataset"),
    (["--batch-size", "0"], "--batch-size must be positive"),
    (["--steps", "0"], "--steps must be positive"),
    (["--steps", "-3"], "--steps must be positive"),
    (["--dataset", "mnist", "--data-dir", "/nonexistent/archbench"], "train-images-idx3-ubyte"),
    (["--dataset", "cifar10"], "--data-dir"),
    (["--model", "charlm"], "charlm"),
    (["--arch", "ps", "--num-ps", "0"], "--num-ps must be >= 1"),
    (["--arch", "ps", "--sync", "--async"], "--async"),
    (["--arch", "ps", "--num-ps", "1"], "--num-ps 1 needs at least 2 processes"),
]


@pytest.mark.parametrize("args,expected", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_written(train, tmp_path, args, expected):
    out = tmp_path / "r.jsonl"
    proc, records = train([*args, "--steps", "6"] if "--steps" not in args else args, out=out)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("out", ["/nonexistent-folder/r.jsonl", "/proc/version", "DIR"])
def test_unwritable_out_is_refused_before_training(train, tmp_path, out):
    target = str(tmp_path) if out == "DIR" else out
    proc, _ = train(["--steps", "6", "--out", target])
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--out" in proc.stderr


def test_single_run_writes_a_complete_record(train, tmp_path):
    out = tmp_path / "r.jsonl"
    proc, records = train(
        [
            "--arch",
            "single",
            "--model",
            "mlp",
            "--steps",
            "60",
            "--eval-every",
            "30",
            "--target-accuracy",
            "0.5",
            "--run-id",
            "abc",
            "--study",
            "s1",
        ],
        out=out,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(records) == 1
    record = records[0]
    assert missing_keys(record) == []
    assert record["status"] == "ok" and record["run_id"] == "abc" and record["study"] == "s1"
    assert record["config"]["steps_run"] == 60 and record["cluster"]["roles"] == ["chief"]
    assert record["model_stats"]["params"] == 784 * 128 + 128 + 128 * 10 + 10
    assert record["model_stats"]["param_bytes"] == 4 * record["model_stats"]["params"]
    assert [point["step"] for point in record["timing"]["epochs"]] == [30, 60]
    timing = record["timing"]
    assert timing["timed_steps"] + timing["probe_steps"] + 5 == 60
    assert 0 < timing["compute_s_median"] and 0 < timing["step_s_median"] <= timing["step_s_p90"]
    assert record["comm"]["bytes_sent_per_step"] == 0
    assert record["result"]["test_accuracy"] > 0.5
    assert record["result"]["time_to_target_s"] is not None
    assert "epoch 0 step 60/60" in proc.stdout
    # The machine's load around training: a plain process inherits this process's cores.
    env = record["env"]
    assert env["cores"] == len(os.sched_getaffinity(0))
    for key in ("load_avg_start", "load_avg_end"):
        load = env[key]
        assert isinstance(load, float) and 0.0 <= load < 50 * os.cpu_count(), (key, load)


@pytest.mark.parametrize("window_ms", [None, 0, 40])
def test_probe_compute_window_repeats_the_compute_phase(train, tmp_path, window_ms):
    from archbench.runtime.cgroupread import process_budget

    args = ["--arch", "single", "--model", "mlp", "--steps", "30", "--probe-every", "5"]
    if window_ms is not None:
        args += ["--compute-window-ms", str(window_ms)]
    proc, records = train(args, out=tmp_path / "r.jsonl")
    assert proc.returncode == 0, proc.stderr
    timing = records[0]["timing"]
    if window_ms is None:  # ten CFS periods under a CPU quota, else one pass
        budget = process_budget()
        expected = 10 * budget.period_us / 1e6 if budget is not None else 0.0
    else:
        expected = window_ms / 1000
    assert timing["compute_window_s"] == pytest.approx(expected)
    # an mlp pass takes well under 20 ms on any machine, so a 40 ms window needs several
    if expected == 0:
        assert timing["compute_passes_median"] == 1
    elif expected >= 0.04:
        assert timing["compute_passes_median"] >= 2


def test_ring_as_a_plain_process_runs_as_one_worker(train, tmp_path):
    out = tmp_path / "r.jsonl"
    proc, records = train(["--arch", "ring", "--steps", "20"], out=out)
    assert proc.returncode == 0, proc.stderr
    assert "running as 1 worker" in proc.stderr
    assert records[0]["cluster"]["num_workers"] == 1 and records[0]["cluster"]["launcher"] == "none"


def test_text_workload_trains_charlm(train, tmp_path):
    out = tmp_path / "r.jsonl"
    proc, records = train(
        ["--model", "charlm", "--dataset", "text", "--steps", "30", "--eval-samples", "500"],
        out=out,
    )
    assert proc.returncode == 0, proc.stderr
    record = records[0]
    assert record["config"]["dataset"] == "text" and record["model_stats"]["params"] > 256 * 64
    assert 0 <= record["result"]["test_accuracy"] <= 1
