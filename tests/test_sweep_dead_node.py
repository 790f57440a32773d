"""A sweep on an emulated cluster with a dead node names the node instead of retrying its runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from cluster_fixture import PROJECT_ROOT, launcher_env, run_cluster_command

from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.state import load_state

NAME, PREFIX = "deadnode", "dead"  # a cluster of its own: the shared test cluster stays whole


@pytest.fixture
def cluster_with_a_dead_node():
    reason = cluster_unavailable_reason()
    if reason:
        pytest.skip(reason)
    up = run_cluster_command("up", "--nodes", "2", "--name", NAME, "--prefix", PREFIX)
    assert up.returncode == 0, up.stderr
    try:
        state = load_state(NAME)
        os.kill(state.nodes[1].sshd_pid, signal.SIGKILL)  # node dead2's sshd dies
        yield state.nodes[1].name
    finally:
        down = run_cluster_command("down", "--name", NAME)
        assert down.returncode == 0, down.stderr


def test_a_dead_node_is_named_and_nothing_runs(tmp_path, cluster_with_a_dead_node):
    spec = tmp_path / "dead.yaml"
    spec.write_text(
        f"cluster: {{kind: emulated, name: {NAME}, prefix: {PREFIX}, nodes: 2, manage: false}}\n"
        "fixed: {arch: ring, workers: 2, model: mlp, steps: 6}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
        cwd=PROJECT_ROOT,
        env=launcher_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 1, proc.stderr
    assert len(errors) == 1 and cluster_with_a_dead_node in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and "retry" not in proc.stderr
    assert not (tmp_path / "dead" / "results.jsonl").exists()
