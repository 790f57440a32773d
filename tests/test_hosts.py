"""Host lists and hostfiles: one reader, one writer, one-line errors (no process starts here)."""

from __future__ import annotations

import pytest

from archbench.common.errors import UsageError
from archbench.common.hosts import (
    HostSlots,
    host_list_text,
    hostfile_of,
    hostfile_text,
    parse_host_list,
    rank_hosts,
    read_hostfile,
    total_slots,
)


def test_a_host_list_gives_one_slot_unless_it_says_more():
    assert parse_host_list("node1, node2:2,") == [HostSlots("node1", 1), HostSlots("node2", 2)]
    assert parse_host_list("localhost:2") == [("localhost", 2)]


@pytest.mark.parametrize(
    "text", ["node1:x", "node1:0", ":2", "node1:-1", "node1:1025", "node1:99999999999999999999999"]
)
def test_a_host_list_that_cannot_be_read_names_the_host(text):
    with pytest.raises(UsageError, match="cannot read host .* \\(expected NAME or NAME:SLOTS, "):
        parse_host_list(text)


def test_an_empty_host_list_names_its_option():
    with pytest.raises(UsageError, match="^-H names no host$"):
        parse_host_list(" , ")
    with pytest.raises(UsageError, match="^--hosts names no host$"):
        parse_host_list("", flag="--hosts")


def test_a_hostfile_is_read_with_comments_and_max_slots(tmp_path):
    path = tmp_path / "hosts.txt"
    path.write_text(
        "# the PS first\nnode1 slots=1\n\nnode2 slots=2 max_slots=4  # two workers\nnode3\n"
    )
    assert read_hostfile(path) == [("node1", 1), ("node2", 2), ("node3", 1)]
    assert total_slots(read_hostfile(path)) == 4


def test_a_bad_hostfile_is_one_line_naming_the_file_and_line(tmp_path):
    path = tmp_path / "hosts.txt"
    path.write_text("node1 slots=1\nnode2 cpus=2\n")
    with pytest.raises(UsageError, match=f"^hostfile {path}:2: cannot read 'cpus=2' \\(expected"):
        read_hostfile(path)
    path.write_text("# nothing\n")
    with pytest.raises(UsageError, match=f"^hostfile {path}: names no host$"):
        read_hostfile(path)
    with pytest.raises(UsageError, match=f"^hostfile {tmp_path / 'nope.txt'}: "):
        read_hostfile(tmp_path / "nope.txt")


def test_what_is_written_reads_back(tmp_path):
    hosts = [HostSlots("node1", 1), HostSlots("node2", 2)]
    assert hostfile_text(hosts) == "node1 slots=1\nnode2 slots=2\n"
    assert host_list_text(hosts) == "node1:1,node2:2"
    (tmp_path / "h.txt").write_text(hostfile_text(hosts))
    assert read_hostfile(tmp_path / "h.txt") == hosts
    assert parse_host_list(host_list_text(hosts)) == hosts
    assert rank_hosts(hosts) == ["node1", "node2", "node2"]


def test_the_hostfile_a_launcher_was_given():
    assert hostfile_of(["mpirun", "-np", "2", "--hostfile", "h.txt", "python"]) == "h.txt"
    assert hostfile_of(["mpirun", "--hostfile=h.txt", "python"]) == "h.txt"
    assert hostfile_of(["horovodrun", "-np", "2", "-H", "a:1,b:1", "python"]) == "-H a:1,b:1"
    assert hostfile_of(["mpirun", "-np", "2", "python"]) is None
    assert hostfile_of(None) is None
