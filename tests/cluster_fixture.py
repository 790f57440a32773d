"""Session fixture `emulated_cluster`: a 3-node emulated cluster (node1..node3) for the tests.

Import it in tests/conftest.py (`from cluster_fixture import emulated_cluster  # noqa: F401`).
The cluster is brought up once per pytest session with `archbench cluster up`, as a user
would, and brought down at the end even after failures. Concurrent pytest sessions on the same
machine share one cluster: each holds a shared lock while it runs, and the last one out takes
the cluster down. A cluster left behind by a session that was killed is rebuilt. Tests skip
with the reason when the machine cannot host a cluster (not root, ip/sshd missing).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.state import RUN_DIR, ClusterState, is_up, list_states, load_state
from archbench.common.process_group import run_in_group

FIXTURE_CLUSTER = "pytest"
FIXTURE_NODES = 3
FIXTURE_BANDWIDTH = os.environ.get("ARCHBENCH_TEST_BANDWIDTH", "200mbit")
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# As root, Open MPI refuses to start without these.
MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@dataclass(frozen=True)
class EmulatedCluster:
    name: str
    nodes: list[str]  # node1, node2, node3: host names that resolve and accept ssh
    bandwidth: str  # tc rate of every node link, each direction (e.g. "200mbit")
    hostfile: Path  # Open MPI hostfile listing every node (slots=1 each)
    subnet: str
    interface: str  # the cluster interface, same name on the host (bridge) and in every node

    @property
    def horovod_hosts(self) -> str:
        """`-H` argument for horovodrun over the first two nodes."""
        return ",".join(f"{node}:1" for node in self.nodes[:2])


def _describe(state: ClusterState) -> EmulatedCluster:
    hostfile = next((Path(p) for p in state.hostfiles if p.endswith(".txt")), Path())
    return EmulatedCluster(
        name=state.name,
        nodes=state.node_names,
        bandwidth=state.bandwidth.text,
        hostfile=hostfile,
        subnet=state.subnet,
        interface=state.bridge,
    )


def run_cluster_command(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """`archbench cluster ...` in a child process, exactly as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", "cluster", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def launcher_env(**extra: str) -> dict[str, str]:
    """Environment for mpirun/horovodrun from the host: the venv first on PATH (horovodrun
    forwards PATH to the ranks) and Open MPI's run-as-root switches."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join([venv_bin, os.environ.get("PATH", "")])
    return {**os.environ, **MPI_ROOT_ENV, "PATH": path, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def run_launcher(
    command: list[str], timeout_s: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run mpirun/horovodrun in its own process group; on timeout the whole group is killed
    (the ranks' ssh sessions die with it), then subprocess.TimeoutExpired is raised."""
    return run_in_group(command, timeout_s=timeout_s, env=env or launcher_env(), cwd=PROJECT_ROOT)


def _up_or_fail() -> ClusterState:
    result = run_cluster_command(
        "up", "--name", FIXTURE_CLUSTER, "--nodes", str(FIXTURE_NODES),
        "--bandwidth", FIXTURE_BANDWIDTH,
    )  # fmt: skip
    state = load_state(FIXTURE_CLUSTER)
    if result.returncode != 0 or state is None or not is_up(state):
        pytest.fail(f"`archbench cluster up` failed ({result.returncode}): {result.stderr.strip()}")
    return state


def _down() -> None:
    result = run_cluster_command("down", "--name", FIXTURE_CLUSTER)
    if result.returncode != 0:
        print(f"`archbench cluster down` failed: {result.stderr.strip()}", file=sys.stderr)


def _someone_elses_cluster() -> ClusterState | None:
    """A cluster brought up by hand whose nodes are node1..node3 (used as is, never downed)."""
    wanted = {f"node{k}" for k in range(1, FIXTURE_NODES + 1)}
    for state in list_states():
        if state.name != FIXTURE_CLUSTER and wanted & set(state.node_names):
            if wanted <= set(state.node_names) and is_up(state):
                return state
            pytest.skip(
                f"cluster {state.name!r} holds node names {', '.join(state.node_names)}; "
                f"bring it down (archbench cluster down --name {state.name}) to run these tests"
            )
    return None


@contextlib.contextmanager
def _locked(handle, operation: int) -> Iterator[None]:
    fcntl.flock(handle, operation)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def _try_exclusive(handle) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@pytest.fixture(scope="session")
def emulated_cluster() -> Iterator[EmulatedCluster]:
    reason = cluster_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    borrowed = _someone_elses_cluster()
    if borrowed is not None:
        yield _describe(borrowed)
        return
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    # users: every session using the cluster holds it shared; guard: makes join/leave atomic.
    with (
        open(RUN_DIR / "pytest-cluster-users.lock", "a+") as users,
        open(RUN_DIR / "pytest-cluster-guard.lock", "a+") as guard,
    ):
        with _locked(guard, fcntl.LOCK_EX):
            alone = _try_exclusive(users)
            existing = load_state(FIXTURE_CLUSTER)
            if existing is not None and (alone or not is_up(existing)):
                _down()  # left behind by a session that was killed, or broken
                existing = None
            state = existing if existing is not None else _up_or_fail()
            fcntl.flock(users, fcntl.LOCK_SH)
        try:
            yield _describe(state)
        finally:
            with _locked(guard, fcntl.LOCK_EX):
                if _try_exclusive(users):
                    _down()
                fcntl.flock(users, fcntl.LOCK_UN)
