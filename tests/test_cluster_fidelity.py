"""What the emulated cluster promised and what happened, measured in real runs on the session's
cluster: the wire bytes of the ring's allreduce and the algorithm the record names, durations
in virtual time, and the report's fidelity check on a faithful and a deliberately oversubscribed
run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cluster_fixture import EmulatedCluster, emulated_cluster, run_launcher
from record_files import read_records, write_records

from archbench.analysis.fidelity import (
    CORES,
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


def test_fidelity_check_meters_a_crowded_node_and_judges_every_run_against_the_measured_noise(
    emulated_cluster: EmulatedCluster, tmp_path: Path
) -> None:
    out = tmp_path / "fidelity.jsonl"
    node1, node2, node3 = emulated_cluster.nodes[:3]
    # Compute windows of several crowded cnn passes (the default ten CFS periods can hold just
    # one, which meters no share of a core), in every run alike.
    common = ["--model", "cnn", "--batch-size", "32", "--steps", "64", "--probe-every", "3",
              "--threads", "1", "--eval-samples", "200", "--compute-window-ms", "200"]  # fmt: skip

    def p2p(hosts: str, ranks: int, run_id: str) -> list[str]:
        return _mpirun(hosts, ranks, "--arch", "p2p", "--run-id", run_id, *common)

    # Two ways a user crowds an emulated cluster, between the engine's one-worker runs (its
    # baseline, run between the others as a study's blocked order runs them, so their spread
    # holds the machine's noise over the test; five of them, as Student's t with three (4.3)
    # widens the interval past a 1.5x drift on a busy machine):
    # - crowded-node: eight ranks on one node of four virtual cores. The node's cap holds its
    #   threads to four virtual cores together, so each rank computes on about half of one,
    #   on any machine (a host of four cores would do the same), as the meter must show.
    # - crowded-machine: twelve ranks on the three nodes (four each, within every node's
    #   virtual cores) want 12/D of a core, where D was chosen for one busy thread per node
    #   filling half the machine: the machine cannot give every node its virtual cores, which
    #   the machine-side check names whatever the noise; how far the compute drifts then
    #   depends on what else the machine runs (1.13-2.1x measured), so only the meters are held.
    order = {
        "base-1": p2p(node1, 1, "base-1"),
        "uncrowded": p2p(f"{node1},{node2},{node3}", 3, "uncrowded"),
        "base-2": p2p(node2, 1, "base-2"),
        "crowded-node": p2p(f"{node1}:8", 8, "crowded-node"),
        "base-3": p2p(node3, 1, "base-3"),
        "crowded-machine": p2p(f"{node1}:4,{node2}:4,{node3}:4", 12, "crowded-machine"),
        "base-4": p2p(node1, 1, "base-4"),
        "base-5": p2p(node2, 1, "base-5"),
    }
    for name, command in order.items():
        result = _launch_to(command, tmp_path / f"{name}.jsonl")
        assert result.returncode == 0, (name, result.stderr[-3000:])
    write_records(out, [rec for name in order for rec in read_records(tmp_path / f"{name}.jsonl")])
    records = {record["run_id"]: record for record in read_records(out)}
    assert records["base-1"]["cluster"]["dilation"] >= 1
    assert records["base-2"]["cluster"]["hosts"] == [node2]

    study = load_study(out)
    table = drift_table(study.ok).set_index("run_id")
    assert set(table.index) == {"uncrowded", "crowded-node", "crowded-machine"}, table
    assert table["judged"].all() and (table["baseline_runs"] == 5).all(), table
    node, machine = table.loc["crowded-node"], table.loc["crowded-machine"]
    uncrowded = table.loc["uncrowded"]
    # The meters see both as less of a virtual core while computing (a process's threads are
    # capped at one virtual core together; a meter that counted another busy thread of the
    # process would read about 2), and the machine-side check names the crowded machine.
    for crowded in (node, machine):
        assert crowded["core_share"] < 0.8 * crowded["baseline_core_share"], table
    assert "crowded-machine" in set(oversubscribed(study.ok)["run_id"])
    # The crowded node's eight processes, each capped at one virtual core, want twice the node's
    # four: the verdict flags it for its cores from its placement, whatever its compute time and
    # its meters did. (By the meters alone it would be flagged where the baselines' noise leaves
    # a halved share outside it: their log compute's standard deviation 0.07-0.21 in three runs
    # here, but 0.30 in one CI run, which hid 0.42 of a core.) The crowded machine's nodes hold
    # four each, within their cores: its shortfall is judged like every run's, below.
    assert node["short_of_cores"] and node["flagged"], table
    assert node["crowded_node"] == f"{node1} holds 8 processes of 1 virtual core each on its 4"
    assert machine["crowded_node"] == "" and uncrowded["crowded_node"] == "", table
    assert CORES in [part for part, _ in drift_causes(node)], table
    (note,) = [line for line in fidelity_notes(study.ok) if line.startswith("Fidelity")]
    assert "`crowded-node`" in note and "a node crowded past its virtual cores" in note, note
    # The same ranks one to a node get the cores the dilation promised. (Its compute time is
    # judged against the baselines' noise like every run's, below, so it is not asserted here:
    # a 95% interval leaves a faithful run outside it one time in twenty.)
    assert not uncrowded["short_of_cores"], table
    # Every verdict is the measured noise's: flagged exactly where the compute lies outside it
    # or a worker's shortfall of a core alone would take it there, or a node is crowded.
    for _, row in table.iterrows():
        outside = abs(math.log(row["median_ratio"])) > math.log1p(row["tolerance"])
        short = row["lowest_core_share"] < row["core_share_floor"] or bool(row["crowded_node"])
        assert bool(row["flagged"]) == (outside or short), table
    for record in records.values():
        shares = record["timing"]["compute_core_share_per_rank"]
        assert all(0 < share <= 1.3 for share in shares), (record["run_id"], shares)
