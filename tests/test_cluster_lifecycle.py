"""`archbench cluster up|status|down` on real namespaces: what up builds, and that down leaves
the machine exactly as it was. Uses a small cluster of its own (rt1, rt2), so it runs beside
the session's node1..node3 cluster."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_fixture import PROJECT_ROOT, run_cluster_command

from archbench.cluster import blocks
from archbench.cluster.lifecycle import MCA_BLOCK
from archbench.cluster.preflight import cluster_unavailable_reason
from archbench.cluster.sshd import pid_alive
from archbench.cluster.state import RUN_DIR, ClusterState, current_link, list_states, load_state

pytestmark = pytest.mark.skipif(
    cluster_unavailable_reason() is not None, reason=str(cluster_unavailable_reason())
)

NAME = "roundtrip"
PREFIX = "rt"
WATCHED_FILES = [
    Path("/etc/hosts"),
    Path.home() / ".ssh" / "config",
    Path.home() / ".openmpi" / "mca-params.conf",
]


def _netns_list() -> list[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return sorted(listing.stdout.splitlines())


def _netns_names() -> list[str]:
    return sorted(line.split()[0] for line in _netns_list())


def _other_clusters() -> list[ClusterState]:
    return [state for state in list_states() if state.name != NAME]


def _snapshot(ignore: list[ClusterState]) -> dict[str, object]:
    """Namespaces, links and watched files, leaving out what other clusters (brought up or
    down by other tools meanwhile) own: their namespaces, links, blocks and the shared MCA block."""
    nodes = {node for state in ignore for node in state.node_names}
    devices = {state.bridge for state in ignore}
    devices |= {node.host_veth for state in ignore for node in state.nodes}
    files = {}
    for path in WATCHED_FILES:
        text = path.read_text() if path.exists() else None
        for state in ignore:
            text = text and blocks.strip_block(text, f"cluster {state.name}")
            text = text and blocks.strip_block(text, MCA_BLOCK)
        files[str(path)] = text
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {
        "netns": [line for line in _netns_list() if line.split()[0] not in nodes],
        "files": files,
        "links": sorted(
            line
            for line in links.splitlines()
            if line.split(":")[1].strip().split("@")[0] not in devices
        ),
    }


@pytest.fixture
def quiet_machine() -> Iterator[None]:
    """Hold the test cluster's guard lock: no other pytest session brings its cluster up or
    down while this test runs (other tools' clusters are left out of the comparisons)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "pytest-cluster-guard.lock", "a+") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            run_cluster_command("down", "--name", NAME)  # even when the test failed
            fcntl.flock(guard, fcntl.LOCK_UN)


def _ssh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", *args], capture_output=True, text=True, timeout=30, check=False)


def test_up_status_down_round_trip_leaves_the_machine_as_before(quiet_machine: None) -> None:
    others = _other_clusters()
    before = _snapshot(others)
    up = run_cluster_command(
        "up", "--name", NAME, "--prefix", PREFIX, "--nodes", "2", "--bandwidth", "300mbit",
        "--dilation", "3",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    state = load_state(NAME)
    assert state is not None and state.status == "up"
    assert {"rt1", "rt2"} <= set(_netns_names())

    # Names resolve from the host and inside nodes; ssh needs no prompt; hostnames differ.
    assert _ssh("rt2", "hostname").stdout.strip() == "rt2"
    assert _ssh("rt1", "ssh rt2 hostname; getent hosts rt1").stdout.split() == [
        "rt2",
        state.nodes[0].address,
        "rt1",
    ]
    hosts_text = Path("/etc/hosts").read_text()
    assert f"{state.nodes[1].address} rt2" in hosts_text

    # Both directions of every node link are shaped at the asked rate / D (in virtual time the
    # asked rate).
    for namespace, device in ((None, state.nodes[0].host_veth), ("rt1", state.bridge)):
        tc = ["tc", "-n", namespace] if namespace else ["tc"]
        shown = subprocess.run(
            [*tc, "qdisc", "show", "dev", device], capture_output=True, text=True
        )
        assert "tbf" in shown.stdout and "rate 100Mbit" in shown.stdout, shown.stdout

    mpi_file = PROJECT_ROOT / "hostfiles" / f"{NAME}.txt"
    assert mpi_file.read_text() == "rt1 slots=1\nrt2 slots=1\n"
    assert (PROJECT_ROOT / "hostfiles" / f"{NAME}.hosts").read_text() == "rt1:1,rt2:1\n"

    status = run_cluster_command("status", "--name", NAME)
    assert status.returncode == 0 and "roundtrip: up, 2 nodes, links 300mbit" in status.stdout
    assert "in virtual time (tc 100000kbit), dilation 3" in status.stdout
    assert status.stdout.count("running") == 2

    again = run_cluster_command(
        "up", "--name", NAME, "--prefix", PREFIX, "--nodes", "2", "--bandwidth", "300mbit",
        "--dilation", "3",
    )  # fmt: skip
    assert again.returncode == 0 and "already up" in again.stdout
    assert {"rt1", "rt2"} <= set(_netns_names())
    clash = run_cluster_command("up", "--name", NAME, "--prefix", PREFIX, "--nodes", "3")
    assert clash.returncode == 2 and "already up" in clash.stderr

    # Re-shaping a live cluster changes both ends of every link, and what current_link reports.
    shaped = run_cluster_command("shape", "--name", NAME, "--bandwidth", "150mbit")
    assert shaped.returncode == 0, shaped.stderr
    for namespace, device in ((None, state.nodes[1].host_veth), ("rt2", state.bridge)):
        tc = ["tc", "-n", namespace] if namespace else ["tc"]
        shown = subprocess.run(
            [*tc, "qdisc", "show", "dev", device], capture_output=True, text=True
        )
        assert "rate 50Mbit" in shown.stdout, shown.stdout
    assert current_link(["rt1", "rt2"]) == "150mbit"  # the virtual link

    sshd_pids = [node.sshd_pid for node in state.nodes]
    down = run_cluster_command("down", "--name", NAME)
    assert down.returncode == 0, down.stderr
    others += _other_clusters()
    assert _snapshot(others) == before
    assert not any(pid_alive(pid) for pid in sshd_pids)
    assert not mpi_file.exists()
    assert not (RUN_DIR / "clusters" / NAME).exists()  # keys gone

    twice = run_cluster_command("down", "--name", NAME)
    assert twice.returncode == 0 and "not up" in twice.stdout
    assert _snapshot(others + _other_clusters()) == before
    assert current_link(["rt1", "rt2"]) is None
    gone = run_cluster_command("shape", "--name", NAME, "--bandwidth", "150mbit")
    assert gone.returncode == 2 and "not up" in gone.stderr


def test_node_names_of_another_cluster_are_refused(quiet_machine: None) -> None:
    up = run_cluster_command("up", "--name", NAME, "--prefix", PREFIX, "--nodes", "1")
    assert up.returncode == 0, up.stderr
    other = run_cluster_command("up", "--name", "roundtrip-b", "--prefix", PREFIX, "--nodes", "1")
    assert other.returncode == 2
    assert "already has nodes rt1" in other.stderr and len(other.stderr.splitlines()) == 1
    assert load_state("roundtrip-b") is None


def test_non_root_user_gets_one_line_and_exit_2() -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run as another user")
    before = _netns_list()
    result = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-m", "archbench.cli", "cluster", "up", "--nodes", "2",
         "--name", "not-root"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "archbench cluster: error: the emulated cluster needs root "
        "(network namespaces, veth links, sshd); running as uid 65534"
    ]
    assert _netns_list() == before
    assert not (PROJECT_ROOT / "hostfiles" / "not-root.txt").exists()


def test_bad_bandwidth_and_latency_requests_exit_2_with_one_line() -> None:
    bad = run_cluster_command("up", "--nodes", "2", "--bandwidth", "fast")
    assert bad.returncode == 2 and "bandwidth 'fast'" in bad.stderr
    latency = run_cluster_command("up", "--nodes", "2", "--latency", "10ms")
    assert latency.returncode == 2 and "netem" in latency.stderr
    assert len(latency.stderr.strip().splitlines()) == 1


def test_a_dilated_up_killed_midway_leaves_nothing_after_down(quiet_machine: None) -> None:
    """`cluster up --dilation` killed (SIGKILL, no clean-up of its own) once it has made the
    cluster's CPU groups: `cluster down` then removes its namespaces, links, host blocks, CPU
    groups and idle-core pollers."""
    import os
    import signal
    import time

    from archbench.cluster import cgroups, idlepollers
    from archbench.runtime import cgroupread

    hierarchy = cgroupread.detect()
    if hierarchy is None:
        pytest.skip("no cgroup cpu controller: a dilated cluster cannot come up here")
    others = _other_clusters()
    before = _snapshot(others)
    up = subprocess.Popen(
        [sys.executable, "-m", "archbench.cli", "cluster", "up", "--name", NAME, "--prefix",
         PREFIX, "--nodes", "2", "--bandwidth", "300mbit", "--dilation", "3"],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    groups = cgroups.cluster_dirs(hierarchy, NAME)
    deadline = time.monotonic() + 120
    while up.poll() is None and not groups[0].exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    made_groups, midway = groups[0].exists(), up.poll() is None
    os.kill(up.pid, signal.SIGKILL)
    up.wait(timeout=30)
    assert made_groups and midway, "cluster up ended before it was killed, or made no groups"

    down = run_cluster_command("down", "--name", NAME)
    assert down.returncode == 0, down.stderr
    assert _snapshot(others + _other_clusters()) == before
    assert not any(group.exists() for group in groups)
    dilated_elsewhere = [s for s in _other_clusters() if s.status == "up" and s.dilation]
    if not dilated_elsewhere:  # the pollers are shared by every dilated cluster that is up
        assert idlepollers.pids(hierarchy) == []
    assert load_state(NAME) is None or load_state(NAME).status != "up"
