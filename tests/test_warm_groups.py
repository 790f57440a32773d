"""Warm groups: runs that share a process layout share one launch, and give up nothing for it.

Equivalence (real mpirun, real Horovod, mpi4py and gRPC servers): a group of two runs, A then B,
where A trains something else (another seed, learning rate and momentum); B ends with exactly the
parameters of B run cold (`result.param_digest_per_rank`, bit for bit) for ring, p2p and
synchronous ps, and the warm Bs of every architecture, with `single` at batch W*b, agree as the
sync equivalence suite says (1e-4 relative).

Faults (real sweeps): in one warm group a run that diverges, a run that exceeds its timeout, a
rank killed with SIGKILL mid-run, and a driver killed mid-group then resumed: each such run is
recorded as a cold run would be, no run is lost or recorded twice, the group's remaining runs
finish in a fresh launch, and no process is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_fixture import launcher_env
from conftest import REPO, launcher_prefix
from record_files import read_records
from test_sweep_runs import (
    kill_driver_then_resume,
    no_leftovers,  # noqa: F401  (a fixture: fails a test that leaves a process behind)
    processes_mentioning,
    results,
    sweep,
    sweep_env,
    write_spec,
)

from archbench.record import missing_keys
from archbench.runtime.phases import PHASES

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

COMMON = ["--model", "mlp", "--dataset", "fashion_mnist", "--steps", "30", "--eval-samples", "500"]
B = ["--seed", "7", "--lr", "0.05"]
A = ["--seed", "3", "--lr", "0.2", "--momentum", "0.5"]  # trains something else first
PER_WORKER_BATCH = 32
# arch -> (its flags, processes); single trains the global batch of 2 workers
ARCHS = {
    "ring": (["--arch", "ring", "--batch-size", str(PER_WORKER_BATCH)], 2),
    "p2p": (["--arch", "p2p", "--batch-size", str(PER_WORKER_BATCH)], 2),
    "ps": (["--arch", "ps", "--num-ps", "1", "--sync", "--batch-size", str(PER_WORKER_BATCH)], 3),
    "single": (["--arch", "single", "--batch-size", str(2 * PER_WORKER_BATCH)], 1),
}
RELATIVE_TOLERANCE = 1e-4


def launch(words: list[str], processes: int, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m archbench.train WORDS` on `processes` ranks under mpirun (one: plain)."""
    prefix = launcher_prefix("mpirun", processes) if processes > 1 else []
    command = [*prefix, sys.executable, "-m", "archbench.train", *words]
    return subprocess.run(
        command, cwd=REPO, env=launcher_env(), capture_output=True, text=True, timeout=timeout
    )


def only_record(path: Path) -> dict:
    records = read_records(path)
    assert len(records) == 1, f"{path}: {len(records)} records"
    return records[0]


