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

`--sync-every` (four more W = 2 runs, compared with the ring and p2p runs above): H = 1 with a
warm-up given is today's synchronous training bit for bit (same parameters, loss and bytes);
H = 4 ends with every rank holding the same averaged parameters, its steps split into local and
averaging steps as the schedule says, and it sends exactly the bytes of its exchanging steps:
about a quarter of H = 1's per step.

Tensor partitioning and priority scheduling (four more W = 2 runs): `--priority off` given
explicitly is today's p2p bit for bit; cut into pieces of 0.05 MB with `--priority on`, p2p and
ps end with the same bits as uncut (every element goes through the same operations), move the
same bytes, and record what was cut; so does p2p's averaging exchange with `--sync-every 4`.
"""

from __future__ import annotations

import itertools
import math
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
STEPS = 50
# --sync-every variants: (architecture, its flags)
SYNC_EVERY = {
    "ring-h1": ("ring", ["--sync-every", "1", "--sync-every-warmup-steps", "3"]),
    "p2p-h1": ("p2p", ["--sync-every", "1", "--sync-every-warmup-steps", "3"]),
    "ring-h4": ("ring", ["--sync-every", "4"]),
    "p2p-h4": ("p2p", ["--sync-every", "4", "--sync-every-warmup-steps", "10"]),
}
# partitioning and priority variants: (architecture or variant above, its extra flags); mlp's
# 784x128 kernel (401,408 bytes) is cut into pieces of at most 52,428 bytes
PIECES = ["--partition-mb", "0.05", "--priority", "on"]
PARTITIONED = {
    "p2p-priority-off": ("p2p", ["--priority", "off"]),
    "p2p-pieces": ("p2p", PIECES),
    "ps-pieces": ("ps", PIECES),
    "p2p-h4-pieces": ("p2p-h4", PIECES),
}


def command_for(arch: str, workers: int) -> tuple[list[str], str | None, int]:
    """(train arguments, launcher, processes) for `arch` with `workers` workers."""
    if arch in PARTITIONED:
        base, flags = PARTITIONED[arch]
        args, launcher, processes = command_for(base, workers)
        return [*args, *flags], launcher, processes
    if arch in SYNC_EVERY:
        base, flags = SYNC_EVERY[arch]
        args, launcher, processes = command_for(base, workers)
        return [*args, *flags], launcher, processes
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


@pytest.mark.parametrize("arch", ["ring", "p2p"])
def test_sync_every_1_is_synchronous_training_bit_for_bit(runs, arch):
    today, explicit = runs.record(arch, 2), runs.record(f"{arch}-h1", 2)
    assert explicit["config"]["sync_every"] == 1
    assert explicit["config"]["sync_every_warmup_steps"] == 3
    for key in ("param_digest_per_rank", "param_norm", "final_loss", "test_accuracy"):
        assert explicit["result"][key] == today["result"][key], key
    comm = explicit["comm"]
    assert comm["steps_by_kind"] == {"sync": STEPS, "local": 0, "average": 0}
    assert comm["exchange_steps"] == STEPS
    for key in ("bytes_sent_per_step", "bytes_received_per_step", "bytes_total"):
        assert comm[key] == today["comm"][key], key
    assert comm["bytes_sent_per_exchange_step"] == today["comm"]["bytes_sent_per_step"]


@pytest.mark.parametrize("arch", ["ring", "p2p"])
def test_sync_every_4_averages_the_models_and_sends_a_quarter_of_the_bytes(runs, arch):
    today, record = runs.record(arch, 2), runs.record(f"{arch}-h4", 2)
    warmup = record["config"]["sync_every_warmup_steps"]
    # after the warm-up, rounds of 4 whose last step averages; the run's last step averages too
    averages = math.ceil((STEPS - warmup) / 4)
    comm = record["comm"]
    assert comm["sync_every"] == 4 and comm["sync_every_warmup_steps"] == warmup
    assert comm["steps_by_kind"] == {
        "sync": warmup,
        "local": STEPS - warmup - averages,
        "average": averages,
    }
    digests = record["result"]["param_digest_per_rank"]
    assert len(digests) == 2 and digests[0] == digests[1], "every rank ends with the average"
    assert digests != today["result"]["param_digest_per_rank"]
    # an averaging exchange moves what a gradient exchange moves (W = 2: the parameter bytes);
    # p2p's first local step after its warm-up also gathers the owners' momentum once (its
    # own shard to the other worker)
    exchange = today["comm"]["bytes_sent_per_step"]
    params = record["model_stats"]["params"]
    gather = ShardPlan(params, 2).shard_bytes(0) if arch == "p2p" and warmup else 0
    total = (warmup + averages) * exchange + gather
    assert comm["bytes_total"] == total
    assert abs(comm["bytes_sent_per_step"] - total / STEPS) <= 1
    assert comm["exchange_steps"] == warmup + averages
    if not warmup:  # 13 exchanges in 50 steps: 1/4 up to the one extra average of the last step
        assert 1 / 4 <= comm["bytes_sent_per_step"] / exchange <= 1 / 4 + 1 / STEPS
    # local and averaging steps timed apart; the throughput from the step over a whole round
    timing = record["timing"]
    by_kind = timing["step_s_median_by_kind"]
    assert set(by_kind) == ({"sync", "local", "average"} if warmup > 5 else {"local", "average"})
    assert min(by_kind.values()) <= timing["step_s_amortized"] <= max(by_kind.values())
    assert timing["samples_per_s"] == pytest.approx(
        record["config"]["global_batch_size"] / timing["step_s_amortized"]
    )
    # local SGD trains: within 25% of synchronous training's loss after 50 steps
    loss, synchronous = record["result"]["final_loss"], today["result"]["final_loss"]
    assert relative_difference(loss, synchronous) < 0.25, (loss, synchronous)


def test_priority_off_is_todays_p2p_bit_for_bit(runs):
    today, explicit = runs.record("p2p", 2), runs.record("p2p-priority-off", 2)
    assert explicit["config"]["priority"] == "off" and explicit["config"]["partition_mb"] is None
    assert today["config"]["priority"] == "off" and today["config"]["partition_mb"] is None
    for key in ("param_digest_per_rank", "param_norm", "final_loss", "test_accuracy"):
        assert explicit["result"][key] == today["result"][key], key
    assert "tensor_partition" not in explicit["comm"]
    assert explicit["comm"]["bytes_total"] == today["comm"]["bytes_total"]


@pytest.mark.parametrize("variant,base", [("p2p-pieces", "p2p"), ("p2p-h4-pieces", "p2p-h4")])
def test_p2p_in_pieces_first_layers_first_ends_with_the_same_bits(runs, variant, base):
    uncut, cut = runs.record(base, 2), runs.record(variant, 2)
    for key in ("param_digest_per_rank", "param_norm", "final_loss", "test_accuracy"):
        assert cut["result"][key] == uncut["result"][key], key
    for key in ("bytes_sent_per_step", "bytes_received_per_step", "bytes_total"):
        assert cut["comm"][key] == uncut["comm"][key], key
    partition = cut["comm"]["tensor_partition"]
    assert partition["partition_bytes"] == int(0.05 * 2**20) and partition["priority"] == "on"
    shard_bytes = ShardPlan(cut["model_stats"]["params"], 2).shard_bytes(0)
    expected = -(-shard_bytes // (partition["partition_bytes"] // 4 * 4))
    assert partition["pieces_per_shard"] == [expected, expected] and expected > 1
    assert partition["exchanges_timed"] == cut["comm"]["exchange_steps"]
    assert 0 < partition["first_update_sent_median_s"] <= partition["done_median_s"]
    assert partition["first_layer_ready_median_s"] <= partition["done_median_s"]


def test_ps_in_pieces_with_ordered_pulls_ends_with_the_same_parameters(runs):
    uncut, cut = runs.record("ps", 2), runs.record("ps-pieces", 2)
    for key in ("param_norm", "final_loss", "test_accuracy"):
        assert cut["result"][key] == uncut["result"][key], key
    assert cut["comm"]["bytes_total"] == uncut["comm"]["bytes_total"]
    partition = cut["comm"]["tensor_partition"]
    # the 784x128 kernel: 512 bytes a row, at most 102 rows a piece -> 8 pieces; the rest whole
    assert partition["pieces_per_variable"] == [8, 1, 1, 1]
    assert partition["piece_count"] == 11 and partition["priority"] == "on"
    assert cut["comm"]["ps"]["sharding"]["partitioned_variables"] == ["hidden/kernel:0"]
    shards = cut["comm"]["ps"]["sharding"]["shards"]
    assert sum(shard["bytes"] for shard in shards) == cut["model_stats"]["param_bytes"]
