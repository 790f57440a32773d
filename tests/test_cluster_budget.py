"""CPU budgets of emulated nodes: the kernel's CFS groups are made by `up`, hold every process a
node runs, cap a busy loop at the budget, and are gone after `down`, also after a killed `up`.
Uses clusters of its own (cb1.., ck1..), beside the session's node1..node3 cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_fixture import PROJECT_ROOT, run_cluster_command

from archbench.cluster import cgroups
from archbench.cluster.budgetcheck import remote_loop
from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.state import load_state

pytestmark = pytest.mark.skipif(
    cluster_unavailable_reason() is not None or cgroups.detect() is None,
    reason=str(cluster_unavailable_reason() or cgroups.unavailable_reason()),
)


YIELD_200 = (
    "import os, time; t = time.perf_counter(); [os.sched_yield() for _ in range(200)]; "
    "print(time.perf_counter() - t)"
)


def _ssh(node: str, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", node, *words], capture_output=True, text=True, timeout=60, check=False
    )


def _groups_of(cluster: str) -> list[Path]:
    hierarchy = cgroups.detect()
    return [path for path in cgroups.leftover_groups(hierarchy) if f"/{cluster}" in str(path)]


@contextlib.contextmanager
def _own_cluster(name: str, prefix: str, *args: str) -> Iterator[subprocess.CompletedProcess[str]]:
    """A cluster of the test's own at 100 Mbit (`up` with `args`; its result is yielded), brought
    down whatever happens; a failed `down` fails the test."""
    try:
        yield run_cluster_command(
            "up", "--name", name, "--prefix", prefix, "--bandwidth", "100mbit", *args
        )
    finally:
        down = run_cluster_command("down", "--name", name)
    assert down.returncode == 0, down.stderr


def test_budget_holds_every_process_of_a_node_and_is_removed_by_down() -> None:
    name, prefix = "budgettest", "cb"
    # Small enough to fit beside the session cluster's budgets.
    with _own_cluster(
        name, prefix, "--nodes", "2", "--cpus-per-node", "0.05", "--cfs-period-ms", "20"
    ) as up:
        assert up.returncode == 0, up.stderr
        assert "0.05 CPUs per node" in up.stdout
        state = load_state(name)
        assert state is not None and state.cpus_per_node == 0.05 and state.cfs_period_us == 20_000
        hierarchy = cgroups.detect()
        for node in state.nodes:
            group = hierarchy.node_dir(name, node.name)
            if hierarchy.version == "v1":
                assert (group / "cpu.cfs_quota_us").read_text().strip() == "1000"
                assert (group / "cpu.cfs_period_us").read_text().strip() == "20000"
            else:
                assert (group / "cpu.max").read_text().split() == ["1000", "20000"]
            assert str(node.sshd_pid) in (group / "cgroup.procs").read_text().split()

        # A session's process is in its node's group and reads its own budget there.
        probe = _ssh(
            "cb2",
            f"cd {PROJECT_ROOT} && {sys.executable} -c "
            "'from archbench.cluster.cgroups import process_budget; b = process_budget(); "
            "print(b.cpus, b.group)'",
        )
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.split() == ["0.05", f"/archbench/{name}/cb2"]

        # The kernel caps a busy loop at the budget (an upper bound the kernel enforces, so
        # it holds on a busy machine too; a loop alone would take a whole core).
        loop = _ssh("cb1", remote_loop(1.5))
        assert loop.returncode == 0, loop.stderr
        assert float(loop.stdout) <= 0.05 * 1.1

        status = run_cluster_command("status", "--name", name)
        assert "0.05 CPUs per node (cgroup" in status.stdout
        assert "idle waits nap 100 us" in status.stdout

        # Idle waits nap: sched_yield() (what Open MPI calls on every idle poll) sleeps at least
        # the nap in every process a node starts, instead of returning at once.
        yields = _ssh("cb1", f"{sys.executable} -c '{YIELD_200}'")
        assert yields.returncode == 0, yields.stderr
        assert float(yields.stdout) >= 200 * 100e-6
    assert _groups_of(name) == []


def test_idle_nap_0_leaves_waits_spinning() -> None:
    name, prefix = "spintest", "cs"
    with _own_cluster(
        name, prefix, "--nodes", "1", "--cpus-per-node", "0.05", "--idle-nap-us", "0"
    ) as up:
        assert up.returncode == 0, up.stderr
        assert "idle waits spin" in up.stdout
        state = load_state(name)
        assert state is not None and state.nap_library is None
        session = _ssh("cs1", "echo preload=$LD_PRELOAD")
        assert session.stdout.strip() == "preload=", session.stdout


def test_a_killed_up_leaves_no_group_after_down() -> None:
    name, prefix = "budgetkill", "ck"
    command = [
        sys.executable, "-m", "archbench.cli", "cluster", "up", "--name", name,
        "--prefix", prefix, "--nodes", "3", "--cpus-per-node", "0.02", "--cfs-period-ms", "50",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _groups_of(name) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _groups_of(name), "up never made its groups"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        down = run_cluster_command("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert _groups_of(name) == []
    assert not any(line.startswith(prefix) for line in _netns())


def _netns() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nodes", "4", "--cpus-per-node", "4"], "more than this machine's"),
        (["--nodes", "2", "--cpus-per-node", "many"], "is not a number of CPUs"),
        (["--nodes", "2", "--cpus-per-node", "-1"], "must be a positive number"),
        (["--nodes", "2", "--cpus-per-node", "0.05", "--cfs-period-ms", "10"], "1 ms minimum"),
        (["--nodes", "2", "--cfs-period-ms", "5000"], "out of range"),
        (["--nodes", "2", "--idle-nap-us", "-5"], "--idle-nap-us -5 is out of range"),
        (["--nodes", "2", "--idle-nap-us", "200000"], "--idle-nap-us 200000 is out of range"),
    ],
)
def test_bad_budgets_get_one_line_and_exit_2(args: list[str], message: str) -> None:
    cores = len(os.sched_getaffinity(0))
    if "4" in args and 16 <= cores:
        pytest.skip(f"{cores} cores hold four 4-CPU nodes")
    result = run_cluster_command("up", "--name", "badbudget", "--prefix", "bb", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert load_state("badbudget") is None and _groups_of("badbudget") == []
