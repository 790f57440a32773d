"""A real training run across two emulated nodes: the run record says where the ranks ran and
which link joined them."""

from __future__ import annotations

from pathlib import Path

from cluster_fixture import EmulatedCluster, emulated_cluster, run_launcher
from record_files import read_records

__all__ = ["emulated_cluster"]  # the session fixture, until tests/conftest.py imports it


def test_horovodrun_ring_run_records_both_nodes_and_the_shaped_link(
    emulated_cluster: EmulatedCluster, tmp_path: Path
) -> None:
    out = tmp_path / "records.jsonl"
    result = run_launcher(
        ["horovodrun", "-np", "2", "-H", emulated_cluster.horovod_hosts,
         "python", "-m", "archbench.train", "--arch", "ring", "--model", "mlp",
         "--dataset", "fashion_mnist", "--steps", "20", "--eval-every", "0", "--out", str(out)],
        timeout_s=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_records(out)
    assert len(records) == 1 and records[0]["status"] == "ok", records
    cluster = records[0]["cluster"]
    assert cluster["hosts"] == emulated_cluster.nodes[:2]
    assert cluster["link"] == emulated_cluster.bandwidth
