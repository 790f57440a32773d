"""A user's own model and data in the performance model and the starter study.

- `archbench predict --model examples/transformer.py:build --dataset csv:...` prices that model
  built for that data as training reads it (a text column one-hot encoded): its gradient bytes
  are the model's own, and a parameter server's busiest shard is the one the PS trainer's planner
  gives that model's variables.
- A study's record of such a run, without a recorded shard plan, is priced with the same plan.
- `archbench init --model FILE.py:build --dataset csv:FILE` writes a spec `archbench sweep
  --dry-run` accepts, naming that model and data set; odd characters in their paths are quoted,
  never read as settings.
- A model file that does not exist and a data form archbench does not know are one line, exit
  status 2, nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from archbench.cli import main
from archbench.perfmodel.fit.records import observation_from_record
from archbench.perfmodel.model.modelinfo import USER_DATA_INPUTS
from archbench.ps.sharding import plan_for_model
from archbench.workloads.data import USER_DATA_SETTINGS, load_dataset
from archbench.workloads.models import build_model, parameter_stats

REPO = Path(__file__).resolve().parent.parent
TRANSFORMER = f"{REPO / 'examples' / 'transformer.py'}:build"
FASHION = ((28, 28, 1), 10)  # what the model would be priced at were the data not read


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> SimpleNamespace:
    """A table with a text feature (one-hot: 2 numeric + 3 colour columns) and four classes
    named by words, and an archive of 6x4 sequences in five classes."""
    where = tmp_path_factory.mktemp("user-data")
    rng = np.random.default_rng(0)
    rows = ["width,height,colour,kind"]
    for index in range(80):
        colour = ("red", "green", "blue")[index % 3]
        rows.append(f"{rng.normal():.4f},{rng.normal():.4f},{colour},k{index % 4}")
    table = where / "table.csv"
    table.write_text("\n".join(rows) + "\n")
    archive = where / "seqs.npz"
    np.savez(
        archive,
        x_train=rng.normal(size=(64, 6, 4)).astype(np.float32),
        y_train=rng.integers(0, 5, 64),
        x_test=rng.normal(size=(16, 6, 4)).astype(np.float32),
        y_test=rng.integers(0, 5, 16),
    )
    return SimpleNamespace(where=where, table=f"csv:{table}", archive=f"npz:{archive}")


def _built(dataset: str, **settings):
    """The user's model built for the data as training loads it, and that input shape."""
    loaded = load_dataset(SimpleNamespace(dataset=dataset, **settings))
    model = build_model(TRANSFORMER, loaded.input_shape, loaded.num_classes, seed=0)
    return model, loaded.input_shape


def _predict(capsys, *args: str) -> dict:
    argv = ["predict", "--model", TRANSFORMER, "--batch-size", "16", "--compute-ms", "5",
            "--bandwidth", "1gbit", "--json", *args]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_predict_prices_the_user_model_built_for_the_users_table(data, capsys) -> None:
    model, shape = _built(data.table, label_column="kind")
    assert shape == (5,)  # two numbers and the colour's three one-hot columns
    out = _predict(capsys, "--arch", "ring", "--workers", "2", "--dataset", data.table,
                   "--label-column", "kind")  # fmt: skip
    assert out["config"]["model"] == TRANSFORMER
    assert out["config"]["param_bytes"] == parameter_stats(model)["param_bytes"]
    # the data's own shape and classes, not the default image's
    default = parameter_stats(build_model(TRANSFORMER, *FASHION, seed=0))["param_bytes"]
    assert out["config"]["param_bytes"] != default


def test_predict_prices_the_servers_shards_of_the_user_models_variables(data, capsys) -> None:
    model, _ = _built(data.archive)
    plan = plan_for_model(model, 2, "balanced")
    held, variables = plan.bytes_per_server(), plan.variables_per_server()
    assert len(variables) == 2 and sum(variables) == len(model.trainable_variables)
    out = _predict(capsys, "--arch", "ps", "--workers", "2", "--num-ps", "2",
                   "--ps-sharding", "balanced", "--dataset", data.archive)  # fmt: skip
    terms = out["prediction"]["terms"]
    busiest = int(terms["busiest_ps"])
    assert held[busiest] == max(held)
    assert terms["busiest_ps_bytes"] == max(held)
    assert terms["busiest_ps_variables"] == variables[busiest]
    assert terms["mean_ps_bytes"] == pytest.approx(sum(held) / 2)
    assert out["config"]["param_bytes"] == sum(held)


