"""A user's own model and data under every architecture (archbench.workloads).

- The synchronous oracle holds for a model file (examples/transformer.py) and for a saved model
  (.keras): single with batch W*b, ring (horovodrun), p2p and ps-sync with 2 servers end 30 steps
  with the same parameters to 1e-4 relative, as the built-in models do (tests/test_equivalence.py).
- A saved model trains from its weights under every architecture: at a learning rate too small to
  move them, the run's parameter norm is the saved weights' norm.
- Tables and time series from data sets that ship inside packages (scikit-learn's UCI wine table,
  statsmodels' sunspots) train to a metric that beats chance: accuracy above the largest class's
  share; a test RMSE below that of predicting the training mean.
- A folder of .npy files is read memory-mapped.
- Every bad input the issue lists is one line, exit status 2, and no record written.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import REPO, run_train

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

TRANSFORMER = "examples/transformer.py:build"
RELATIVE_TOLERANCE = 1e-4
PER_WORKER_BATCH = 16
STEPS = ["--steps", "30", "--seed", "5", "--eval-samples", "500", "--warmup-steps", "3"]

# a model without batch normalisation or dropout: every architecture computes the same thing
SAVED_MODEL_SCRIPT = """
import sys
import tensorflow as tf
tf.keras.utils.set_random_seed(11)
model = tf.keras.Sequential([
    tf.keras.Input(shape=(28, 28, 1)),
    tf.keras.layers.Conv2D(8, 3, activation="relu"),
    tf.keras.layers.MaxPooling2D(),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])
model.save(sys.argv[1])
"""


def _python(*args: str) -> None:
    subprocess.run([sys.executable, *args], cwd=REPO, check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The examples' data sets (wine.csv, sunspots.csv, fashion-small.npz) and a saved model."""
    where = tmp_path_factory.mktemp("user-workloads")
    _python("examples/datasets.py", str(where))
    script = where / "save.py"
    script.write_text(SAVED_MODEL_SCRIPT)
    _python(str(script), str(where / "saved.keras"))
    _python(str(script), str(where / "saved.h5"))
    return where


def _run(arch: str, workers: int, args: list[str], out: Path) -> dict:
    if arch == "single":
        flags = ["--arch", "single", "--batch-size", str(workers * PER_WORKER_BATCH)]
        launcher, processes = None, 1
    else:
        flags = ["--arch", arch, "--batch-size", str(PER_WORKER_BATCH)]
        launcher, processes = ("horovodrun" if arch == "ring" else "mpirun"), workers
        if arch == "ps":
            flags += ["--num-ps", "2", "--sync"]
            processes += 2
    proc, records = run_train([*flags, *args], out=out, launcher=launcher, np=processes)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (record,) = records
    assert record["status"] == "ok"
    return record


def _agree(records: dict[str, dict]) -> None:
    base = records["single"]["result"]
    for arch, record in records.items():
        for key in ("param_norm", "final_loss"):
            assert math.isclose(record["result"][key], base[key], rel_tol=RELATIVE_TOLERANCE), (
                f"{arch} {key} {record['result'][key]} vs single {base[key]}"
            )


def test_a_model_file_follows_the_sync_semantics_under_every_architecture(tmp_path):
    records = {
        arch: _run(arch, 2, ["--model", TRANSFORMER, *STEPS], tmp_path / f"{arch}.jsonl")
        for arch in ("single", "ring", "p2p", "ps")
    }
    _agree(records)
    stats = records["ring"]["model_stats"]
    assert stats["label"] == "transformer:build" and stats["source"] == "function"
    assert stats["file"] == "examples/transformer.py" and len(stats["sha256"]) == 64
    assert records["ps"]["comm"]["ps"]["sharding"]  # the servers hold the user's variables
    assert {r["model_stats"]["params"] for r in records.values()} == {stats["params"]}


def test_a_saved_model_follows_the_sync_semantics_from_its_weights(folder, tmp_path):
    data = ["--dataset", f"npz:{folder / 'fashion-small.npz'}"]
    args = ["--model", str(folder / "saved.keras"), *data, *STEPS]
    records = {
        arch: _run(arch, 2, args, tmp_path / f"{arch}.jsonl")
        for arch in ("single", "ring", "p2p", "ps")
    }
    _agree(records)
    assert records["p2p"]["model_stats"]["label"] == "saved.keras"
    assert len(records["p2p"]["config"]["dataset_sha256"]) == 64


def _saved_norm(path: Path) -> float:
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "m = tf.keras.models.load_model(sys.argv[1], compile=False)\n"
        "print(float(np.sqrt(sum(np.sum(np.square(w.numpy(), dtype=np.float64)) "
        "for w in m.trainable_variables))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    return float(proc.stdout.split()[-1])


