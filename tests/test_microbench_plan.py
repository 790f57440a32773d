"""What `archbench microbench` measures: the jobs it plans, and for a study only what the
performance model prices that study's runs with."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from archbench.common.hosts import HostSlots
from archbench.perfmodel.measure.microbench import plan_jobs, study_benches
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import load_spec
from archbench.sweep.target import ClusterTarget

DILATED = {"emulated": True, "dilation": 6.0, "vcpus_per_node": 4, "vcpus_per_process": 1}
REAL = {"emulated": False, "dilation": None, "vcpus_per_node": None, "vcpus_per_process": None}
NODES = ClusterTarget("emulated", tuple(HostSlots(f"node{k}", 5) for k in range(1, 6)), "1gbit")


def _runs(tmp_path: Path, fixed: str, factors: str):
    spec = tmp_path / "study.yaml"
    spec.write_text(
        "study: s\ncluster: {kind: emulated, nodes: 5, slots: 5}\n"
        f"fixed: {{dataset: fashion_mnist, batch_size: 32, steps: 20, {fixed}}}\n"
        f"factors: {{{factors}}}\n"
    )
    return build_plan(load_spec(spec), NODES).runs


def test_the_demo_is_calibrated_for_what_its_runs_are_priced_with(tmp_path: Path) -> None:
    runs = build_plan(load_spec(Path("runs/demo.yaml")), NODES).runs
    benches, why = study_benches(runs, DILATED)
    # ring runs across hosts (Horovod's call cost per ring size) and PS runs (the server's
    # costs); compute is the fit's from its single runs, each process a virtual core of its own
    assert benches.split(",") == ["pt2pt", "horovod", "ps"]
    assert "compute" in why and "allreduce" in why
    # the same runs where processes on one host share its real cores: compute is measured
    assert study_benches(runs, REAL)[0].split(",") == ["pt2pt", "horovod", "ps", "compute"]


@pytest.mark.parametrize("fixed, factors, wanted", [
    # no ring and no server: the ping-pong alone
    ("model: mlp", "arch: [single, p2p], workers: [2]", ["pt2pt"]),
    # a model the study never runs alone: its compute must come from the calibration
    ("model: mlp", "arch: [ring], workers: [2]", ["pt2pt", "horovod", "compute"]),
    # a host crowded past its virtual cores (a server beside four workers on one node)
    ("model: mlp, placement: one-host", "arch: [single, ps], workers: [4]",
     ["pt2pt", "ps", "compute"]),
])  # fmt: skip
def test_a_study_gets_the_measurements_its_runs_need(tmp_path: Path, fixed, factors, wanted):
    runs = _runs(tmp_path, fixed, factors)
    assert study_benches(runs, DILATED)[0].split(",") == wanted


def _args(**settings) -> argparse.Namespace:
    base = dict(seconds_per_size=0.3, allreduce_algorithms="ring", compute_sharing="1,3",
                models="mlp", batch_sizes="32", dataset="fashion_mnist", compute_steps=20,
                threads=1)  # fmt: skip
    return argparse.Namespace(**{**base, **settings})


def test_without_mpis_own_allreduce_the_ping_pong_runs_on_two_hosts_and_the_server_once() -> None:
    hosts = [HostSlots(f"node{k}", 1) for k in range(1, 6)]
    jobs = plan_jobs(hosts, {"pt2pt", "ps"}, [8, 1024], _args())
    mpi = [(scope, [h for h, _ in blocks], program) for kind, scope, blocks, program in jobs
           if kind == "mpi"]  # fmt: skip
    assert [(scope, hosts_of) for scope, hosts_of, _ in mpi] == [
        ("intra", ["node1"]),
        ("inter", ["node1", "node2"]),
    ]
    assert all("--no-allreduce" in program for _, _, program in mpi)
    # the server's costs are its own CPU's: timed once, between two hosts
    assert [(scope, [h for h, _ in blocks]) for kind, scope, blocks, _ in jobs if kind == "ps"] == [
        ("inter", ["node1", "node2"])
    ]
    # with MPI's allreduce asked for, every host takes part
    everything = plan_jobs(hosts, {"pt2pt", "allreduce"}, [8], _args())
    (inter,) = [blocks for kind, scope, blocks, _ in everything if scope == "inter"]
    assert len(inter) == 5 and all("--no-allreduce" not in p for *_, p in everything)
    # one host: the server within it
    (alone,) = [s for k, s, _, _ in plan_jobs(hosts[:1], {"ps"}, [8], _args()) if k == "ps"]
    assert alone == "intra"
