"""The emulated cluster's pure parts: argument checks, file blocks, hostfiles, current_link.
No root needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archbench.cluster import blocks, hostfiles, state
from archbench.cluster.network import tbf_burst_bytes
from archbench.cluster.preflight import cluster_unavailable_reason, require_cluster_support
from archbench.cluster.spec import make_spec
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError


def test_bandwidth_strings_are_read_as_tc_reads_them() -> None:
    assert Bandwidth.tc_rate("200mbit", check_range=False).bits_per_s == 200e6
    assert Bandwidth.tc_rate("1gbit", check_range=False).bits_per_s == 1e9
    assert Bandwidth.tc_rate("1.5gbit", check_range=False).bits_per_s == 1.5e9
    for bad in ("fast", "200", "200mbps", "-1mbit", "200 mbit"):
        with pytest.raises(UsageError, match="bandwidth"):
            Bandwidth.tc_rate(bad, check_range=False)


def test_spec_carries_the_rate_it_read_and_tc_is_given_its_text() -> None:
    spec = make_spec("emulated", 3, "200MBIT", "node", 1)
    assert spec.bandwidth == Bandwidth(200e6) and spec.bandwidth.text == "200mbit"
    # the bucket: about 2 ms at line rate, at least 32 KiB
    assert tbf_burst_bytes(spec.bandwidth) == 50_000
    assert tbf_burst_bytes(Bandwidth.tc_rate("1mbit")) == 32 * 1024


def test_spec_rejects_bad_arguments_with_the_argument_named() -> None:
    spec = make_spec("emulated", 3, "200MBIT", "node", 1)
    assert spec.node_names == ["node1", "node2", "node3"]
    cases = [
        (("bad name!", 3, "1gbit", "node", 1), "cluster name"),
        (("c", 0, "1gbit", "node", 1), "--nodes"),
        (("c", 65, "1gbit", "node", 1), "--nodes"),
        (("c", 2, "10kbit", "node", 1), "out of range"),
        (("c", 2, "1gbit", "Node9", 1), "prefix"),
        (("c", 2, "1gbit", "node", 0), "--slots"),
    ]
    for args, message in cases:
        with pytest.raises(UsageError, match=message):
            make_spec(*args)


def test_not_root_is_refused_with_the_reason() -> None:
    reason = cluster_unavailable_reason(euid=1000)
    assert reason is not None and "root" in reason and "1000" in reason
    with pytest.raises(UsageError, match="needs root"):
        require_cluster_support(euid=1000)


def test_missing_tools_are_named_with_their_package() -> None:
    def find_without_sshd(tool: str) -> str | None:
        return None if tool in ("sshd", "ip") else f"/usr/bin/{tool}"

    reason = cluster_unavailable_reason(euid=0, find=find_without_sshd)
    assert reason is not None
    assert "sshd (openssh-server)" in reason and "ip (iproute2)" in reason
    assert cluster_unavailable_reason(euid=0, find=lambda tool: f"/usr/bin/{tool}") is None


def test_blocks_are_removed_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    hosts = tmp_path / "hosts"
    original = "127.0.0.1 localhost\n10.0.0.1 other  # no newline at the end"
    hosts.write_text(original)
    blocks.insert_block(hosts, "cluster a", ["10.213.1.1 node1"])
    blocks.insert_block(hosts, "cluster b", ["10.213.2.1 rt1"])
    text = hosts.read_text()
    assert text.startswith("# BEGIN archbench cluster b\n10.213.2.1 rt1\n")
    assert "10.213.1.1 node1\n" in text and text.endswith(original)
    blocks.insert_block(hosts, "cluster a", ["10.213.1.1 node1"])  # again: not doubled
    assert hosts.read_text().count("BEGIN archbench cluster a") == 1
    assert blocks.remove_block(hosts, "cluster a")
    assert blocks.remove_block(hosts, "cluster b")
    assert not blocks.remove_block(hosts, "cluster b")  # twice is fine
    assert hosts.read_text() == original


def test_files_and_directories_created_for_a_block_go_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    config = tmp_path / "home" / ".ssh" / "config"
    (tmp_path / "home").mkdir()
    blocks.insert_block(config, "cluster a", ["Host node1"], file_mode=0o600, dir_mode=0o700)
    assert config.stat().st_mode & 0o777 == 0o600
    assert config.parent.stat().st_mode & 0o777 == 0o700
    blocks.remove_block(config, "cluster a")
    assert not config.parent.exists()
    assert (tmp_path / "home").exists()


def test_generated_hostfiles_work_for_mpirun_and_horovodrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hostfiles, "hostfiles_dir", lambda: tmp_path)
    mpi_file, horovod_file = hostfiles.write_hostfiles("c", ["node1", "node2"], 2)
    assert mpi_file.read_text() == "node1 slots=2\nnode2 slots=2\n"
    assert horovod_file.read_text() == "node1:2,node2:2\n"
    hostfiles.check_hostfiles_free("c")  # ours: may be rewritten
    hostfiles.remove_hostfiles("c", ["node1", "node2"], 2)
    assert not mpi_file.exists() and not horovod_file.exists()
    mpi_file.write_text("node1 slots=1\n# the PS goes first\nnode2 slots=1\n")
    with pytest.raises(UsageError, match="not written by"):
        hostfiles.check_hostfiles_free("c")
    hostfiles.remove_hostfiles("c", ["node1", "node2"], 1)
    assert mpi_file.exists()  # hand-written: kept


def test_checked_in_hostfiles_place_the_ps_as_documented() -> None:
    root = Path(__file__).resolve().parents[1] / "hostfiles"

    def slots(name: str) -> list[tuple[str, int]]:
        lines = (root / name).read_text().splitlines()
        return [(line.split()[0], int(line.split("slots=")[1])) for line in lines]

    assert slots("ps-dedicated.txt") == [("node1", 1), ("node2", 1), ("node3", 1)]
    assert slots("ps-colocated.txt") == [("node1", 2), ("node2", 1)]
    assert slots("ps-two-hosts.txt")[:2] == [("node1", 1), ("node2", 1)]
    assert slots("localhost.txt")[0][0] == "localhost"


def test_current_link_names_the_bandwidth_only_for_nodes_of_a_cluster_that_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    monkeypatch.setattr(state, "NETNS_DIR", tmp_path / "netns")
    (tmp_path / "netns").mkdir()
    cluster = state.ClusterState(
        name="c", status="up", bandwidth=Bandwidth.tc_rate("200mbit"), prefix="node", slots=1, subnet_index=1,
        subnet="10.213.1.0/24", bridge="ab-node", bridge_address="10.213.1.254",
        nodes=[state.NodeState(f"node{k}", f"10.213.1.{k}", f"ab1n{k}") for k in (1, 2)],
    )  # fmt: skip
    state.save_state(cluster)
    assert json.loads((state.cluster_dir("c") / "state.json").read_text())["bandwidth"] == "200mbit"
    assert state.current_link(["node1", "node2"]) is None  # no namespaces: not up
    for node in ("node1", "node2"):
        (tmp_path / "netns" / node).touch()
    assert state.current_link(["node1", "node2"]) == "200mbit"
    assert state.current_link(["node1", "node1"]) == "200mbit"
    assert state.current_link(["node1", "vm"]) is None
    assert state.current_link([]) is None
    cluster.status = "starting"
    state.save_state(cluster)
    assert state.current_link(["node1", "node2"]) is None


def test_a_state_file_keeps_the_bandwidth_as_text_and_is_read_back_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    # as `cluster up` wrote it before the state carried a typed rate
    written = {
        "name": "d", "status": "up", "bandwidth": "1gbit", "prefix": "node", "slots": 1,
        "subnet_index": 2, "subnet": "10.213.2.0/24", "bridge": "ab-node",
        "bridge_address": "10.213.2.254",
        "nodes": [{"name": "node1", "address": "10.213.2.1", "host_veth": "ab2n1",
                   "sshd_pid": None, "cgroup_dirs": []}],
        "dilation": 4.0, "vcpus_per_node": 1, "cfs_period_us": 20000,
    }  # fmt: skip
    state.cluster_dir("d").mkdir(parents=True)
    (state.cluster_dir("d") / "state.json").write_text(json.dumps(written))
    loaded = state.load_state("d")
    assert loaded is not None and loaded.bandwidth == Bandwidth(1e9)
    assert loaded.bandwidth.text == "1gbit" and str(loaded.bandwidth) == "1gbit"
    # tc is given B / D in whole kbit, and its bucket is that rate's
    assert loaded.link_rate == Bandwidth(250e6) and loaded.link_rate.text == "250000kbit"
    assert tbf_burst_bytes(loaded.link_rate) == 62_500
    state.save_state(loaded)
    again = json.loads((state.cluster_dir("d") / "state.json").read_text())
    assert again["bandwidth"] == "1gbit" and again == loaded.as_dict()
    assert {key: again[key] for key in written} == written
    assert state.load_state("d") == loaded
    # a rate out of `up`'s range is still read: what was up must stay readable
    (state.cluster_dir("d") / "state.json").write_text(
        json.dumps({**written, "bandwidth": "500kbit"})
    )
    assert state.load_state("d").bandwidth.bits_per_s == 500e3
    # a file whose rate cannot be read is skipped by the listing, not fatal
    (state.cluster_dir("d") / "state.json").write_text(json.dumps({**written, "bandwidth": "fast"}))
    assert state.list_states() == []
