"""Hosts of a Slurm allocation: Slurm's compressed formats, and a real `scontrol` call."""

from __future__ import annotations

import os
import stat
import textwrap

import pytest

from archbench.common.errors import UsageError
from archbench.sweep import slurm
from archbench.sweep.kinds import resolve_target
from archbench.sweep.spec import parse_spec


@pytest.mark.parametrize(
    "text,hosts,expected",
    [
        ("2(x3),1", None, [2, 2, 2, 1]),
        ("16", 3, [16, 16, 16]),
        ("4(x2)", 2, [4, 4]),
        ("36,24(x2),12", None, [36, 24, 24, 12]),
        ("1", None, [1]),
    ],
)
def test_per_node_counts(text, hosts, expected):
    assert slurm.parse_counts(text, hosts) == expected


@pytest.mark.parametrize("text", ["2(x)", "x3", "2(x3", "", "2,(x3)"])
def test_malformed_counts_are_refused(text):
    with pytest.raises(UsageError, match="cannot read Slurm per-node count"):
        slurm.parse_counts(text)


def test_counts_must_match_the_hosts():
    with pytest.raises(UsageError, match="gives 2 values for 3 hosts"):
        slurm.parse_counts("2,3", 3)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("node[01-03]", ["node01", "node02", "node03"]),
        ("gpu[1,3-4],login7", ["gpu1", "gpu3", "gpu4", "login7"]),
        ("c[098-101]", ["c098", "c099", "c100", "c101"]),
        ("single", ["single"]),
        ("a[1-2]-ib,b5", ["a1-ib", "a2-ib", "b5"]),
    ],
)
def test_nodelist_expansion_without_scontrol(text, expected):
    assert slurm.expand_nodelist(text) == expected


def fake_scontrol(folder, script: str) -> dict[str, str]:
    """A stand-in `scontrol` executable first on PATH (Slurm itself is not installed here)."""
    path = folder / "scontrol"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_allocation_hosts_come_from_scontrol_and_slots_from_slurm_variables(tmp_path):
    env = fake_scontrol(
        tmp_path,
        """
        [ "$1 $2" = "show hostnames" ] || exit 9
        echo "$3" > "$(dirname "$0")/asked"
        printf 'cn017\\ncn018\\ncn020\\n'
        """,
    )
    env.update(SLURM_JOB_NODELIST="cn[017-018,020]", SLURM_TASKS_PER_NODE="2(x2),1")
    env.pop("SLURM_NTASKS_PER_NODE", None)
    assert slurm.allocation_hosts(env) == [("cn017", 2), ("cn018", 2), ("cn020", 1)]
    assert (tmp_path / "asked").read_text().strip() == "cn[017-018,020]"
    # a single SLURM_NTASKS_PER_NODE value applies to every node, and wins over the others
    env["SLURM_NTASKS_PER_NODE"] = "3"
    assert slurm.allocation_hosts(env) == [("cn017", 3), ("cn018", 3), ("cn020", 3)]
    # CPUs per node when no task counts are set
    del env["SLURM_NTASKS_PER_NODE"], env["SLURM_TASKS_PER_NODE"]
    env["SLURM_JOB_CPUS_PER_NODE"] = "8,4(x2)"
    assert slurm.allocation_hosts(env) == [("cn017", 8), ("cn018", 4), ("cn020", 4)]


def test_a_failing_scontrol_is_one_clear_error(tmp_path):
    env = fake_scontrol(
        tmp_path, 'echo "scontrol: error: Invalid node name specified" >&2\nexit 1\n'
    )
    env["SLURM_JOB_NODELIST"] = "bad[1-"
    with pytest.raises(UsageError, match="Invalid node name specified"):
        slurm.allocation_hosts(env)


def test_outside_an_allocation_the_slurm_cluster_is_refused(tmp_path):
    spec = parse_spec({"fixed": {"steps": 5}}, tmp_path / "s.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST is not set"):
        resolve_target(spec, "slurm", env)


def test_the_slurm_cluster_target_and_its_hostfiles(tmp_path):
    env = fake_scontrol(tmp_path, 'printf "n1\\nn2\\n"\n')
    env.update(SLURM_JOB_NODELIST="n[1-2]", SLURM_NTASKS_PER_NODE="2")
    spec = parse_spec({"fixed": {"arch": "ps", "workers": 3, "num_ps": 1}}, tmp_path / "s.yaml")
    target = resolve_target(spec, "slurm", env)
    assert target.kind == "slurm" and target.hosts == (("n1", 2), ("n2", 2))
    from archbench.sweep.plan import build_plan

    (run,) = build_plan(spec, target).runs
    assert run.layout == (("n1", 2), ("n2", 2))  # spread: 4 ranks over 2 hosts
