"""Time-dilated nodes: `up` makes each node's CFS groups, the node library puts every thread in a
group of its own capped at 1/D of a core (archbench's processes only once they arm), a busy
thread gets no more than its cap, and `down` leaves nothing in the cgroup tree, also after a
killed `up`. Uses clusters of its own (cc1.., ck1..), beside the session's node1..node3."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_fixture import PROJECT_ROOT, run_cluster_command

from archbench.cluster import cgroups, idlepollers, idlestates
from archbench.cluster.budgetcheck import remote_loop
from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.state import list_states, load_state
from archbench.runtime import cgroupread

pytestmark = pytest.mark.skipif(
    cluster_unavailable_reason() is not None or cgroupread.detect() is None,
    reason=str(cluster_unavailable_reason() or cgroups.unavailable_reason()),
)


YIELD_200 = (
    "import os, time; t = time.perf_counter(); [os.sched_yield() for _ in range(200)]; "
    "print(time.perf_counter() - t)"
)


def _ssh(node: str, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", node, *words], capture_output=True, text=True, timeout=120, check=False
    )


def _groups_of(cluster: str) -> list[Path]:
    hierarchy = cgroupread.detect()
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


def test_caps_hold_every_thread_and_are_removed_by_down() -> None:
    name, prefix = "capstest", "cc"
    idle_before = _idle_switches()
    with _own_cluster(
        name, prefix, "--nodes", "2", "--dilation", "4", "--vcpus-per-node", "2",
        "--cfs-period-ms", "20",
    ) as up:  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert "dilation 4: every thread at 1/4 of a core (5 ms per 20 ms)" in up.stdout
        assert "links 100mbit each way in virtual time (tc 25000kbit)" in up.stdout
        state = load_state(name)
        assert state is not None and state.dilation == 4 and state.vcpus_per_node == 2
        # what a stop costs a capped thread here, measured at up and said (its value is the
        # machine's; a ratio far from 1 either way is not what a cap can do to CPU time alone)
        assert state.cap_cost_ratio is not None and 0.5 < state.cap_cost_ratio < 20
        assert f"working set cost {state.cap_cost_ratio:.2f}x its uncapped CPU" in up.stdout
        hierarchy = cgroupread.detect()
        for node in state.nodes:
            group = cgroups.node_dir(hierarchy, name, node.name)
            threads = cgroups.threads_dir(hierarchy, name, node.name)
            if hierarchy.version == "v1":
                assert (threads / "cpu.cfs_quota_us").read_text().strip() == "10000"  # 2 x 20 / 4
                assert (threads / "cpu.cfs_period_us").read_text().strip() == "20000"
            else:
                assert (threads / "cpu.max").read_text().split() == ["10000", "20000"]
            assert str(node.sshd_pid) in (group / "cgroup.procs").read_text().split()

        # An archbench process starts outside the caps (start-up runs at full speed), arms
        # them for every thread it has, and a thread born after arming places itself.
        placed = _ssh(
            "cc1", f"cd {PROJECT_ROOT} && {sys.executable} -m archbench.cluster.threadcaps"
        )
        assert placed.returncode == 0, placed.stderr
        report = json.loads(placed.stdout)
        assert report["dilation"] == 4
        assert report["capped_before"] == 0 and report["armed"]
        assert report["capped_after_arm"] == report["threads"] >= 2
        assert report["born_armed_capped"] == 1 and report["capped_after_disarm"] == 0
        # threads that come and go are each capped in a group named after them, and the groups
        # of those that ended are reused: one per thread alive, not one per thread ever started
        assert report["short_lived"] == report["short_lived_capped"] == 20
        if hierarchy.version == "v1":  # v2 renames no group: a new one per thread there
            assert report["thread_groups_kept"] <= report["threads_now"] + 2, report
        assert report["failures"] == 0
        assert report["background"] == 0  # Python's own threads share the process's core

        # Any other program is capped from its first instruction: two busy threads of one
        # process share its virtual core (1/D of a core), an upper bound the kernel enforces, so
        # it holds on a busy machine too.
        loop = _ssh("cc1", remote_loop(1.5, threads=2))
        assert loop.returncode == 0, loop.stderr
        shares = [float(value) for value in loop.stdout.split()]
        assert len(shares) == 2 and sum(shares) <= 0.25 * 1.1, shares
        groups = cgroups.thread_groups(hierarchy, name, "cc1")
        assert all(group.parent.parent == cgroups.threads_dir(hierarchy, name, "cc1")
                   for group in groups.values())  # fmt: skip

        # The machine's idle cores poll instead of halting between the nodes' bursts.
        if idle_before is not None:
            assert idlestates.poll_us() == idlestates.POLL_NS // 1000
            assert "idle cores poll 50 ms before halting" in up.stdout
        else:  # no haltpoll to set: one process per core polls, at the lowest priority
            pollers = idlepollers.pids()
            cores = sorted(os.sched_getaffinity(0))
            assert len(pollers) == len(cores) == state.idle_pollers
            assert sorted(min(os.sched_getaffinity(pid)) for pid in pollers) == cores
            assert all(os.sched_getscheduler(pid) == os.SCHED_IDLE for pid in pollers)
            assert f"idle cores kept polling by {len(cores)} lowest-priority" in up.stdout

        status = run_cluster_command("status", "--name", name)
        assert "dilation 4" in status.stdout and "2 virtual cores per node" in status.stdout
        assert "1 virtual core per process" in status.stdout
        assert "idle waits nap 100 us" in status.stdout

        # Idle waits nap: sched_yield() (what Open MPI calls on every idle poll) sleeps the nap
        # in virtual time (D x 100 us of real time) in every process a node starts.
        yields = _ssh("cc1", f"{sys.executable} -c '{YIELD_200}'")
        assert yields.returncode == 0, yields.stderr
        assert float(yields.stdout) >= 200 * 4 * 100e-6
    assert _groups_of(name) == []
    # as they were before `up` (still off while another dilated cluster, the session's, is up)
    assert _idle_switches() == idle_before
    _pollers_only_for_others(name)


def _pollers_only_for_others(name: str) -> None:
    """The idle-core pollers run after `name` is down only while another dilated cluster (the
    session's) is up."""
    others = [state for state in list_states() if state.name != name and state.dilation]
    assert bool(idlepollers.pids()) == bool(others and _idle_switches() is None)
    if not others:
        assert idlepollers.group_dir() is None or not idlepollers.group_dir().exists()


def _idle_switches() -> dict[str, str] | None:
    """The haltpoll driver's parameters (None: the machine has none)."""
    if idlestates.poll_us() is None:
        return None
    return {path.name: path.read_text() for path in sorted(idlestates.PARAMETERS.iterdir())}


def test_idle_nap_0_leaves_waits_spinning() -> None:
    name, prefix = "spintest", "cs"
    with _own_cluster(name, prefix, "--nodes", "1", "--dilation", "2", "--idle-nap-us", "0") as up:
        assert up.returncode == 0, up.stderr
        assert "idle waits spin" in up.stdout
        yields = _ssh("cs1", f"{sys.executable} -c '{YIELD_200}'")
        assert yields.returncode == 0, yields.stderr
        assert float(yields.stdout) < 200 * 100e-6


def test_dilation_off_leaves_nodes_uncapped() -> None:
    name, prefix = "offtest", "co"
    with _own_cluster(name, prefix, "--nodes", "1", "--dilation", "off") as up:
        assert up.returncode == 0, up.stderr
        assert "no CPU caps" in up.stdout
        assert _groups_of(name) == []
        env = _ssh("co1", "echo dilation=$ARCHBENCH_DILATION")
        assert env.stdout.strip() == "dilation=", env.stdout


def test_a_killed_up_leaves_no_group_after_down() -> None:
    name, prefix = "capskill", "ck"
    idle_before = _idle_switches()
    command = [
        sys.executable, "-m", "archbench.cli", "cluster", "up", "--name", name,
        "--prefix", prefix, "--nodes", "3", "--dilation", "8",
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
    # the idle states a killed `up` switched off are back as they were (or held by another
    # dilated cluster, whose own `down` puts them back)
    assert _idle_switches() == idle_before
    _pollers_only_for_others(name)


def _netns() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nodes", "2", "--dilation", "0.5"], "--dilation 0.5 is out of range"),
        (["--nodes", "2", "--dilation", "many"], "is not a factor"),
        (["--nodes", "2", "--dilation", "2", "--vcpus-per-node", "0"], "out of range 1..64"),
        (["--nodes", "2", "--dilation", "20", "--cfs-period-ms", "10"], "under the kernel's 1 ms"),
        (["--nodes", "2", "--cfs-period-ms", "5000"], "out of range 1..1000"),
        (["--nodes", "2", "--dilation", "off", "--vcpus-per-node", "2"], "need caps"),
        (["--nodes", "2", "--cpus-per-node", "0.5"], "--cpus-per-node is gone"),
        (["--nodes", "2", "--idle-nap-us", "-5"], "--idle-nap-us -5 is out of range"),
        (["--nodes", "2", "--idle-nap-us", "200000"], "--idle-nap-us 200000 is out of range"),
    ],
)
def test_bad_caps_get_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run_cluster_command("up", "--name", "badcaps", "--prefix", "bb", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert load_state("badcaps") is None and _groups_of("badcaps") == []
