"""Slurm on the emulated cluster (`archbench cluster up --slurm`), `archbench submit`, and a study
run inside a Slurm allocation as its users run one (`salloc -N 2 archbench sweep ...`).

The first tests need nothing; the others bring up a 2-node cluster of their own (name
`slurmtest-pytest`, nodes slt1 and slt2) and skip, saying why, when this machine cannot (not
root, Slurm or munge not installed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from record_files import read_records

from archbench.cluster import slurm
from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.state import ClusterState, NodeState, cluster_dir, load_state
from archbench.common.bandwidth import Bandwidth
from archbench.sweep.spec import load_spec
from archbench.sweep.submit import nodes_needed, script_text

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TINY_STUDY = PROJECT_ROOT / "tests" / "data" / "slurm-tiny.yaml"
CLUSTER = "slurmtest-pytest"
PREFIX = "slt"
NODES = ["slt1", "slt2"]


def _state(vcpus: int | None = 1, slots: int = 1) -> ClusterState:
    return ClusterState(
        name="demo",
        status="up",
        bandwidth=Bandwidth.tc_rate("1gbit"),
        prefix="nd",
        slots=slots,
        subnet_index=7,
        subnet="10.213.7.0/24",
        bridge="ab-nd",
        bridge_address="10.213.7.254",
        nodes=[NodeState("nd1", "10.213.7.1", "ab7n1"), NodeState("nd2", "10.213.7.2", "ab7n2")],
        dilation=3.0 if vcpus is not None else None,
        vcpus_per_node=vcpus,
        cfs_period_us=10_000 if vcpus is not None else None,
    )


def test_the_configuration_names_every_node_and_the_controller_on_the_bridge():
    text = slurm.conf_text(_state())
    lines = text.splitlines()
    # slurmctld binds to the address its host name resolves to: the bridge's, not 0.0.0.0
    assert "SlurmctldHost=ndctld(10.213.7.254)" in lines
    assert "CommunicationParameters=NoCtldInAddrAny" in lines
    assert "SlurmdUser=root" in lines
    assert f"SlurmUser={slurm.account('slurm') or 'root'}" in lines
    assert "SlurmctldPort=6907" in lines
    assert "NodeName=nd1 NodeAddr=10.213.7.1 CPUs=1 State=UNKNOWN" in lines
    assert "NodeName=nd2 NodeAddr=10.213.7.2 CPUs=1 State=UNKNOWN" in lines
    assert "PartitionName=demo Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in lines
    for setting in (
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "AuthType=auth/munge",
    ):
        assert setting in lines
    # every file Slurm and munge write is in the cluster's state folder
    folder = str(cluster_dir("demo"))
    paths = [line.split("=", 1)[1] for line in lines if "File=" in line or "Dir=" in line]
    assert paths and all(path.startswith(folder + "/") for path in paths)
    assert f"AuthInfo=socket={folder}/munge/munge.socket" in lines


@pytest.mark.parametrize("vcpus,slots,expected", [(1, 1, 1), (2, 1, 2), (None, 1, 1), (1, 3, 3)])
def test_a_node_gets_its_virtual_cores_and_at_least_its_slots(vcpus, slots, expected):
    assert slurm.node_cpus(_state(vcpus, slots)) == expected


def test_daemons_that_are_not_running_are_named():
    state = _state()
    state.slurm = {"pids": {"munged": 999_999_991, "slurmctld": os.getpid(), "nd1": None}}
    assert slurm.dead_daemons(state) == ["munged", "slurmctld", "slurmd of nd1", "slurmd of nd2"]


def test_every_task_gets_the_nodes_library_and_dilation_variables():
    text = slurm.task_prolog_text(
        {"LD_PRELOAD": "/x/libarchbench-node.so", "ARCHBENCH_IDLE_NAP_US": "300",
         "ARCHBENCH_DILATION": "3"}
    )  # fmt: skip
    assert "echo 'export LD_PRELOAD=/x/libarchbench-node.so'" in text
    assert "echo 'export ARCHBENCH_IDLE_NAP_US=300'" in text
    assert "echo 'export ARCHBENCH_DILATION=3'" in text


def test_the_batch_script_runs_the_sweep_then_the_report(tmp_path):
    shutil.copy(TINY_STUDY, tmp_path / "study.yaml")
    spec = load_spec(str(tmp_path / "study.yaml"))
    assert nodes_needed(spec) == 2  # ring and p2p spread two workers over two nodes
    text = script_text(spec, 2, "debug", "10:00", "/venv/bin/python", tmp_path)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --partition=debug" in lines
    assert "#SBATCH --time=10:00" in lines
    assert f"#SBATCH --output={tmp_path}/slurm-tiny/slurm-%j.out" in lines
    sweep = next(i for i, line in enumerate(lines) if " sweep " in line)
    report = next(i for i, line in enumerate(lines) if " report " in line)
    assert sweep < report and "--cluster slurm" in lines[sweep]
    assert str(tmp_path / "study.yaml") in lines[sweep]


def _archbench(*args: str, env: dict[str, str] | None = None, timeout_s: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )


def _fake_sinfo(folder: Path) -> dict[str, str]:
    path = folder / "sinfo"
    path.write_text("#!/bin/sh\n" + textwrap.dedent("printf 'batch\\ndebug\\n'\n"))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_an_unknown_partition_is_one_line_exit_2_and_nothing_written(tmp_path):
    shutil.copy(TINY_STUDY, tmp_path / "study.yaml")
    tools = tmp_path / "bin"
    tools.mkdir()
    result = _archbench(
        "submit", str(tmp_path / "study.yaml"), "--partition", "gpu", "--dry-run",
        env=_fake_sinfo(tools),
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "archbench submit: error: --partition gpu: Slurm has no such partition (it has: batch, debug)"
    ]
    assert not (tmp_path / "slurm-tiny").exists()
    # a known one is written (and, with --dry-run, not submitted)
    result = _archbench(
        "submit", str(tmp_path / "study.yaml"), "--partition", "debug", "--dry-run",
        env=_fake_sinfo(tools),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "slurm-tiny" / "slurm-tiny.sbatch").read_text() == result.stdout


# --------------------------------------------------------------------- on a live emulated Slurm


def _unavailable() -> str | None:
    return cluster_unavailable_reason() or slurm.unavailable_reason()


def _slurm_env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "SLURM_CONF": str(slurm.conf_path(cluster_dir(CLUSTER))),
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        "PYTHONPATH": str(PROJECT_ROOT),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


@pytest.fixture(scope="module")
def slurm_cluster():
    reason = _unavailable()
    if reason is not None:
        print(f"skipping the live Slurm tests: {reason}")
        pytest.skip(reason)
    _archbench("cluster", "down", "--name", CLUSTER)  # left by a session that was killed
    # Dilated nodes (D auto): a job's tasks get the node library and its caps from the task
    # prolog, as ssh sessions get them from sshd.
    result = _archbench(
        "cluster", "up", "--name", CLUSTER, "--prefix", PREFIX, "--nodes", str(len(NODES)),
        "--slurm",
    )  # fmt: skip
    if result.returncode != 0:
        _archbench("cluster", "down", "--name", CLUSTER)
        pytest.fail(f"cluster up --slurm failed: {result.stderr.strip()}")
    try:
        yield result.stdout
    finally:
        _archbench("cluster", "down", "--name", CLUSTER)


def test_down_after_a_killed_up_stops_the_daemons_it_had_started():
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    name, folder = "slurmtest-killed", cluster_dir("slurmtest-killed")
    _archbench("cluster", "down", "--name", name)
    up = subprocess.Popen(
        [sys.executable, "-m", "archbench.cli", "cluster", "up", "--name", name, "--prefix",
         "slk", "--nodes", "1", "--dilation", "off", "--slurm"],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # killed once slurmctld runs, before `up` has saved the daemons' pids
        _wait(
            lambda: len(slurm.daemon_pids(folder)) >= 2 or up.poll() is not None,
            30, "no daemon", interval_s=0.02,
        )  # fmt: skip
    finally:
        up.kill()
        up.wait()
    try:
        assert slurm.daemon_pids(folder)
        assert load_state(name).status == "starting"  # killed before it was up
    finally:
        result = _archbench("cluster", "down", "--name", name)
    assert result.returncode == 0, result.stderr
    assert slurm.daemon_pids(folder) == [] and not folder.exists()


def test_up_prints_slurm_conf_and_every_node_is_idle(slurm_cluster):
    conf = slurm.conf_path(cluster_dir(CLUSTER))
    assert f"export SLURM_CONF={conf}" in slurm_cluster
    assert slurm.node_states(cluster_dir(CLUSTER)) == {node: "idle" for node in NODES}
    env = _archbench("cluster", "env", "--name", CLUSTER)
    assert env.returncode == 0 and env.stdout.strip() == f"export SLURM_CONF={conf}"
    status = _archbench("cluster", "status", "--name", CLUSTER)
    assert status.returncode == 0, status.stdout
    assert "slurm: partition slurmtest-pytest" in status.stdout and "slt1 idle" in status.stdout


def test_srun_runs_on_the_nodes(slurm_cluster):
    result = subprocess.run(
        ["srun", "-N", "2", "hostname"], capture_output=True, text=True, timeout=60,
        env=_slurm_env(), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == NODES


def test_a_study_runs_inside_an_allocation(slurm_cluster, tmp_path):
    shutil.copy(TINY_STUDY, tmp_path / "study.yaml")
    result = subprocess.run(
        ["salloc", "-N", "2", sys.executable, "-m", "archbench.cli", "sweep",
         str(tmp_path / "study.yaml"), "--cluster", "slurm", "--only", "arch=single",
         "--only", "arch=ring"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=240, env=_slurm_env(),
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_records(tmp_path / "slurm-tiny" / "results.jsonl")
    assert sorted(r["config"]["arch"] for r in records) == ["ring", "single"]
    for record in records:
        assert record["status"] == "ok", record.get("error")
        cluster = record["cluster"]
        assert cluster["launcher"] == "mpirun"
        assert cluster["slurm_job_id"] and cluster["slurm_job_id"].isdigit()
        assert cluster["slurm_nodelist"] == "slt[1-2]"
        assert set(cluster["hosts"]) <= set(NODES)
        assert record["sweep"]["cluster"] == "slurm"
        # The job's tasks ran on the nodes' virtual cores, read in virtual time.
        assert cluster["dilation"] and record["fidelity"]["dilation"] == cluster["dilation"]
        assert record["fidelity"]["real"]["timing"]["train_s"] == pytest.approx(
            record["timing"]["train_s"] * cluster["dilation"]
        )
        assert all(node["threads"] > 0 for node in record["fidelity"]["nodes"].values())
    ring = next(r for r in records if r["config"]["arch"] == "ring")
    assert sorted(ring["cluster"]["hosts"]) == NODES


def _wait(condition, timeout_s: float, what: str, interval_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_s:.0f} s")
        time.sleep(interval_s)


def _job_running(job: str) -> bool:
    result = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
        env=_slurm_env(), check=False,
    )  # fmt: skip
    return bool(result.stdout.strip())


def test_a_submitted_study_cancelled_mid_way_resumes_with_no_run_lost_or_repeated(
    slurm_cluster, tmp_path
):
    shutil.copy(TINY_STUDY, tmp_path / "study.yaml")
    results = tmp_path / "slurm-tiny" / "results.jsonl"
    submit = ["submit", str(tmp_path / "study.yaml"), "--partition", CLUSTER, "--time", "10"]
    first = _archbench(*submit, env=_slurm_env())
    assert first.returncode == 0, first.stderr
    job1 = first.stdout.split()[2]
    _wait(lambda: len(read_records(results)) >= 1, 150, "no run was recorded")
    subprocess.run(["scancel", job1], env=_slurm_env(), check=True)
    _wait(lambda: not _job_running(job1), 60, f"job {job1} did not end")
    kept = read_records(results)
    second = _archbench(*submit, env=_slurm_env())
    assert second.returncode == 0, second.stderr
    job2 = second.stdout.split()[2]
    _wait(lambda: not _job_running(job2), 200, f"job {job2} did not end")
    records = read_records(results)
    run_ids = [record["run_id"] for record in records]
    assert len(run_ids) == 3 and len(set(run_ids)) == 3, run_ids
    assert all(record["status"] == "ok" for record in records)
    assert records[: len(kept)] == kept  # what the cancelled job recorded stays as it was
    assert {r["cluster"]["slurm_job_id"] for r in records} <= {job1, job2}
    assert (tmp_path / "slurm-tiny" / "report" / "report.md").exists()
    assert f"job {job2} on slt[1-2]" in (tmp_path / "slurm-tiny" / f"slurm-{job2}.out").read_text()


@contextlib.contextmanager
def _bound_in_node(node: str, target: Path, source: Path) -> Iterator[None]:
    """`source` bound over `target` as the tasks Slurm starts on `node` see it (in its slurmd's
    mount namespace, which they share), undone afterwards."""
    state = load_state(CLUSTER)
    assert state is not None and state.slurm is not None
    enter = ["nsenter", "--target", str(state.slurm["pids"][node]), "--mount", "--"]
    subprocess.run([*enter, "mount", "--bind", str(source), str(target)], check=True)
    try:
        yield
    finally:
        subprocess.run([*enter, "umount", str(target)], check=True)


OWN_MODEL = """\
import tensorflow as tf


