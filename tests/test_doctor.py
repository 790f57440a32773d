"""`archbench doctor` on the emulated cluster's nodes, reached by real ssh and mpirun as a user's
own hosts would be; each failing check gives its one line, bad input one line and exit 2.

A node made to differ from the others does so in its own mount namespace (the one its sshd and
every session there share), on files under the test's own folder: nothing the other tests see.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_fixture import EmulatedCluster, emulated_cluster, launcher_env

from archbench.cluster.state import load_state
from archbench.common.bandwidth import Bandwidth

__all__ = ["emulated_cluster"]  # the shared session fixture

REPO = Path(__file__).resolve().parents[1]


def doctor(*args: str, cwd: Path = REPO, timeout: float = 240) -> subprocess.CompletedProcess:
    # outside any Slurm allocation, which would otherwise give the hosts when none are named
    env = {key: value for key, value in launcher_env().items() if not key.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "doctor", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def failures(result: subprocess.CompletedProcess, check: str) -> list[str]:
    """The problem lines of one check (without the `FAIL <check>` column)."""
    return [
        line.split(None, 2)[2]
        for line in result.stdout.splitlines()
        if line.startswith("FAIL") and line.split()[1] == check
    ]


@contextlib.contextmanager
def mounted_in_node(
    cluster: EmulatedCluster, node: str, target: Path, source: Path | None = None
) -> Iterator[None]:
    """`source` bound over `target` (or an empty tmpfs over the folder `target`) as the node's
    sessions see it, undone afterwards."""
    state = load_state(cluster.name)
    assert state is not None
    pid = next(n.sshd_pid for n in state.nodes if n.name == node)
    enter = ["nsenter", "--target", str(pid), "--mount", "--"]
    how = ["--bind", str(source)] if source is not None else ["-t", "tmpfs", "none"]
    subprocess.run([*enter, "mount", *how, str(target)], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([*enter, "umount", str(target)], check=True, capture_output=True)


def other_checkout(folder: Path) -> Path:
    """A checkout of archbench of its own (a copy of the package), where ranks started in it
    import this copy; its `__init__` with another version beside it."""
    checkout = folder / "checkout"
    shutil.copytree(
        REPO / "archbench", checkout / "archbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    (folder / "older_init.py").write_text('__version__ = "0.0.1"\n')
    return checkout


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, says",
    [
        ([], "name the hosts"),
        (["--hostfile", "/no/such/hostfile"], "No such file"),
        (["-H", "node1,node2:x"], "cannot read host"),
        (["-H", "node1", "--bandwidth", "fast"], "cannot read bandwidth"),
        (["-H", "node1", "--checks", "ssh,speed"], "--checks"),
        (["-H", "node1", "--dataset", "imagenet"], "must be one of"),
        (["--study", "/no/such/study.yaml"], "no such study spec"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path):
    result = doctor(*args, cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr


def test_a_hostfile_line_that_is_no_host_is_one_line_and_exit_2(tmp_path: Path):
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("node1 slots=1\nnode2 cores=4\n")
    result = doctor("--hostfile", str(hostfile))
    assert result.returncode == 2 and "hosts.txt:2" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_host_slow_in_both_of_its_pairs_is_named_and_a_slow_network_is_said_per_pair():
    from archbench.doctor.link import pairs, slow_links

    hosts = ["h1", "h2", "h3"]
    assert pairs(hosts) == [("h1", "h2"), ("h2", "h3"), ("h3", "h1")]
    claim = Bandwidth.parse("1gbit")
    one_slow = {("h1", "h2"): 0.95e9, ("h2", "h3"): 0.4e9, ("h3", "h1"): 0.41e9}
    (line,) = [problem.line() for problem in slow_links(hosts, one_slow, claim)]
    assert line.startswith("h3: its link measured 400 Mbit/s to h2, 410 Mbit/s to h1, below 80%")
    every = {pair: 0.5e9 for pair in one_slow}
    assert [p.host for p in slow_links(hosts, every, claim)] == ["h1-h2", "h2-h3", "h3-h1"]
    assert slow_links(hosts, one_slow, None) == []


# --------------------------------------------------------------------------- on the cluster


def test_doctor_passes_on_the_cluster_through_its_hostfile(emulated_cluster: EmulatedCluster):
    # No claim: the shared cluster's links may carry other tests' traffic just now. The claim is
    # held against the rate in test_a_link_slower_than_claimed_names_the_pair (twice the rate)
    # and in slow_links's own test.
    result = doctor("--hostfile", str(emulated_cluster.hostfile))
    assert result.returncode == 0, result.stdout + result.stderr
    passed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("ok")]
    assert passed == ["ssh", "versions", "data", "mpirun", "links"], result.stdout
    assert "horovod controllers" in result.stdout  # the full probe compared them
    assert "every check passed on the 3 host(s)" in result.stdout


def test_an_unreachable_host_another_archbench_and_missing_data_each_get_one_line(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    first, second = emulated_cluster.nodes[:2]
    state = load_state(emulated_cluster.name)
    assert state is not None
    taken = {node.address for node in state.nodes} | {state.bridge_address}
    network = state.subnet.rsplit(".", 1)[0]  # no node has an address from .200 up
    nobody = next(f"{network}.{k}" for k in range(200, 250) if f"{network}.{k}" not in taken)
    checkout = other_checkout(tmp_path)
    corpus = tmp_path / "data" / "corpus.txt"
    corpus.parent.mkdir()
    corpus.write_text("every host reads its own copy of the data\n")
    with (
        mounted_in_node(emulated_cluster, second, checkout / "archbench" / "__init__.py", tmp_path / "older_init.py"),
        mounted_in_node(emulated_cluster, second, corpus.parent),
    ):  # fmt: skip
        result = doctor(
            "-H", f"{first},{second},{nobody}", "--quick", "--dataset", "text",
            "--text-file", str(corpus), cwd=checkout,
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    (ssh,) = failures(result, "ssh")
    assert ssh.startswith(f"{nobody}: ssh: ") and "; " in ssh
    (versions,) = failures(result, "versions")
    assert versions.startswith(f"{second}: archbench 0.0.1 (here 0.1.0)"), versions
    assert "use the same archbench checkout there" in versions
    (data,) = failures(result, "data")
    assert data.startswith(f"{second}: --text-file {corpus}: no such file"), data
    assert "put the same files at the same path" in data
    assert "skipped" in result.stdout  # mpirun and links need every host
    assert "3 problem(s)" in result.stdout


def test_a_link_slower_than_claimed_names_the_pair(emulated_cluster: EmulatedCluster):
    first, second = emulated_cluster.nodes[:2]
    twice = f"{2 * Bandwidth.parse(emulated_cluster.bandwidth).bits_per_s / 1e6:.0f}mbit"
    result = doctor("-H", f"{first},{second}", "--checks", "links", "--bandwidth", twice)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = failures(result, "links")
    assert (
        line.startswith(f"{first}-{second}: the link measured ") and f"80% of the {twice}" in line
    )


def test_a_job_that_cannot_start_on_the_hosts_is_one_mpirun_line(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    """The interpreter exists here, not on the nodes (a path their mount namespace hides)."""
    node = emulated_cluster.nodes[0]
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    with mounted_in_node(emulated_cluster, node, tmp_path / "venv"):
        result = doctor("-H", node, "--checks", "mpirun", "--python", str(venv / "python"))
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = failures(result, "mpirun")
    assert line.startswith(f"{node}: mpirun across every host failed"), line


def study_on(cluster: EmulatedCluster, study: str, fixed: str, archs: str) -> str:
    """A study spec whose runs use the (already up) test cluster."""
    prefix = cluster.nodes[0].rstrip("0123456789")
    return textwrap.dedent(
        f"""
        study: {study}
        cluster: {{kind: emulated, name: {cluster.name}, prefix: {prefix},
                   nodes: {len(cluster.nodes)}, manage: false, bandwidth: {cluster.bandwidth}}}
        fixed: {fixed}
        factors: {{arch: {archs}}}
        """
    )


def test_the_sweep_stops_before_its_first_run_on_a_host_with_another_archbench(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    nodes = emulated_cluster.nodes
    checkout = other_checkout(tmp_path)
    spec = checkout / "tiny.yaml"
    spec.write_text(
        study_on(emulated_cluster, "tiny", "{model: mlp, steps: 8, workers: 2}", "[ring]")
    )
    with mounted_in_node(emulated_cluster, nodes[1], checkout / "archbench" / "__init__.py", tmp_path / "older_init.py"):  # fmt: skip
        result = subprocess.run(
            [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
            cwd=checkout, env=launcher_env(), capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"archbench sweep: {nodes[1]}: archbench 0.0.1 (here 0.1.0)" in result.stderr
    assert "problem(s) on the study's hosts" in result.stderr
    assert (
        not (checkout / "tiny" / "results.jsonl").exists()
        or not (checkout / "tiny" / "results.jsonl").read_text().strip()
    )


def test_a_study_gives_the_hosts_and_the_data_set(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    nodes = emulated_cluster.nodes
    spec = tmp_path / "mnist.yaml"
    fixed = f"{{model: mlp, steps: 8, workers: 2, dataset: mnist, data_dir: {tmp_path}/nowhere}}"
    spec.write_text(study_on(emulated_cluster, "mnist", fixed, "[ring, p2p]"))
    result = doctor("--study", str(spec), "--quick", "--checks", "data")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = failures(result, "data")
    assert [line.split(":")[0] for line in lines] == nodes
    assert all(f"in {tmp_path}/nowhere" in line for line in lines), lines
    spec.write_text(spec.read_text().replace(f", dataset: mnist, data_dir: {tmp_path}/nowhere", ""))
    result = doctor("--study", str(spec), "--quick", "--checks", "data")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fashion_mnist readable on every host" in result.stdout  # the registry's default