def test_a_records_shard_plan_is_the_user_models_when_the_run_recorded_none(data) -> None:
    model, _ = _built(data.archive)
    record = {
        "schema": "archbench.run/1", "run_id": "u1", "study": "user", "status": "ok",
        "config": {"arch": "ps", "model": TRANSFORMER, "dataset": data.archive,
                   "batch_size": 16, "num_ps": 2, "sync": "sync", "ps_sharding": "round-robin",
                   "seed": 1},
        "cluster": {"world_size": 4, "num_workers": 2, "num_ps": 2,
                    "hosts": ["node1", "node2", "node3", "node4"],
                    "roles": ["ps", "ps", "chief", "worker"], "link": "1gbit"},
        "model_stats": {"param_bytes": parameter_stats(model)["param_bytes"]},
        "timing": {"step_s_median": 0.05, "compute_s_median": 0.01},
    }  # fmt: skip
    observation = observation_from_record(record)
    assert observation is not None and observation.config.model == TRANSFORMER
    expected = plan_for_model(model, 2, "round-robin")
    assert observation.config.ps_plan.bytes_per_server() == expected.bytes_per_server()
    assert observation.config.ps_plan.variables_per_server() == expected.variables_per_server()


def test_the_flags_that_shape_a_users_data_are_the_loaders_settings() -> None:
    # predict, whatif, microbench and init register these without loading archbench.workloads.data
    assert USER_DATA_INPUTS == USER_DATA_SETTINGS


def _archbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_init_writes_a_sweepable_study_of_the_users_model_and_table(
    data, tmp_path: Path, monkeypatch, capsys
) -> None:
    # odd characters a YAML writer must quote: a blank, a quote, ': ' and ' #'
    odd = tmp_path / 'my "model": #1.py'
    shutil.copy(REPO / "examples" / "transformer.py", odd)
    table = tmp_path / "my data: #2.csv"
    shutil.copy(data.table.removeprefix("csv:"), table)
    (tmp_path / "hosts.txt").write_text("h1 slots=2\nh2 slots=2\n")
    monkeypatch.chdir(tmp_path)
    model, dataset = f"{odd.name}:build", f"csv:{table.name}"
    argv = ["init", "--hostfile", "hosts.txt", "--bandwidth", "1gbit", "-o", "runs/mine.yaml",
            "--model", model, "--dataset", dataset, "--label-column", "kind"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    spec = yaml.safe_load((tmp_path / "runs" / "mine.yaml").read_text())
    assert spec["fixed"]["model"] == model and spec["fixed"]["dataset"] == dataset
    assert spec["fixed"]["label_column"] == "kind"
    assert set(spec["fixed"]) == {"model", "dataset", "label_column", "steps", "batch_size", "sync"}
    # 64 training rows: a per-worker batch the largest global batch (4 workers) still fits
    assert spec["fixed"]["batch_size"] * max(spec["factors"]["workers"]) <= 64
    done = _archbench("sweep", "runs/mine.yaml", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    commands = [line for line in done.stdout.splitlines() if "archbench.train" in line]
    assert commands and all("--label-column kind" in line for line in commands)
    assert all(f"'{model}'" in line and f"'{dataset}'" in line for line in commands)


@pytest.mark.parametrize("command", ["predict", "init"])
@pytest.mark.parametrize(
    ("model", "dataset", "message"),
    [
        ("missing.py:build", "fashion_mnist", "--model missing.py:build: no such file missing.py"),
        (TRANSFORMER, "parquet:table.parquet", "unknown form 'parquet'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    command: str, model: str, dataset: str, message: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.txt").write_text("h1 slots=2\nh2 slots=2\n")
    common = ["--model", model, "--dataset", dataset]
    if command == "predict":
        argv = ["predict", "--arch", "ring", "--workers", "2", "--batch-size", "16",
                "--compute-ms", "5", *common]  # fmt: skip
    else:
        argv = ["init", "--hostfile", "hosts.txt", "--bandwidth", "1gbit", "-o", "mine.yaml",
                *common]  # fmt: skip
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        status = exc.code
    assert status == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"archbench {command}: error: ") and message in line, line
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.txt"]
