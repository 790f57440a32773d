"""What the emulated cluster promised and what happened, measured in real runs on the session's
cluster: the wire bytes of the ring's allreduce and the algorithm the record names, durations
in virtual time, and the report's fidelity check on a faithful and a deliberately oversubscribed
run."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cluster_fixture import EmulatedCluster, emulated_cluster, run_launcher
from record_files import read_records, write_records

from archbench.analysis.fidelity import (
    CORES,
    COST,
    DRIFT_LIMIT,
    drift_causes,
    drift_table,
    fidelity_notes,
    oversubscribed,
)
from archbench.analysis.load import load_study

__all__ = ["emulated_cluster"]  # the session fixture

TRAIN = ["python", "-m", "archbench.train"]


def _launch_to(command: list[str], out: Path):
    return run_launcher([*command, "--out", str(out)], timeout_s=300)


def _mpirun(hosts: str, ranks: int, *args: str) -> list[str]:
    return ["mpirun", "-np", str(ranks), "--host", hosts, "--map-by", "slot", *TRAIN, *args]


@pytest.mark.parametrize(
    "launcher, algorithm, expected",
    [("mpirun", "ring", "mpi:ring"), ("horovodrun-gloo", "ring", "gloo:ring")],
)
def test_ring_moves_the_bytes_of_a_ring_and_records_the_algorithm(
    emulated_cluster: EmulatedCluster, tmp_path: Path, launcher: str, algorithm: str, expected: str
) -> None:
    nodes = emulated_cluster.nodes[:3]
    out = tmp_path / "ring.jsonl"
    args = ["--arch", "ring", "--model", "mlp", "--steps", "40", "--eval-samples", "200",
            "--allreduce-algorithm", algorithm, "--out", str(out)]  # fmt: skip
    if launcher == "mpirun":
        command = _mpirun(",".join(nodes), 3, *args)
    else:
        hosts = ",".join(f"{node}:1" for node in nodes)
        command = ["horovodrun", "--gloo", "-np", "3", "-H", hosts, *TRAIN, *args]
    result = run_launcher(command, timeout_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = read_records(out)
    assert record["comm"]["allreduce_algorithm"] == expected
    assert record["config"]["allreduce_algorithm"] == algorithm
    # Every node sends 2(W-1)/W of the gradient bytes per step, measured on its link: all nodes
    # alike (a reduce-then-broadcast would send twice as much from its root), and no less than
    # the ring's share. TCP/IP headers, ACKs and Horovod's per-cycle negotiation add a constant
    # per step, up to about a fifth of this small model's 0.54 MB.
    ring_bytes = 2 * 2 / 3 * record["model_stats"]["param_bytes"]
    sent = [node["wire_bytes_sent_per_step"] for node in record["fidelity"]["nodes"].values()]
    assert len(sent) == 3
    assert all(0.95 * ring_bytes < value < 1.25 * ring_bytes for value in sent), (sent, ring_bytes)
    assert max(sent) / min(sent) < 1.1, sent
    _check_virtual_time(record)
    # Horovod's background thread (and the MPI library's) run on virtual cores of their own,
    # outside the rank's: on every node such threads exist and carried CPU time (the ring's
    # reductions and copies), which a host would run on a core the compute does not use.
    if record["fidelity"]["dilation"] is not None:
        for node in record["fidelity"]["nodes"].values():
            assert node["background_threads"] >= 1, node
            assert node["background_cpu_s"] > 0, node


def _check_virtual_time(record: dict) -> None:
    """On a dilated cluster every duration is real / D and every rate real x D; the real ones
    stay under fidelity.real."""
    dilation = record["fidelity"]["dilation"]
    if dilation is None:
        pytest.skip("the session's cluster runs without dilation (--dilation off)")
    assert dilation >= 1 and record["cluster"]["dilation"] == dilation
    real, virtual = record["fidelity"]["real"]["timing"], record["timing"]
    for key in ("wall_s", "train_s", "step_s_median", "compute_s_median", "comm_s_median",
                "warmup_s", "epoch_s"):  # fmt: skip
        assert virtual[key] == pytest.approx(real[key] / dilation), key
    assert virtual["samples_per_s"] == pytest.approx(real["samples_per_s"] * dilation)
    assert virtual["epochs"][-1]["train_s"] == pytest.approx(
        real["epochs"][-1]["train_s"] / dilation
    )
    assert virtual["timed_steps"] == real["timed_steps"]
    # virtual cores used while computing: a ratio of CPU to virtual time, not a duration
    assert virtual["compute_core_share_per_rank"] == real["compute_core_share_per_rank"]
    assert record["fidelity"]["window_s"] == pytest.approx(
        record["fidelity"]["window_real_s"] / dilation
    )
    # The link in the record is the virtual one; tc shaped it to B / D.
    assert record["fidelity"]["link"] == record["cluster"]["link"]


def test_library_default_is_recorded_as_such(
    emulated_cluster: EmulatedCluster, tmp_path: Path
) -> None:
    out = tmp_path / "default.jsonl"
    result = run_launcher(
        _mpirun(",".join(emulated_cluster.nodes[:2]), 2, "--arch", "ring", "--model", "mlp",
                "--steps", "10", "--eval-samples", "200", "--allreduce-algorithm", "default",
                "--out", str(out)),
        timeout_s=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = read_records(out)
    assert record["comm"]["allreduce_algorithm"] == "mpi:default"


def test_fidelity_check_flags_an_oversubscribed_run_and_tells_it_from_a_faithful_one(
    emulated_cluster: EmulatedCluster, tmp_path: Path
) -> None:
    out = tmp_path / "fidelity.jsonl"
    node1, node2, node3 = emulated_cluster.nodes[:3]
    # Compute windows of several crowded cnn passes (the default ten CFS periods can hold just
    # one, which meters no share of a core), in every run alike.
    common = ["--model", "cnn", "--batch-size", "32", "--steps", "64", "--probe-every", "3",
              "--threads", "1", "--eval-samples", "200", "--compute-window-ms", "200"]  # fmt: skip
    # D was chosen for one busy thread per node, filling half the machine's cores. Twelve
    # ranks on the three nodes (four each, within a node's four virtual cores) want 12/D of a
    # core, half again what the machine has: each thread gets less than its cap and waits for a
    # core.
    crowd = f"{node1}:4,{node2}:4,{node3}:4"

    def single(node: str, run_id: str) -> list[str]:
        return _mpirun(node, 1, "--arch", "single", "--run-id", run_id, *common)

    # The two single runs on equal nodes run at the same time, within the machine's cores, so
    # the host's own speed (shared with other machines) changes both alike and their drift is
    # the emulator's.
    pairs = {
        "baseline": single(node1, "baseline"),
        "faithful": single(node2, "faithful"),
    }
    crowded = {
        "oversubscribed": _mpirun(crowd, 12, "--arch", "p2p", "--run-id", "oversubscribed", *common)
    }
    for runs in (pairs, crowded):  # the runs of a group at once, the groups one after the other
        outs = [tmp_path / f"{name}.jsonl" for name in runs]
        with ThreadPoolExecutor(len(runs)) as pool:
            results = list(pool.map(_launch_to, runs.values(), outs))
        for name, result in zip(runs, results):
            assert result.returncode == 0, (name, result.stderr[-3000:])
    every_run = [*pairs, *crowded]
    write_records(
        out, [rec for name in every_run for rec in read_records(tmp_path / f"{name}.jsonl")]
    )
    records = {record["run_id"]: record for record in read_records(out)}
    assert records["baseline"]["cluster"]["dilation"] >= 1
    assert records["baseline"]["cluster"]["hosts"] == [node1]
    assert records["faithful"]["cluster"]["hosts"] == [node2]

    study = load_study(out)
    table = drift_table(study.ok).set_index("run_id")
    # Two thirds of a virtual core per rank makes the compute half again as long. Two runs on
    # equal nodes differ only by noise, which on a busy machine is large, so the check must
    # rank the oversubscribed run above both and over the limit, not clear the others.
    drift = table["drift"]
    assert drift["oversubscribed"] > 2 * DRIFT_LIMIT, table
    assert drift["oversubscribed"] > max(drift["faithful"], drift["baseline"]), table
    # The machine's side of the check: the crowded run's threads waited for a core.
    assert "oversubscribed" in set(oversubscribed(study.ok)["run_id"])
    # And the parts of its drift, metered: crowding shows as less of a virtual core while
    # computing, or as more CPU a pass (twelve threads taking turns on two cores also empty
    # each other's caches): in one clean-clone CI its worst worker had 1.05 virtual cores
    # against the baseline's 0.99, and its drift was all CPU a pass. Either way the check names the part that moved (none where the
    # meters read nothing). A process's threads are capped at one virtual core
    # together; CFS hands runtime out per CPU in slices, and capped processes measured up to
    # 1.15 of it in a window. A meter that counted another busy thread of the process would
    # read about 2.
    assert not math.isnan(table.loc["oversubscribed", "core_share"]), table
    causes = [part for part, _ in drift_causes(table.loc["oversubscribed"])]
    assert set(causes) & {CORES, COST}, table
    for record in records.values():
        shares = record["timing"]["compute_core_share_per_rank"]
        assert all(0 < share <= 1.3 for share in shares), (record["run_id"], shares)
    (note,) = [line for line in fidelity_notes(study.ok) if line.startswith("Fidelity")]
    assert "`oversubscribed`" in note
    assert note.index("`oversubscribed`") < min(
        (note.index(name) for name in ("`faithful`", "`baseline`") if name in note),
        default=len(note),
    )  # named first: the note orders runs by drift
