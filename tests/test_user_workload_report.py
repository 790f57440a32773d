"""A user's own model and data in `archbench report` and `archbench compare`: real sweeps of real
runs, then the report and the comparison as a user runs them.

- A classification study trains the built-in `mlp` and a model file of the user's on the same CSV
  table, under `single` and `ring`: the report names the user's model by its short label (never by
  its path), and its tables hold both models.
- A regression study (`--loss mse`) trains `mlp` and two different model files that share a label
  (`net.py` in two folders): the report shows test RMSE where it shows accuracy for classes, no
  accuracy at all, and keeps the two files apart by the start of their sha256.

Neither command may import the user's model file: it only reads records. Each model file here
appends a line to a marker file beside it whenever it is imported, so the test sees any import.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from record_files import read_records

from archbench.analysis.fmt import num

REPO = Path(__file__).resolve().parents[1]
MARKER = "imported.txt"

MODEL_FILE = '''\
"""A user's model for the report tests: one hidden layer of {width} units."""

import os
import sys

# Leaves a mark whenever the file is imported, by whatever process.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "{marker}"), "a") as mark:
    mark.write(" ".join(sys.argv) + "\\n")

import tensorflow as tf


def build(input_shape, num_outputs):
    inputs = tf.keras.Input(shape=input_shape)
    hidden = tf.keras.layers.Dense({width}, activation="relu")(tf.keras.layers.Flatten()(inputs))
    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs)(hidden))