def build(input_shape, num_outputs):
    inputs = tf.keras.Input(shape=input_shape)
    x = tf.keras.layers.Flatten()(inputs)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_outputs)(x))
"""


def test_a_model_file_that_differs_on_a_node_stops_the_study_before_any_run(
    slurm_cluster, tmp_path
):
    """Compared on every node through srun (no ssh), with the line the ssh check gives."""
    from archbench.workloads.files import sha256_of

    model, other = tmp_path / "tiny.py", tmp_path / "other.py"
    model.write_text(OWN_MODEL)
    other.write_text(OWN_MODEL + "# edited on one node only\n")
    (tmp_path / "study.yaml").write_text(
        "study: own-model\nrepetitions: 1\ntimeout_s: 240\ncluster: {kind: slurm}\n"
        f"fixed: {{arch: single, model: '{model}:build', dataset: synthetic, "
        "synthetic_shape: 4x4, steps: 8, batch_size: 16, eval_samples: 32, threads: 1}\n"
    )
    salloc = ["salloc", "-N", "2", sys.executable, "-m", "archbench.cli"]
    sweep = [*salloc, "sweep", str(tmp_path / "study.yaml"), "--cluster", "slurm"]

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=240,
            env=_slurm_env(), check=False,
        )  # fmt: skip

    differs = (
        f"slt2: --model {model}:build: {model} differs from this machine's (sha256 "
        f"{sha256_of(str(model))[:8]}… here, {sha256_of(str(other))[:8]}… there); copy this "
        "machine's file to slt2 (every host must read the same bytes)"
    )
    with _bound_in_node("slt2", model, other):
        refused = run(sweep)
        # doctor, inside the allocation, compares the nodes' files the same way
        doctor = run(
            [*salloc, "doctor", "--quick", "--checks", "model", "--model", f"{model}:build"]
        )
    assert refused.returncode == 1, refused.stderr[-3000:]
    said = [line for line in refused.stderr.splitlines() if "differs" in line]
    assert said == [f"archbench sweep: {differs}"], refused.stderr[-3000:]
    assert "1 problem(s) on the study's hosts" in refused.stderr
    assert read_records(tmp_path / "own-model" / "results.jsonl") == []
    assert [line for line in doctor.stdout.splitlines() if line.startswith("FAIL model")] == [
        f"FAIL model     {differs}"
    ], doctor.stdout + doctor.stderr

    ran = run(sweep)  # the same bytes on every node: the study runs
    assert ran.returncode == 0, ran.stderr[-3000:]
    (record,) = read_records(tmp_path / "own-model" / "results.jsonl")
    assert record["status"] == "ok", record.get("error")
    assert record["model_stats"]["sha256"] == sha256_of(str(model))


def test_status_names_a_dead_slurmd_and_exits_1(slurm_cluster):
    state = load_state(CLUSTER)
    os.kill(state.slurm["pids"]["slt2"], signal.SIGKILL)
    _wait(lambda: "slurmd of slt2" in slurm.dead_daemons(state), 10, "slurmd did not die", 0.1)
    status = _archbench("cluster", "status", "--name", CLUSTER)
    assert status.returncode == 1
    assert "NOT RUNNING: slurmd of slt2" in status.stdout


def test_down_leaves_no_daemon_and_no_state(slurm_cluster):
    folder = cluster_dir(CLUSTER)
    assert slurm.daemon_pids(folder)  # munged, slurmctld, two slurmds
    result = _archbench("cluster", "down", "--name", CLUSTER)
    assert result.returncode == 0, result.stderr
    assert slurm.daemon_pids(folder) == []
    assert not folder.exists() and load_state(CLUSTER) is None