@pytest.mark.parametrize("suffix", ["keras", "h5"])
def test_a_saved_model_starts_from_its_weights(folder, tmp_path, suffix):
    saved = folder / f"saved.{suffix}"
    norm = _saved_norm(saved)
    # a step too small to move a weight in float32: the run ends where the file started
    args = ["--model", str(saved), "--dataset", f"npz:{folder / 'fashion-small.npz'}"]
    args += ["--steps", "6", "--warmup-steps", "2", "--lr", "1e-12", "--momentum", "0"]
    for arch in ("single", "ps"):
        record = _run(arch, 2, args, tmp_path / f"{arch}.jsonl")
        assert record["result"]["param_norm"] == pytest.approx(norm, rel=1e-6), arch


def test_a_csv_table_trains_to_an_accuracy_above_its_largest_class(folder, tmp_path):
    table = folder / "wine.csv"
    args = ["--model", "mlp", "--dataset", f"csv:{table}", "--label-column", "cultivar"]
    record = _run("p2p", 2, [*args, "--epochs", "15"], tmp_path / "wine.jsonl")
    import pandas as pd

    largest_share = pd.read_csv(table)["cultivar"].value_counts(normalize=True).max()
    assert record["result"]["test_accuracy"] > largest_share + 0.2
    assert "178 rows, label 'cultivar'" in record["config"]["dataset_source"]


def test_a_time_series_forecasts_better_than_the_training_mean(folder, tmp_path):
    series = folder / "sunspots.csv"
    args = ["--model", "mlp", "--dataset", f"series:{series}", "--feature-columns", "SUNACTIVITY"]
    args += ["--loss", "mse", "--window", "16", "--epochs", "20", "--lr", "0.01"]
    record = _run("ring", 2, args, tmp_path / "sunspots.jsonl")
    result = record["result"]
    assert result["test_accuracy"] is None
    # the RMSE of predicting the training mean (0 in standardised units) over the test targets
    from archbench.runtime.settings import SETTINGS
    from archbench.workloads.data import load_dataset

    settings = {name: row.default for name, row in SETTINGS.items()}
    settings.update(
        dataset=f"series:{series}", feature_columns="SUNACTIVITY", loss="mse", window=16
    )
    config = SimpleNamespace(**settings)
    data = load_dataset(config)
    mean_rmse = float(np.sqrt(np.mean(np.square(data.y_test))))
    assert result["test_rmse"] == pytest.approx(math.sqrt(result["final_loss"]))
    assert result["test_rmse"] < 0.8 * mean_rmse, (result["test_rmse"], mean_rmse)
    assert record["timing"]["epochs"][-1]["test_rmse"] == result["test_rmse"]


def test_a_folder_of_npy_files_is_read_memory_mapped(folder, tmp_path):
    arrays = np.load(folder / "fashion-small.npz")
    npy = tmp_path / "npy"
    npy.mkdir()
    for key in arrays.files:
        np.save(npy / f"{key}.npy", arrays[key])
    from archbench.runtime.settings import SETTINGS
    from archbench.workloads.data import load_dataset

    config = SimpleNamespace(**{name: row.default for name, row in SETTINGS.items()})
    config.dataset = f"npy:{npy}"
    data = load_dataset(config)
    assert isinstance(data.x_train, np.memmap) and data.num_classes == 10
    record = _run("single", 1, ["--dataset", f"npy:{npy}", "--steps", "20"], tmp_path / "r.jsonl")
    npz = _run(
        "single",
        1,
        ["--dataset", f"npz:{folder / 'fashion-small.npz'}", "--steps", "20"],
        tmp_path / "z.jsonl",
    )
    assert record["result"]["param_norm"] == npz["result"]["param_norm"]  # the same samples


# --------------------------------------------------------------------------- bad input


def _write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


MODEL_FILES = {
    "raises.py": """
        import tensorflow as tf

        def build(input_shape, num_outputs):
            raise ValueError("no such layer width")
        """,
    "notmodel.py": """
        def build(input_shape, num_outputs):
            return 42
        """,
    "narrow.py": """
        import tensorflow as tf

        def build(input_shape, num_outputs):
            inputs = tf.keras.Input(shape=input_shape)
            x = tf.keras.layers.Flatten()(inputs)
            return tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x))
        """,
    "softmax.py": """
        import tensorflow as tf

        def build(input_shape, num_outputs):
            inputs = tf.keras.Input(shape=input_shape)
            x = tf.keras.layers.Flatten()(inputs)
            return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs, activation="softmax")(x))
        """,
    "broken.py": """
        import tensorflow as tf
        def build(:
        """,
}


