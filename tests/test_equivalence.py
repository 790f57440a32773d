"""The cross-architecture equivalence suite: the proof that archbench compares architectures, not
different training runs.

From one seed, 50 steps of `single` with batch W*b and of `ring`, `p2p` and synchronous `ps`
with W workers x b must end with the same parameters and the same loss up to floating-point
summation order: every pair agrees on `result.param_norm` and `result.final_loss` to 1e-4
relative.

W = 2: all four architectures (ps as 1 parameter server + 2 workers, `mpirun -np 3`).
W = 3: single, ring and p2p. ps would need 4 processes (1 server + 3 workers) on this 2-core
machine, where each TensorFlow process starts slowly and the gRPC session set-up dominates; the
W = 2 pairs already check that ps follows the same sync semantics, so W = 3 keeps the suite
within a couple of minutes.

Each configuration runs once (lazily, on first use) and its record is shared by every pair. The
W = 3 p2p runs also serve the p2p checks that need uneven shards (101,770 parameters over 3):
both send schedules give bit-identical parameters, and the measured bytes equal the shard plan's.
"""

from __future__ import annotations

import itertools
import shutil

import pytest
from conftest import run_train

from archbench.p2p.shards import ShardPlan

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

SEED = "7"
PER_WORKER_BATCH = 32
COMMON = ["--model", "mlp", "--dataset", "fashion_mnist", "--steps", "50", "--seed", SEED]
COMMON += ["--eval-samples", "2000"]
RELATIVE_TOLERANCE = 1e-4
ARCHS_BY_WORKERS = {2: ("single", "ring", "p2p", "ps"), 3: ("single", "ring", "p2p")}


def command_for(arch: str, workers: int) -> tuple[list[str], str | None, int]:
    """(train arguments, launcher, processes) for `arch` with `workers` workers."""
    if arch == "single":
        return ["--arch", "single", "--batch-size", str(workers * PER_WORKER_BATCH)], None, 1
    if arch == "p2p-naive":
        args = ["--arch", "p2p", "--p2p-schedule", "naive", "--batch-size", str(PER_WORKER_BATCH)]
        return args, "mpirun", workers
    args = ["--arch", arch, "--batch-size", str(PER_WORKER_BATCH)]
    if arch == "ps":
        return [*args, "--num-ps", "1", "--sync"], "mpirun", workers + 1
    return args, "mpirun", workers


class Runs:
    """Runs each (arch, workers) configuration at most once and keeps its record or failure."""

    def __init__(self, folder):
        self.folder = folder
        self.outcomes: dict[tuple[str, int], dict | str] = {}

    def record(self, arch: str, workers: int) -> dict:
        key = (arch, workers)
        if key not in self.outcomes:
            self.outcomes[key] = self._run(arch, workers)
        outcome = self.outcomes[key]
        if isinstance(outcome, str):
            pytest.fail(outcome)
        return outcome

    def _run(self, arch: str, workers: int) -> dict | str:
        args, launcher, processes = command_for(arch, workers)
        out = self.folder / f"{arch}-w{workers}.jsonl"
        proc, records = run_train([*COMMON, *args], out=out, launcher=launcher, np=processes)
        if proc.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
            tail = (proc.stdout[-1500:] + proc.stderr[-1500:]).strip()
            return f"{arch} with W={workers} did not finish (exit {proc.returncode}): {tail}"
        return records[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("equivalence"))


def relative_difference(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


PAIRS = [
    pytest.param(workers, first, second, id=f"W{workers}-{first}-{second}")
    for workers, archs in ARCHS_BY_WORKERS.items()
    for first, second in itertools.combinations(archs, 2)
]


@pytest.mark.parametrize("workers,first,second", PAIRS)
def test_architectures_end_with_the_same_parameters_and_loss(runs, workers, first, second):
    a, b = runs.record(first, workers), runs.record(second, workers)
    for record in (a, b):
        assert record["config"]["global_batch_size"] == workers * PER_WORKER_BATCH
        assert record["config"]["steps_run"] == 50
        assert record["config"]["seed"] == int(SEED)
    for key in ("param_norm", "final_loss"):
        x, y = a["result"][key], b["result"][key]
        assert relative_difference(x, y) <= RELATIVE_TOLERANCE, (
            f"{key}: {first} {x!r} vs {second} {y!r} "
            f"(relative difference {relative_difference(x, y):.2e})"
        )


def test_the_tolerance_tells_different_training_runs_apart(runs):
    """A different global batch (W = 2 vs W = 3, same seed) ends far outside the tolerance, so
    agreement within it means the same computation, not merely similar training."""
    two, three = runs.record("single", 2), runs.record("single", 3)
    for key in ("param_norm", "final_loss"):
        difference = relative_difference(two["result"][key], three["result"][key])
        assert difference > 10 * RELATIVE_TOLERANCE, f"{key}: {difference:.2e}"


def test_p2p_schedules_agree_bit_for_bit_and_measured_bytes_match_the_shard_plan(runs):
    staggered, naive = runs.record("p2p", 3), runs.record("p2p-naive", 3)
    assert staggered["config"]["p2p_schedule"] == staggered["comm"]["p2p_schedule"] == "staggered"
    assert naive["config"]["p2p_schedule"] == naive["comm"]["p2p_schedule"] == "naive"
    # Owners sum contributions in rank order whatever the arrival order: the same bits.
    digests = staggered["result"]["param_digest_per_rank"]
    assert len(digests) == 3 and len(set(digests)) == 1
    assert naive["result"]["param_digest_per_rank"] == digests
    for record in (staggered, naive):
        comm = record["comm"]
        plan = ShardPlan(record["model_stats"]["params"], 3)
        assert comm["shard_plan"] == plan.as_record()
        assert comm["bytes_sent_per_step_per_rank"] == [
            plan.bytes_sent_per_step(r) for r in range(3)
        ]
        assert comm["bytes_received_per_step_per_rank"] == [
            plan.bytes_received_per_step(r) for r in range(3)
        ]
        # (W-1)/W of the gradient bytes + (W-1)/W of the parameter bytes, up to the few bytes
        # of one element per phase by which the uneven split differs
        analytic = 2 * (3 - 1) / 3 * record["model_stats"]["param_bytes"]
        assert abs(comm["bytes_sent_per_step"] - analytic) <= 2 * 4
        assert comm["bytes_total"] == comm["bytes_sent_per_step"] * record["config"]["steps_run"]
