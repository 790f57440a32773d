"""Launching on the session's emulated cluster as users type it: ssh, mpirun with a hostfile,
horovodrun -H with the MPI and Gloo controllers, and the shaped links' measured bandwidth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixture import EmulatedCluster, emulated_cluster, launcher_env, run_launcher

from archbench.cluster.state import current_link, load_state
from archbench.common.bandwidth import Bandwidth

__all__ = ["emulated_cluster"]  # the session fixture, until tests/conftest.py imports it

MPIRUN = ["mpirun", "--tag-output"]
HOSTNAME_AND_PYTHON = "import socket, sys; print(socket.gethostname(), sys.prefix)"


def _tbf_bytes_sent(device: str) -> int:
    shown = subprocess.run(
        ["tc", "-s", "qdisc", "show", "dev", device], capture_output=True, text=True, check=True
    ).stdout
    return int(shown.split("Sent ")[1].split()[0])


def test_ssh_reaches_every_node_by_name_and_each_has_its_own_hostname(
    emulated_cluster: EmulatedCluster,
) -> None:
    for node in emulated_cluster.nodes:
        result = subprocess.run(
            ["ssh", node, "hostname"], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0 and result.stdout.strip() == node, result.stderr
    # From inside a node too (mpirun's daemons may ssh on from there).
    hop = subprocess.run(
        ["ssh", "node1", "ssh node3 hostname"], capture_output=True, text=True, timeout=30
    )
    assert hop.stdout.strip() == "node3", hop.stderr


def test_mpirun_hostfile_puts_ranks_on_two_nodes_with_the_project_python(
    emulated_cluster: EmulatedCluster,
) -> None:
    result = run_launcher(
        [*MPIRUN, "--hostfile", str(emulated_cluster.hostfile), "-np", "2",
         "python", "-c", HOSTNAME_AND_PYTHON],
        timeout_s=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = sorted(line.split(":", 1)[1].split() for line in result.stdout.splitlines())
    # `python` on the nodes is this project's interpreter, found through sshd's PATH.
    assert lines == [["node1", sys.prefix], ["node2", sys.prefix]]


def test_ranks_on_different_nodes_are_not_bound_to_the_same_core(
    emulated_cluster: EmulatedCluster,
) -> None:
    # Each node's orted sees all of the machine's cores; with Open MPI's default binding every
    # node's first rank would sit on core 0. The cluster's MCA block turns binding off.
    result = run_launcher(
        [*MPIRUN, "--hostfile", str(emulated_cluster.hostfile), "-np", "2",
         "python", "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        timeout_s=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    masks = [line.split(":", 1)[1].strip() for line in result.stdout.splitlines()]
    assert masks == [str(sorted(os.sched_getaffinity(0)))] * 2, result.stdout


def test_link_between_nodes_is_shaped_and_slower_than_inside_a_node(
    emulated_cluster: EmulatedCluster,
) -> None:
    def probe(hosts: str) -> dict:
        result = run_launcher(
            [*MPIRUN, "-np", "2", "--host", hosts,
             "python", "-m", "archbench.cluster.linkprobe", "--megabytes", "6", "--repeats", "3"],
            timeout_s=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.split(">:", 1)[1])

    across = probe("node1,node2")
    inside = probe("node1:2")
    assert across["hosts"] == ["node1", "node2"] and inside["hosts"] == ["node1", "node1"]
    shaped_mbit = Bandwidth.tc_rate(emulated_cluster.bandwidth).bits_per_s / 1e6
    # Payload only, so below the shaped rate; a small margin covers tbf's initial burst.
    assert across["mbit_per_s"] <= 1.05 * shaped_mbit, across
    assert across["mbit_per_s"] >= 0.3 * shaped_mbit, across  # and the link is really used
    assert inside["mbit_per_s"] >= 5 * across["mbit_per_s"], (inside, across)


def test_current_link_reports_the_shaped_bandwidth_for_cluster_nodes(
    emulated_cluster: EmulatedCluster,
) -> None:
    assert current_link(emulated_cluster.nodes[:2]) == emulated_cluster.bandwidth
    assert current_link(["node1", "localhost"]) is None
    assert current_link([]) is None


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_horovodrun_across_two_nodes_allreduces_over_the_shaped_link(
    emulated_cluster: EmulatedCluster, controller: str, tmp_path: Path
) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(
        "import os, socket\n"
        "import horovod.tensorflow as hvd, tensorflow as tf\n"
        "hvd.init()\n"
        "total = hvd.allreduce(tf.ones([1_000_000]) * (hvd.rank() + 1), op=hvd.Sum)\n"
        "iface = os.environ.get('HOROVOD_GLOO_IFACE')\n"
        "print(f'RESULT {hvd.rank()} {socket.gethostname()} {float(total[0])} {iface}', flush=True)\n"
    )
    state = load_state(emulated_cluster.name)
    assert state is not None
    into_node2 = state.nodes[1].host_veth
    sent_before = _tbf_bytes_sent(into_node2)
    flags = ["--gloo"] if controller == "gloo" else []
    result = run_launcher(
        ["horovodrun", *flags, "-np", "2", "-H", emulated_cluster.horovod_hosts,
         "python", str(script)],
        timeout_s=180, env=launcher_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    reports = sorted(
        line.split("RESULT", 1)[1].split()
        for line in result.stdout.splitlines()
        if "RESULT" in line
    )
    assert [report[:3] for report in reports] == [["0", "node1", "3.0"], ["1", "node2", "3.0"]]
    if controller == "gloo":
        assert {report[3] for report in reports} == {emulated_cluster.interface}
    # The 4 MB allreduce went through node2's shaped link, not around it.
    assert _tbf_bytes_sent(into_node2) - sent_before >= 2_000_000
