"""A user's model file and data files must be the same bytes on every host and across a study's
runs: doctor names the host whose copy differs or is missing, the sweep's preflight on a cluster
stops on it, a study whose model file changed since its records refuses before any run, and a dry
run names the model files the study imports (code the user chose to run).

A node is given another copy of a file in its own mount namespace (`mounted_in_node`), at the same
path as this machine's, on files under the test's own folder: nothing the other tests see.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixture import EmulatedCluster, emulated_cluster, launcher_env
from test_doctor import doctor, failures, mounted_in_node, study_on
from test_sweep_runs import results, sweep, write_spec

from archbench.common.errors import UsageError
from archbench.workloads.files import sha256_of

__all__ = ["emulated_cluster"]  # the shared session fixture

# A model as small as the built-in mlp: the runs stay a few seconds each.
MODEL = """\
import tensorflow as tf


def build(input_shape, num_outputs):
    inputs = tf.keras.Input(shape=input_shape)
    x = tf.keras.layers.Flatten()(inputs)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs)(x))
"""
TABLE = "size,weight,kind\n1.0,2.0,a\n2.0,1.0,b\n3.0,4.0,a\n4.0,3.0,b\n"


def user_files(folder: Path) -> tuple[Path, Path]:
    """A model file and a CSV table in folders of their own (so a node can hide a folder)."""
    (folder / "model").mkdir()
    (folder / "data").mkdir()
    model, table = folder / "model" / "tiny.py", folder / "data" / "table.csv"
    model.write_text(MODEL)
    table.write_text(TABLE)
    return model, table


@pytest.mark.parametrize(
    "args, says",
    [
        (["--dataset", "csv:"], "give the path after 'csv:'"),
        (["--dataset", "parquet:/x"], "unknown form 'parquet'"),
        (["--model", "notes.txt"], "unknown model 'notes.txt'"),
    ],
)
def test_a_bad_model_or_data_value_is_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path
):
    result = doctor("-H", "localhost", *args, cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr


def test_doctor_names_the_host_whose_model_or_data_file_differs_or_is_missing(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    first, second = emulated_cluster.nodes[:2]
    model, table = user_files(tmp_path)
    other_model = tmp_path / "other.py"
    other_model.write_text(
        MODEL.replace("Dense(num_outputs)", "Dense(num_outputs, use_bias=False)")
    )
    other_table = tmp_path / "other.csv"
    other_table.write_text(TABLE.replace("4.0,3.0,b", "4.0,3.5,b"))
    args = ["-H", f"{first},{second}", "--quick", "--checks", "model,data"]
    spec_args = ["--model", f"{model}:build", "--dataset", f"csv:{table}"]

    with (
        mounted_in_node(emulated_cluster, second, model, other_model),
        mounted_in_node(emulated_cluster, first, table, other_table),
    ):
        result = doctor(*args, *spec_args)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = failures(result, "model")
    here, there = sha256_of(str(model))[:8], sha256_of(str(other_model))[:8]
    assert line.startswith(
        f"{second}: --model {model}:build: {model} differs from this machine's "
        f"(sha256 {here}… here, {there}… there); copy this machine's file to {second}"
    ), line
    (line,) = failures(result, "data")
    here, there = sha256_of(str(table))[:8], sha256_of(str(other_table))[:8]
    assert line.startswith(
        f"{first}: --dataset csv:{table}: {table} differs from this machine's "
        f"(sha256 {here}… here, {there}… there)"
    ), line

    with mounted_in_node(emulated_cluster, second, table.parent):  # an empty folder there
        result = doctor(*args, *spec_args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert failures(result, "model") == []
    (line,) = failures(result, "data")
    assert line.startswith(f"{second}: --dataset csv:{table}: {table}: no such file; "), line

    result = doctor(*args, *spec_args)  # the same bytes everywhere
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok   model     {model} (sha256 {sha256_of(str(model))[:8]}…) the same" in result.stdout


def test_the_sweep_stops_before_its_first_run_when_a_host_has_another_model_file(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    nodes = emulated_cluster.nodes
    model, _ = user_files(tmp_path)
    other_model = tmp_path / "other.py"
    other_model.write_text(MODEL + "# edited on one host only\n")
    spec = tmp_path / "mine.yaml"
    fixed = f"{{model: '{model}:build', dataset: synthetic, synthetic_shape: 4x4, steps: 8, workers: 2}}"
    spec.write_text(study_on(emulated_cluster, "mine", fixed, "[ring]"))
    with mounted_in_node(emulated_cluster, nodes[1], model, other_model):
        result = subprocess.run(
            [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
            cwd=tmp_path, env=launcher_env(), capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    said = [line for line in result.stderr.splitlines() if "differs from this machine's" in line]
    assert said == [
        f"archbench sweep: {nodes[1]}: --model {model}:build: {model} differs from this "
        f"machine's (sha256 {sha256_of(str(model))[:8]}… here, "
        f"{sha256_of(str(other_model))[:8]}… there); copy this machine's file to {nodes[1]} "
        "(every host must read the same bytes)"
    ], result.stderr
    assert "1 problem(s) on the study's hosts" in result.stderr
    assert results(tmp_path / "mine") == []


def test_a_study_whose_model_file_changed_since_its_runs_refuses_before_any_run(tmp_path: Path):
    model, _ = user_files(tmp_path)
    study = tmp_path / "changed"
    text = f"""
        study: changed
        cluster: localhost
        fixed: {{arch: single, model: '{model}:build', dataset: synthetic, synthetic_shape: 4x4,
                 batch_size: 16, eval_samples: 64}}
        factors: {{steps: %s}}
        """
    spec = write_spec(tmp_path, "changed", text % "[10]")

    dry = sweep(spec, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (
        f"archbench sweep: model files this study imports (code you chose to run): {model}\n"
        in dry.stderr
    )
    assert len(dry.stdout.splitlines()) == 1 and not study.exists()

    first = sweep(spec)
    assert first.returncode == 0, first.stderr
    (record,) = results(study)
    assert record["status"] == "ok", record.get("error")
    before = record["model_stats"]["sha256"]
    assert before == sha256_of(str(model))

    model.write_text(MODEL.replace("Flatten()", "Flatten(name='flat')"))
    spec = write_spec(tmp_path, "changed", text % "[10, 12]")  # one more run to make
    again = sweep(spec)
    assert again.returncode == 2, again.stderr
    assert again.stderr.splitlines() == [
        f"archbench sweep: error: {model} changed since this study's earlier runs (--model "
        f"{model}:build: sha256 {before[:8]}… in 1 of its records, "
        f"{sha256_of(str(model))[:8]}… now): restore the file, or run the study into a new "
        "folder (a new study: name, or the spec in another folder), so that one study never "
        "mixes two versions"
    ], again.stderr
    assert len(results(study)) == 1 and len(list((study / "runs").iterdir())) == 1
    assert sweep(spec, "--dry-run").returncode == 2  # a dry run says it too

    model.write_text(MODEL)  # restored: the study goes on
    assert "1 to run" in sweep(spec, "--dry-run").stderr


def test_a_study_whose_data_file_changed_is_refused_by_the_records_it_kept(tmp_path: Path):
    """The check the sweep makes on its records, given records as a sweep keeps them."""
    from archbench.sweep.kinds import resolve_target
    from archbench.sweep.plan import build_plan
    from archbench.sweep.spec import load_spec
    from archbench.sweep.user_files import check_unchanged

    _, table = user_files(tmp_path)
    spec = write_spec(
        tmp_path,
        "tabular",
        f"""
        cluster: localhost
        fixed: {{arch: single, model: mlp, dataset: 'csv:{table}', steps: 10}}
        """,
    )
    loaded = load_spec(str(spec))
    runs = build_plan(loaded, resolve_target(loaded)).runs
    digest = sha256_of(str(table))
    kept = [{"config": {"dataset": f"csv:{table}", "dataset_sha256": digest}}]
    check_unchanged(runs, kept)  # the same file: nothing to say
    table.write_text(TABLE + "5.0,6.0,a\n")
    with pytest.raises(UsageError) as refused:
        check_unchanged(runs, kept)
    assert str(refused.value).startswith(
        f"{table} changed since this study's earlier runs (--dataset csv:{table}: sha256 "
        f"{digest[:8]}… in 1 of its records, {sha256_of(str(table))[:8]}… now): restore the file"
    )


def test_the_probe_reports_a_missing_npy_folder_once(tmp_path: Path):
    from archbench.doctor.probe import user_files as probe_files

    folder = tmp_path / "arrays"
    (entry,) = probe_files([], [{"dataset": f"npy:{folder}"}])
    assert entry["problem"] == f"no such folder {folder}" and entry["sha256"] is None
    folder.mkdir()
    entries = probe_files([], [{"dataset": f"npy:{folder}"}])
    assert [e["problem"] for e in entries] == [
        f"{folder}/{name}.npy: no such file" for name in ("x_train", "y_train", "x_test", "y_test")
    ]