'''


def env() -> dict[str, str]:
    variables = dict(os.environ)
    variables["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{variables.get('PATH', '')}"
    variables["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return variables


def archbench(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """`archbench ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", *args],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def model_file(folder: Path, width: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "net.py"
    path.write_text(MODEL_FILE.format(width=width, marker=MARKER))
    return path


def table_file(path: Path, regression: bool) -> Path:
    """A small table: four measurements a row and what to predict from them (a kind, or a
    value)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(240, 4))
    score = x @ np.array([1.0, -0.5, 0.8, 0.3])
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "c", "d", "target"])
        for row, value in zip(x, score, strict=True):
            target = f"{value + 0.1 * rng.normal():.4f}" if regression else "abc"[int(value > 0)]
            writer.writerow([f"{v:.4f}" for v in row] + [target])
    return path


def sweep_study(folder: Path, name: str, text: str) -> Path:
    """Runs the study spec `text` with `archbench sweep`; its results folder."""
    spec = folder / f"{name}.yaml"
    spec.write_text(textwrap.dedent(text))
    done = archbench("sweep", str(spec), timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = read_records(folder / name / "results.jsonl")
    assert [r["status"] for r in records] == ["ok"] * len(records), [
        r.get("error") for r in records
    ]
    return folder / name


def without_sources(markdown: str) -> str:
    """The report without its list of the user's models and data (the one place that gives their
    paths, so a short name can be traced back)."""
    return "\n".join(line for line in markdown.splitlines() if "sha256" not in line)


def report_and_compare(study: Path, markers: list[Path]) -> tuple[str, str]:
    """`archbench report` and `archbench compare` on a study; fails if either imported a model
    file. Returns the report's markdown and compare's output."""
    for marker in markers:
        assert marker.is_file(), "training never imported the model file"  # the mark works
        marker.unlink()
    report = archbench("report", str(study))
    assert report.returncode == 0, report.stderr[-3000:]
    compare = archbench("compare", str(study / "results.jsonl"))
    assert compare.returncode == 0, compare.stderr[-3000:]
    imported = [m.read_text() for m in markers if m.exists()]
    assert not imported, f"report or compare imported the user's model: {imported}"
    return (study / "report" / "report.md").read_text(), compare.stdout


def csv_rows(study: Path, name: str) -> list[dict[str, str]]:
    with (study / "report" / "tables" / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_a_user_model_beside_mlp_is_named_by_its_label_and_never_imported_by_the_report(
    tmp_path,
):
    model = model_file(tmp_path / "models", width=24)
    data = table_file(tmp_path / "kinds.csv", regression=False)
    study = sweep_study(
        tmp_path,
        "mixed",
        f"""
        study: mixed
        seed: 3
        repetitions: 1
        timeout_s: 240
        cluster: {{kind: localhost, slots: 2}}
        fixed:
          dataset: csv:{data}
          label_column: target
          workers: 2
          steps: 12
          batch_size: 16
          eval_every: 6
          target_accuracy: 0.6
        factors:
          model: [mlp, {model}:build]
          arch: [single, ring]
        design: full_factorial
        """,
    )
    markdown, compared = report_and_compare(study, [model.parent / MARKER])
    records = read_records(study / "results.jsonl")
    user = [r for r in records if r["config"]["model"] == f"{model}:build"]
    assert len(user) == 2 and {r["model_stats"]["label"] for r in user} == {"net:build"}

    # Tables, findings and compare name the model by its label, never by its file's path.
    shown = without_sources(markdown)
    assert "net:build" in shown and str(model.parent) not in shown
    assert str(model.parent) not in compared and "net:build" in compared
    sources = [line for line in markdown.splitlines() if "sha256" in line]
    assert any("`net:build`" in line and str(model) in line for line in sources), sources
    assert any("`csv:kinds.csv`" in line and str(data) in line for line in sources), sources
    for name in ("runs", "time_to_target", "best_config"):
        rows = csv_rows(study, name)
        assert {row["workload"] for row in rows} == {"mlp", "net:build"}, (name, rows)
        assert not any(str(tmp_path) in value for row in rows for value in row.values())
    # Both models under both architectures, each with its own record's accuracy.
    runs = {(r["workload"], r["arch"]) for r in csv_rows(study, "runs")}
    assert runs == {(m, a) for m in ("mlp", "net:build") for a in ("single", "ring")}
    for row in csv_rows(study, "time_to_target"):
        label = row["workload"]
        mine = [
            r["result"]["test_accuracy"]
            for r in records
            if r["config"]["arch"] == row["arch"]
            and (r["model_stats"].get("label") or r["config"]["model"]) == label
        ]
        assert float(row["final_accuracy"]) == pytest.approx(np.mean(mine))
    # A figure with a panel per workload titles the user's by its label.
    svg = (study / "report" / "figures" / "time_to_accuracy.svg").read_text()
    assert "net:build" in svg and str(model.parent) not in svg


def test_a_regression_study_reports_test_rmse_and_keeps_two_files_of_one_label_apart(tmp_path):
    first = model_file(tmp_path / "one", width=8)
    second = model_file(tmp_path / "two", width=20)
    data = table_file(tmp_path / "values.csv", regression=True)
    study = sweep_study(
        tmp_path,
        "values",
        f"""
        study: values
        seed: 4
        repetitions: 1
        timeout_s: 240
        cluster: {{kind: localhost, slots: 2}}
        fixed:
          arch: single
          dataset: csv:{data}
          label_column: target
          loss: mse
          steps: 12
          batch_size: 16
          eval_every: 6
        factors:
          model: [mlp, {first}:build, {second}:build]
        design: full_factorial
        """,
    )
    markdown, compared = report_and_compare(study, [first.parent / MARKER, second.parent / MARKER])
    records = read_records(study / "results.jsonl")
    rmse = {}
    for record in records:
        assert record["result"]["test_accuracy"] is None
        stats = record["model_stats"]
        label = f"net:build#{stats['sha256'][:8]}" if "sha256" in stats else "mlp"
        rmse[label] = record["result"]["test_rmse"]
    assert len(rmse) == 3  # the two files' digests differ in their first 8 digits

    # The time-to-accuracy section becomes the test RMSE's, from the records' values.
    assert "## Test RMSE against time" in markdown
    rows = csv_rows(study, "time_to_target")
    assert {row["workload"] for row in rows} == set(rmse)
    for row in rows:
        assert float(row["final_rmse"]) == pytest.approx(rmse[row["workload"]])
        assert row["final_accuracy"] == "" and row["reached"] == ""
    best = min(rmse, key=rmse.get)
    findings = markdown.split("## Findings", 1)[1].split("## The study", 1)[0]
    assert "Lowest final test RMSE (lower is better)" in findings
    assert num(rmse[best]) in findings
    # No accuracy anywhere: not as 0%, not as a missing field, not as a header.
    shown = without_sources(markdown)
    assert "accuracy" not in findings.lower()
    assert "lack `result.test_accuracy`" not in markdown
    section = markdown.split("## Test RMSE against time", 1)[1].split("\n## ", 1)[0]
    assert "%" not in section and "final accuracy" not in shown
    best_rows = csv_rows(study, "best_config")
    assert all(row["test_accuracy"] == "" and float(row["test_rmse"]) > 0 for row in best_rows)
    # Two files named net.py: two labels, each with its own digest; never the path.
    assert sum(label.startswith("net:build#") for label in rmse) == 2
    for label in rmse:
        assert label in shown and label in compared
    for path in (first.parent, second.parent, data):
        assert str(path) not in shown and str(path) not in compared
    header = compared.splitlines()[0]
    assert "test RMSE" in header and "test acc" not in header
