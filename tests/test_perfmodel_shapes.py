"""The model priced at the input shape it trains at: a PS plan's busiest server, predict for a
Keras application at ImageNet's shape, the what-if's efficiency walls, and bad shapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.cli import main
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.predictor import (
    ModelParams,
    StepConfig,
    default_placement,
    predict_step,
)
from archbench.perfmodel.optimize.whatif import scaling_walls
from archbench.ps.sharding import VariableInfo, make_plan

REPO = Path(__file__).resolve().parent.parent

# one 1000 x 1000 float32 matrix (4,000,000 B) and three vectors of 1000 floats (4,000 B)
VARIABLES = [
    VariableInfo("big", (1000, 1000), 4),
    VariableInfo("b1", (1000,), 4),
    VariableInfo("b2", (1000,), 4),
    VariableInfo("b3", (1000,), 4),
]
# no latency, 1 ns per byte between hosts (8 Gbit/s), loopback never used; the servers' own
# costs (requests, updates) are priced by hand in test_perfmodel_formulas
CALIB = Calibration(
    intra=F.LinkCost(0.0, 1e-12),
    inter=F.LinkCost(0.0, 1e-9),
    compute={"toy": ComputeLine(fixed_s=0.1, per_sample_s=0.0)},
    ps_request_s=0.0,
    ps_accumulate_s_per_byte=0.0,
    ps_apply_s_per_byte=0.0,
)


def _ps_config(sharding: str, workers: int = 4, servers: int = 2) -> StepConfig:
    plan = make_plan(sharding, VARIABLES, servers)
    return StepConfig(
        arch="ps", model="toy", batch_size=32, param_bytes=float(plan.total_bytes),
        placement=default_placement("ps", workers, servers, "dedicated", None),
        bandwidth_bits=8e9, ps_sharding=sharding, ps_plan=plan,
    )  # fmt: skip


def test_one_large_tensor_on_one_server_is_the_imbalance_priced() -> None:
    # round-robin: ps0 holds big + b2 = 4,004,000 B, ps1 holds b1 + b3 = 8,000 B
    pred = predict_step(_ps_config("round-robin"), ModelParams(), CALIB)
    terms = pred.terms
    assert terms["busiest_ps"] == 0
    assert terms["busiest_ps_bytes"] == 4_004_000
    assert terms["busiest_ps_variables"] == 2
    assert terms["busiest_ps_requests"] == 2 * 4 * 2  # push + pull of 2 variables, 4 workers
    assert terms["mean_ps_bytes"] == 2_006_000
    # push: 4 workers x 4,004,000 B into ps0 = 16.016 ms at 1 ns/B; the pull the same
    assert pred.comm_s == pytest.approx(2 * 16.016e-3)
    # an even split would be 2,006,000 B per server: 2 x 8.024 ms; the rest is the busiest shard
    assert pred.parts[F.SERVER_LINK] == pytest.approx(2 * 8.024e-3)
    assert pred.parts[F.IMBALANCE] == pytest.approx(2 * (16.016e-3 - 8.024e-3))
    assert pred.step_s == pytest.approx(0.1 + 2 * 16.016e-3)
    assert sum(pred.parts.values()) == pytest.approx(pred.step_s)

    # balanced: the matrix is cut after 501 rows (2,004,000 B) and the vectors fill up
    balanced = predict_step(_ps_config("balanced"), ModelParams(), CALIB)
    assert balanced.terms["busiest_ps_bytes"] == 2_008_000
    assert balanced.comm_s == pytest.approx(2 * 4 * 2_008_000 * 1e-9)
    assert balanced.parts[F.IMBALANCE] == pytest.approx(2 * 4 * 2_000 * 1e-9)


@pytest.mark.timeout(300)
def test_predict_inceptionv3_at_imagenet_shape(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # no calibration file here: the defaults and the given compute
    argv = ["predict", "--arch", "ps", "--workers", "64", "--num-ps", "16",
            "--model", "inceptionv3", "--dataset", "synthetic", "--synthetic-shape", "299x299x3",
            "--batch-size", "64", "--bandwidth", "10gbit", "--compute-ms", "460"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Keras' InceptionV3 has 23,817,352 trainable parameters with 1000 classes; with 10 the
    # last layer loses 2048 x 990 weights and 990 biases: 21,788,842 parameters, fp32
    assert out["config"]["param_bytes"] == 4 * 21_788_842
    prediction = out["prediction"]
    assert prediction["compute_s"] == pytest.approx(0.46)
    from archbench.perfmodel.model.modelinfo import ps_plan

    plan = ps_plan("inceptionv3", (299, 299, 3), 10, 16, "round-robin")
    busiest = max(plan.bytes_per_server())
    assert prediction["terms"]["busiest_ps_bytes"] == busiest
    assert busiest > 1.5 * plan.total_bytes / 16  # round-robin leaves one server much fuller
    assert prediction["parts"][F.IMBALANCE] > 0
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "busiest server" in text and f"{busiest / 1e6:.3f} MB" in text
    assert "tensor requests per step" in text


def test_scaling_walls_on_a_hand_made_curve() -> None:
    # one worker alone: 100 samples/s; efficiencies .95, .85, .75, .60, .40
    points = [(2, 190.0), (4, 340.0), (8, 600.0), (16, 960.0), (32, 1280.0)]
    dominant = {8: ("link bandwidth", 0.2), 32: ("latency terms", 0.45)}
    eighty, fifty = scaling_walls(points, 100.0, (0.8, 0.5), dominant)
    assert (eighty.workers, eighty.efficiency, eighty.term) == (
        8,
        pytest.approx(0.75),
        "link bandwidth",
    )
    assert (fifty.workers, fifty.efficiency, fifty.term) == (
        32,
        pytest.approx(0.4),
        "latency terms",
    )
    (never,) = scaling_walls(points, 100.0, (0.3,))
    assert never.workers is None


def test_whatif_prints_the_walls_by_hand(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    # mlp on fashion_mnist: 784*128 + 128 + 128*10 + 10 = 101,770 parameters = 407,080 B.
    # Default calibration: 60 us per message between hosts; 1 Gbit/s: 8 ns per byte.
    # ring W=2: 2*60 us + 407,080 * 8 ns = 3.37664 ms; with 5 ms compute, efficiency 59.7%
    # ring W=4: 6*60 us + 1.5 * 407,080 * 8 ns = 5.24496 ms -> 48.8%, the link 4.88496 ms of
    # the 10.24496 ms step (48%)
    status = main(["model", "whatif", "--models", "mlp", "--dataset", "fashion_mnist",
                   "--compute-ms", "5", "--workers", "2,4", "--bandwidths", "1gbit",
                   "--out", str(tmp_path / "whatif")])  # fmt: skip
    assert status == 0
    ring = next(line for line in capsys.readouterr().out.splitlines() if "ring" in line)
    assert "efficiency  60% at W=2,  49% at W=4" in ring
    assert "< 80% from W=2 (link bandwidth 39% of the step)" in ring
    assert "< 50% from W=4 (link bandwidth 48% of the step)" in ring


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command",
    [
        ["predict", "--arch", "ps", "--workers", "4", "--batch-size", "64", "--compute-ms", "5"],
        ["model", "whatif", "--compute-ms", "5", "--workers", "2", "--bandwidths", "1gbit"],
    ],
)
def test_a_shape_the_model_cannot_take_is_one_line_and_status_2(tmp_path: Path, command) -> None:
    shape = ["--dataset", "synthetic", "--synthetic-shape", "10x10x3"]
    model = ["--model", "inceptionv3"] if command[0] == "predict" else ["--models", "inceptionv3"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "archbench.cli", *command, *model, *shape],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "75x75" in lines[0] and "10, 10, 3" in lines[0], done.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_compute_from_another_machines_microbench_records(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # a GPU's compute records: 10 ms at batch 32, 18 ms at batch 64 -> 2 ms + 0.25 ms/sample
    records = [
        {"kind": "microbench", "bench": "compute", "model": "mlp", "batch_size": b,
         "compute_s_median": t, "sharing": 1}
        for b, t in ((32, 0.010), (64, 0.018))
    ]  # fmt: skip
    other = tmp_path / "gpu.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in records))
    argv = ["predict", "--arch", "ring", "--workers", "2", "--model", "mlp",
            "--batch-size", "48", "--bandwidth", "1gbit", "--json"]  # fmt: skip
    assert main([*argv, "--compute-from", str(other)]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"]["compute_s"] == pytest.approx(0.014)
    # a model the file did not time: one line saying so
    assert main([*argv[:6], "cnn", *argv[7:], "--compute-from", str(other)]) == 2
    assert "has no compute measurement of cnn" in capsys.readouterr().err


def test_a_calibrations_update_is_its_step_less_its_compute(tmp_path: Path) -> None:
    from archbench.perfmodel.measure.calibration import load_calibration

    # a dilated node's microbench: the windowed step 3.2 ms, the windowed compute 2.7 ms; its
    # one timed apply waited out a throttled period (2.7 ms) and is not the update
    record = {"kind": "microbench", "bench": "compute", "model": "mlp", "batch_size": 32,
              "sharing": 1, "compute_s_median": 0.0027, "apply_s_median": 0.0027,
              "step_s_median": 0.0032}  # fmt: skip
    path = tmp_path / "calibration.jsonl"
    path.write_text(json.dumps(record) + "\n")
    line = load_calibration(path).compute["mlp"]
    assert line.update_s == pytest.approx(0.0005)
    assert line.seconds(32) == pytest.approx(0.0027)


def test_whatif_compute_per_model_and_its_bad_input(tmp_path: Path, monkeypatch, capsys):
    from archbench.common.errors import UsageError
    from archbench.perfmodel.fit.fitfile import parse_compute_ms

    assert parse_compute_ms("460", ["a", "b"]) == {"a": 460.0, "b": 460.0}
    assert parse_compute_ms("a=1,b=2.5", ["a", "b"]) == {"a": 1.0, "b": 2.5}
    for bad in ("fast", "a=nan", "c=3", "-1"):
        with pytest.raises(UsageError):
            parse_compute_ms(bad, ["a", "b"])
    monkeypatch.chdir(tmp_path)
    status = main(["model", "whatif", "--models", "mlp", "--synthetic-shape", "32x32x3",
                   "--compute-ms", "5", "--workers", "2", "--bandwidths", "1gbit"])  # fmt: skip
    assert status == 2
    assert "--dataset synthetic" in capsys.readouterr().err


WORD_MODEL = ["--model", "wordlm", "--dataset", "words", "--vocab-size", "5000", "--seq-len",
              "16", "--batch-size", "8", "--bandwidth", "1gbit", "--compute-ms", "5"]  # fmt: skip


def test_predict_prices_the_word_models_sparse_rows(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def predicted(*extra: str) -> dict:
        argv = ["predict", "--arch", "ps", "--workers", "2", *WORD_MODEL, "--json", *extra]
        assert main(argv) == 0
        return json.loads(capsys.readouterr().out)

    dense = predicted()
    # the embedding's 5,000 rows x 64 are most of the gradient, and the vocabulary sets them
    assert dense["config"]["param_bytes"] > 5000 * 64 * 4
    sparse = predicted("--sparse-exchange", "sparse", "--touched-rows", "100")
    assert sparse["config"]["param_bytes"] == dense["config"]["param_bytes"]
    # the server's link (1 Gbit/s: 8e-9 s/B) carries both workers' pushes, then their pulls:
    # dense 2 x the gradient each way; sparse the dense rest and 100 rows (int64 indices pushed)
    total = dense["config"]["param_bytes"]
    rest = total - 5000 * 64 * 4
    push, pull = rest + 100 * (256 + 8), rest + 100 * 256
    saved = dense["prediction"]["comm_s"] - sparse["prediction"]["comm_s"]
    assert saved == pytest.approx((2 * 2 * total - 2 * (push + pull)) * 8e-9)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--sparse-exchange", "sparse"], "needs --touched-rows"),
        (["--touched-rows", "100"], "applies only with --sparse-exchange sparse"),
        (["--sparse-exchange", "sparse", "--touched-rows", "0"], "--touched-rows"),
        (["--sparse-exchange", "sparse", "--touched-rows", "10", "--param-bytes", "1e6"],
         "drop --param-bytes"),
    ],
)  # fmt: skip
def test_predict_sparse_rows_bad_input(tmp_path: Path, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    argv = ["predict", "--arch", "ps", "--workers", "2", *WORD_MODEL, *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not list(tmp_path.iterdir())


def test_whatif_draws_sparse_rows_beside_the_dense_ring(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["model", "whatif", "--models", "wordlm", "--dataset", "words", "--vocab-size", "5000",
            "--seq-len", "16", "--batch-size", "8", "--compute-ms", "5", "--workers", "2,8",
            "--bandwidths", "1gbit"]  # fmt: skip

    def efficiency_at_8(out: str, label: str) -> float:
        # "<label> efficiency  42% at W=2,  17% at W=8; ..."
        line = next(line for line in out.splitlines() if line.strip().startswith(label))
        return float(line.split(", ")[1].split("%")[0])

    assert main([*argv, "--out", str(tmp_path / "dense")]) == 0
    dense = capsys.readouterr().out
    assert "ring (dense)" not in dense
    sparse_argv = [*argv, "--sparse-exchange", "sparse", "--touched-rows", "100"]
    assert main([*sparse_argv, "--out", str(tmp_path / "sparse")]) == 0
    sparse = capsys.readouterr().out
    # the dense ring drawn beside the sparse lines is the dense run's ring
    assert efficiency_at_8(sparse, "ring (dense)") == efficiency_at_8(dense, "ring ")
    # one server moving 100 rows a worker scales better than one moving the whole table
    assert efficiency_at_8(sparse, "ps (1 PS)") > efficiency_at_8(dense, "ps (1 PS)")
    assert main([*argv, "--sparse-exchange", "sparse"]) == 2
    assert "go together" in capsys.readouterr().err