class Pairs:
    """Per architecture, once: the warm group [A, B] and B cold; their records."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.done: dict[str, dict[str, dict]] = {}

    def records(self, arch: str) -> dict[str, dict]:
        if arch not in self.done:
            self.done[arch] = self._run(arch)
        return self.done[arch]

    def _run(self, arch: str) -> dict[str, dict]:
        flags, processes = ARCHS[arch]
        out = {name: self.folder / f"{arch}-{name}.jsonl" for name in ("a", "b", "cold")}
        runs = [
            {"run_id": f"{arch}-{name}", "argv": [*flags, *COMMON, *extra, "--out", str(out[name]),
                                                 "--run-id", f"{arch}-{name}"]}
            for name, extra in (("a", A), ("b", B))
        ]  # fmt: skip
        runs_file = self.folder / f"{arch}-group.json"
        runs_file.write_text(json.dumps({"group": f"test-{arch}", "runs": runs}))
        warm = launch(["--runs-file", str(runs_file)], processes)
        assert warm.returncode == 0, warm.stdout[-2000:] + warm.stderr[-2000:]
        cold_words = [*flags, *COMMON, *B, "--out", str(out["cold"]), "--run-id", f"{arch}-b"]
        cold = launch(cold_words, processes)
        assert cold.returncode == 0, cold.stdout[-2000:] + cold.stderr[-2000:]
        return {name: only_record(path) for name, path in out.items()}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Pairs:
    return Pairs(tmp_path_factory.mktemp("warm"))


@pytest.mark.parametrize("arch", ["ring", "p2p", "ps"])
def test_a_warm_run_ends_with_the_cold_runs_parameters_bit_for_bit(pairs, arch):
    records = pairs.records(arch)
    a, warm, cold = records["a"], records["b"], records["cold"]
    for record in (a, warm, cold):
        assert record["status"] == "ok", record.get("error")
        assert missing_keys(record) == []
    digests = warm["result"]["param_digest_per_rank"]
    assert any(digests), digests
    assert digests == cold["result"]["param_digest_per_rank"]
    for key in ("param_norm", "final_loss", "test_accuracy"):
        assert warm["result"][key] == cold["result"][key], key
    # A trained something else in the same processes just before
    assert a["result"]["param_digest_per_rank"] != digests
    assert {key: value for key, value in a["launch"].items() if key != "phases_s"} == {
        "warm": True, "group": f"test-{arch}", "position": 1, "group_size": 2,
        "group_startup_s": None,  # the runs file names no launch time
    }  # fmt: skip
    assert warm["launch"]["warm"] is True and warm["launch"]["position"] == 2
    assert cold["launch"]["warm"] is False and cold["launch"]["group_size"] == 1


def test_the_sync_equivalence_holds_warm(pairs):
    warm = {arch: pairs.records(arch)["b"] for arch in ARCHS}
    for record in warm.values():
        assert record["status"] == "ok", record.get("error")
        assert record["config"]["global_batch_size"] == 2 * PER_WORKER_BATCH
        assert record["launch"]["position"] == 2
    reference = warm["single"]["result"]
    for arch in ("ring", "p2p", "ps"):
        for key in ("param_norm", "final_loss"):
            x, y = warm[arch]["result"][key], reference[key]
            assert abs(x - y) / max(abs(x), abs(y)) <= RELATIVE_TOLERANCE, (arch, key, x, y)


# ------------------------------------------------------------------------------- sweeps

FAULTS = """
    study: warmfaults
    order: design
    timeout_s: 180
    timeouts:
      - when: {steps: 1000000}
        timeout_s: 15
    cluster: {kind: localhost, slots: 2}
    fixed: {arch: p2p, workers: 2, model: charlm, dataset: text, seq_len: 16, eval_samples: 50}
    factors:
      lr: [0.01, 1000000.0, 0.03]
      steps: [40, 1000000]
      momentum: [0.9, 0.5]
      batch_size: [32, 64]
    design:
      one_at_a_time:
        base: {lr: 0.01, steps: 40, momentum: 0.9, batch_size: 32}
    """


def by_config(records: list[dict], **want) -> dict:
    (match,) = [
        r for r in records if all(r["sweep"]["config"].get(k) == v for k, v in want.items())
    ]
    return match


@pytest.mark.usefixtures("no_leftovers")
def test_a_diverging_run_and_a_timeout_end_their_launch_and_the_group_goes_on(tmp_path):
    spec = write_spec(tmp_path, "warmfaults", FAULTS)
    study = tmp_path / "warmfaults"
    proc = sweep(spec)
    assert proc.returncode == 0, proc.stderr
    assert "6 to run in 1 launch(es) (warm" in proc.stderr
    records = results(study)
    assert len(records) == 6 and len({r["run_id"] for r in records}) == 6, proc.stderr
    base = by_config(records, lr=0.01, steps=40, momentum=0.9, batch_size=32)
    diverged = by_config(records, lr=1000000.0)
    after_divergence = by_config(records, lr=0.03)
    hang = by_config(records, steps=1000000)
    after_hang = by_config(records, momentum=0.5)
    last = by_config(records, batch_size=64)

    for record in (base, after_divergence, after_hang, last):
        assert record["status"] == "ok", record.get("error")
        assert record["launch"]["warm"] is True
    assert diverged["status"] == "failed"
    assert diverged["error"]["type"] == "Diverged"
    assert hang["status"] == "timeout" and hang["sweep"]["timed_out"] is True
    assert hang["error"]["type"] == "Timeout"
    for record in records:
        assert missing_keys(record) == [], missing_keys(record)
        assert record["sweep"]["attempt"] == 1
        assert Path(record["sweep"]["log"]).exists()
    # the design's order: base and the diverging run share the first launch; each failure
    # ended its launch, and the runs after it went on in a fresh one
    launches = [(base, diverged), (after_divergence, hang), (after_hang, last)]
    for first, second in launches:
        assert first["sweep"]["warm_group"] == second["sweep"]["warm_group"]
        assert (first["launch"]["position"], second["launch"]["position"]) == (1, 2)
    assert len({first["sweep"]["warm_group"] for first, _ in launches}) == 3
    # each launch was given the runs still to run: 6, then 4, then 2
    assert [first["launch"]["group_size"] for first, _ in launches] == [6, 4, 2]
    assert "% training" in proc.stderr
    assert processes_mentioning(str(study)) == []


KILL_A_RANK = """
    study: warmkill
    order: design
    timeout_s: 180
    cluster: {kind: localhost, slots: 2}
    fixed: {arch: p2p, workers: 2, model: mlp, dataset: fashion_mnist, batch_size: 32,
            eval_samples: 300, steps: 600}
    factors:
      lr: [0.01, 0.02, 0.03, 0.04]
    """


def rank_pids(study: Path) -> list[int]:
    """The training ranks of the study's warm launch (not mpirun, not the shell)."""
    pids = []
    for line in processes_mentioning(str(study / "groups")):
        pid, words = line.split(":", 1)
        if "archbench.train" in words and "mpirun" not in words:
            pids.append(int(pid))
    return pids


