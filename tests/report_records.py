"""A tiny real study for the report and compare tests, trained once per test session.

Two workloads (mlp, cnn on Fashion-MNIST) × three configurations (single at batch 32 and 64,
ring with 2 workers at batch 32) × 2 repetitions (seeds), each a real `python -m archbench.train`
run, the ring ones under mpirun and horovodrun, all appending to one results.jsonl.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from conftest import run_train

MODELS = ("mlp", "cnn")
CONFIGS = (("single", 32), ("single", 64), ("ring", 32))
SEEDS = (1, 2)
TARGET = 0.5
COMMON = [
    "--dataset", "fashion_mnist", "--steps", "30", "--eval-every", "10",
    "--eval-samples", "1000", "--target-accuracy", str(TARGET), "--study", "tiny",
]  # fmt: skip

_generated: dict[str, Path] = {}


def real_study(base: Path) -> Path:
    """The study folder (with results.jsonl), trained on first use and reused after."""
    if "study" in _generated:
        return _generated["study"]
    folder = base / "tiny"
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.jsonl"
    for seed in SEEDS:
        for model in MODELS:
            for arch, batch in CONFIGS:
                args = ["--arch", arch, "--model", model, "--batch-size", str(batch)]
                args += ["--seed", str(seed), *COMMON]
                launcher = None
                if arch == "ring":
                    launcher = "mpirun" if seed == 1 else "horovodrun"
                proc, _ = run_train(args, out=results, launcher=launcher, np=2 if launcher else 1)
                assert proc.returncode == 0, (args, proc.stdout[-1500:], proc.stderr[-1500:])
    _generated["study"] = folder
    return folder


def as_failed(record: dict[str, Any], status: str, suffix: str) -> dict[str, Any]:
    """A copy of a real record as a run that died looks: no measurements, an error."""
    failed = copy.deepcopy(record)
    failed["run_id"] = f"{record['run_id']}-{suffix}"
    failed["status"] = status
    failed["timing"] = {"wall_s": 3.5}
    failed["result"] = {}
    failed["comm"] = {}
    failed["error"] = {"type": "RunFailed", "message": f"rank 1 exited ({status})"}
    return failed


def key(record: dict[str, Any]) -> tuple[str, str, int]:
    config = record["config"]
    return (config["model"], config["arch"], int(config["batch_size"]))