def _bad_data(where: Path) -> dict[str, str]:
    """Data files with one problem each."""
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 4), dtype=np.float32), rng.integers(0, 3, 40)
    files = {}
    np.savez(where / "nokey.npz", x_train=x, y_train=y, x_test=x)
    np.savez(where / "short.npz", x_train=x, y_train=y[:-1], x_test=x, y_test=y)
    np.savez(where / "negative.npz", x_train=x, y_train=y - 1, x_test=x, y_test=y)
    with_nan = x.copy()
    with_nan[7, 2] = np.nan
    np.savez(where / "nan.npz", x_train=with_nan, y_train=y, x_test=x, y_test=y)
    with_inf = x.copy()
    with_inf[3, 0] = np.inf
    np.savez(where / "inf.npz", x_train=x, y_train=y, x_test=with_inf, y_test=y)
    (where / "notnpz.npz").write_text("not an archive")
    (where / "table.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n7,8,y\n")
    (where / "notmodel.keras").write_text("not a model")
    import zipfile

    with zipfile.ZipFile(where / "deep.keras", "w") as archive:  # a hostile model file
        archive.writestr("config.json", "[" * 100_000)
    for name in ("nokey", "short", "negative", "nan", "inf", "notnpz"):
        files[name] = f"npz:{where / name}.npz"
    files["table"] = f"csv:{where / 'table.csv'}"
    return files


BAD_INPUTS = [
    # (model, dataset key or spec, extra flags, what the one line says)
    ("missing.py:build", None, [], "no such file"),
    ("{good}:nothere", None, [], "defines no function 'nothere'"),
    ("{raises}:build", None, [], "raises.py, line 5: ValueError: no such layer width"),
    ("{broken}:build", None, [], "broken.py, line 3: SyntaxError"),
    ("{notmodel}:build", None, [], "returned int, not a tf.keras.Model"),
    ("{narrow}:build", None, [], "outputs shape (3,), the data needs (10,)"),
    ("{softmax}:build", None, [], "applies softmax"),
    ("{notmodel_keras}", None, [], "not a saved Keras model"),
    ("missing.keras", None, [], "no such file"),
    ("{deep_keras}", None, [], "nested deeper than"),
    ("mlp", "nokey", [], "missing array y_test"),
    ("mlp", "short", [], "x_train holds 40 samples, y_train 39"),
    ("mlp", "negative", [], "is out of range"),
    ("mlp", "nan", [], "x_train holds NaN at sample 7"),
    ("mlp", "inf", [], "x_test holds Inf at sample 3"),
    ("mlp", "notnpz", [], "not a NumPy .npz archive"),
    ("mlp", "table", ["--label-column", "kind"], "--label-column 'kind' is not a column"),
    ("mlp", "npz:/nonexistent/data.npz", [], "no such file"),
    ("mlp", "parquet:/tmp/x", [], "unknown form 'parquet'"),
    ("mlp", "npy:/nonexistent", [], "no such folder"),
]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> dict[str, str]:
    where = tmp_path_factory.mktemp("bad-inputs")
    files = {
        name.removesuffix(".py"): _write(where / name, text) for name, text in MODEL_FILES.items()
    }
    files["good"] = str(REPO / "examples" / "transformer.py")
    files["notmodel_keras"] = str(where / "notmodel.keras")
    files["deep_keras"] = str(where / "deep.keras")
    return {**files, **_bad_data(where)}


@pytest.mark.parametrize(
    "model,dataset,flags,says", BAD_INPUTS, ids=[f"{m}|{d}|{s}" for m, d, _, s in BAD_INPUTS]
)
def test_a_bad_model_or_data_is_one_line_exit_2_nothing_written(
    bad_files, tmp_path, model, dataset, flags, says
):
    args = ["--model", model.format(**bad_files), "--steps", "6"]
    if dataset is not None:
        args += ["--dataset", bad_files.get(dataset, dataset)]
    out = tmp_path / "r.jsonl"
    proc, records = run_train([*args, *flags], out=out)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert says in lines[0], lines[0]
    assert not out.exists() and records == []


def test_a_model_that_fails_on_the_workers_is_said_once_under_a_parameter_server(
    bad_files, tmp_path
):
    # rank 0 is a server and builds no model: the chief worker says what went wrong
    out = tmp_path / "r.jsonl"
    args = [
        "--arch",
        "ps",
        "--num-ps",
        "1",
        "--model",
        f"{bad_files['raises']}:build",
        "--steps",
        "6",
    ]
    proc, _ = run_train(args, out=out, launcher="mpirun", np=3)
    assert proc.returncode != 0
    said = [line for line in proc.stderr.splitlines() if line.startswith("archbench train: error")]
    assert len(said) == 1 and "ValueError: no such layer width" in said[0], proc.stderr[-3000:]
    assert not out.exists()