def start_driver(spec: Path, log_path: Path) -> subprocess.Popen:
    log = open(log_path, "wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
            cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    finally:
        log.close()


def wait_for_second_run(study: Path, driver: subprocess.Popen, log_path: Path) -> None:
    """Until the first run is recorded while the launch's ranks are still up (in the second)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if len(results(study)) >= 1 and rank_pids(study):
            return
        assert driver.poll() is None, log_path.read_text()
        time.sleep(0.05)
    pytest.fail("the sweep never got to its second run")


@pytest.mark.usefixtures("no_leftovers")
def test_a_rank_killed_mid_run_fails_that_run_and_the_rest_of_the_group_runs(tmp_path):
    spec = write_spec(tmp_path, "warmkill", KILL_A_RANK)
    study = tmp_path / "warmkill"
    log_path = tmp_path / "driver.log"
    driver = start_driver(spec, log_path)
    try:
        wait_for_second_run(study, driver, log_path)
        os.kill(rank_pids(study)[-1], signal.SIGKILL)
        driver.wait(timeout=400)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 0, log_path.read_text()
    records = results(study)
    assert len(records) == 4 and len({r["run_id"] for r in records}) == 4
    first, killed, third, fourth = (by_config(records, lr=lr) for lr in (0.01, 0.02, 0.03, 0.04))
    for record in (first, third, fourth):
        assert record["status"] == "ok", record["error"]
    assert killed["status"] == "failed" and killed["error"]["type"], killed["error"]
    assert first["sweep"]["warm_group"] == killed["sweep"]["warm_group"]
    assert (first["launch"]["position"], killed["launch"]["position"]) == (1, 2)
    # the rest of the group went on in a fresh launch
    assert third["sweep"]["warm_group"] == fourth["sweep"]["warm_group"]
    assert third["sweep"]["warm_group"] != killed["sweep"]["warm_group"]
    assert (third["launch"]["position"], fourth["launch"]["position"]) == (1, 2)
    assert processes_mentioning(str(study)) == []


KILLED_DRIVER = """
    study: warmresume
    order: design
    timeout_s: 180
    cluster: {kind: localhost, slots: 2}
    fixed: {arch: single, model: mlp, dataset: fashion_mnist, steps: 300, batch_size: 32,
            eval_samples: 300}
    factors:
      lr: [0.01, 0.02, 0.03, 0.04]
    """


@pytest.mark.usefixtures("no_leftovers")
def test_a_driver_killed_mid_group_resumes_with_nothing_lost_or_run_twice(tmp_path):
    spec = write_spec(tmp_path, "warmresume", KILLED_DRIVER)
    study = tmp_path / "warmresume"

    def under_way() -> bool:
        return len(results(study)) >= 1 and bool(processes_mentioning(str(study / "groups")))

    records = kill_driver_then_resume(
        spec, study, tmp_path / "driver.log", under_way, [0.01, 0.02, 0.03, 0.04]
    )
    # the runs after the kill ran in a launch of the resumed sweep
    assert len({r["sweep"].get("warm_group") or r["run_id"] for r in records}) >= 2


WARM_AND_COLD = """
    study: %(name)s
    seed: 4
    repetitions: 2
    timeout_s: 180
    cluster: {kind: localhost, slots: 2}
    fixed: {arch: p2p, workers: 2, model: mlp, dataset: fashion_mnist, steps: 30, batch_size: 32,
            eval_samples: 300}
    factors:
      lr: [0.02, 0.05]
    """


@pytest.mark.usefixtures("no_leftovers")
def test_a_warm_study_and_a_cold_one_keep_the_same_records(tmp_path):
    warm_spec = write_spec(tmp_path, "warmstudy", WARM_AND_COLD % {"name": "warmstudy"})
    cold_spec = write_spec(tmp_path, "coldstudy", WARM_AND_COLD % {"name": "coldstudy"})
    warm = sweep(warm_spec)
    cold = sweep(cold_spec, "--cold")
    assert warm.returncode == 0 and cold.returncode == 0, warm.stderr + cold.stderr
    assert "4 to run in 1 launch(es) (warm" in warm.stderr
    assert "4 to run in 4 launch(es) (cold)" in cold.stderr
    assert "in 1 launch(es), trained" in warm.stderr and "% training" in cold.stderr
    warm_records = {
        (r["config"]["lr"], r["config"]["seed"]): r for r in results(tmp_path / "warmstudy")
    }
    cold_records = {
        (r["config"]["lr"], r["config"]["seed"]): r for r in results(tmp_path / "coldstudy")
    }
    assert sorted(warm_records) == sorted(cold_records) and len(warm_records) == 4
    positions = sorted(r["launch"]["position"] for r in warm_records.values())
    assert positions == [1, 2, 3, 4]
    for key, record in warm_records.items():
        twin = cold_records[key]
        assert record["status"] == twin["status"] == "ok"
        assert record["launch"]["warm"] is True and twin["launch"]["warm"] is False
        assert twin["launch"]["group_startup_s"] is not None
        assert record["launch"]["group_startup_s"] is not None
        digests = record["result"]["param_digest_per_rank"]
        assert digests == twin["result"]["param_digest_per_rank"]
        assert record["timing"]["startup_s"] > 0
        for run in (record, twin):  # where the run's wall went, phase by phase
            phases = run["launch"]["phases_s"]
            assert set(phases) == set(PHASES) and min(phases.values()) >= 0
            assert phases["train"] == pytest.approx(run["timing"]["train_s"])
            assert phases["evaluation"] == pytest.approx(run["timing"]["eval_s"])
            assert sum(phases.values()) <= run["timing"]["wall_s"]
