"""A sweep on the emulated cluster: ranks on the nodes, and a run that hangs there is killed there too.

Needs root (network namespaces); skips with the reason otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cluster_fixture import EmulatedCluster, emulated_cluster
from record_files import read_records

__all__ = ["emulated_cluster"]  # the shared session fixture

REPO = Path(__file__).resolve().parents[1]


def ranks_of(study: Path) -> list[int]:
    """Live processes whose command line names the study's folder (launchers and ranks)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(study).encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def netns_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def test_sweep_on_emulated_nodes_records_them_and_kills_remote_ranks(
    emulated_cluster: EmulatedCluster, tmp_path: Path
):
    prefix = emulated_cluster.nodes[0].rstrip("0123456789")
    spec = tmp_path / "emu.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""
            study: emu
            order: design
            timeout_s: 240
            timeouts:
              - when: {{steps: 1000000}}
                timeout_s: 30
            cluster: {{kind: emulated, name: {emulated_cluster.name}, prefix: {prefix},
                       nodes: {len(emulated_cluster.nodes)}, slots: 1, manage: false}}
            fixed: {{arch: ring, model: mlp, dataset: synthetic, batch_size: 16, eval_samples: 200}}
            factors:
              steps: [10, 1000000]
            """
        )
    )
    # Watch for the hanging run's ranks inside the node namespaces while the sweep runs.
    driver = subprocess.Popen(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    host_netns = netns_of(os.getpid())
    remote_seen = False
    while driver.poll() is None:
        remote_seen |= any(
            netns_of(pid) not in ("", host_netns) for pid in ranks_of(tmp_path / "emu")
        )
        time.sleep(0.5)
    out, err = driver.communicate()
    assert driver.returncode == 0, err
    records = {r["config"]["steps"]: r for r in read_records(tmp_path / "emu" / "results.jsonl")}
    ok, hang = records[10], records[1000000]
    assert ok["status"] == "ok", ok.get("error")
    assert ok["cluster"]["hosts"] == emulated_cluster.nodes[:2]  # spread: one rank per node
    assert ok["cluster"]["link"] == emulated_cluster.bandwidth
    assert hang["status"] == "timeout"
    assert remote_seen, "the ranks never ran inside the node namespaces"
    # Nothing of either run is left, on the host or inside the nodes.
    deadline = time.monotonic() + 10
    while ranks_of(tmp_path / "emu") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ranks_of(tmp_path / "emu") == []


def test_a_managed_sweep_that_starts_with_single_brings_its_cluster_up(tmp_path: Path):
    # `single` has no link setting; the sweep must still bring the cluster up for it (it runs
    # on a node), then take it down again. A cluster of its own: prefix `sg`.
    from archbench.cluster.preflight import cluster_unavailable_reason
    from archbench.cluster.state import load_state

    if cluster_unavailable_reason() is not None:
        import pytest

        pytest.skip(cluster_unavailable_reason())
    spec = tmp_path / "single-first.yaml"
    spec.write_text(
        textwrap.dedent(
            """
            study: single-first
            cluster: {kind: emulated, name: singlefirst, prefix: sg, nodes: 1, bandwidth: 100mbit,
                      dilation: 2, manage: true}
            fixed: {arch: single, model: mlp, dataset: synthetic, batch_size: 16, steps: 8}
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "sweep", str(spec)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bringing up emulated cluster 'singlefirst'" in proc.stderr
    (record,) = read_records(tmp_path / "single-first" / "results.jsonl")
    assert record["status"] == "ok" and record["cluster"]["hosts"] == ["sg1"]
    assert load_state("singlefirst") is None  # down again
