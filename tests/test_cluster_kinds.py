"""The kinds of cluster a study runs on are chosen in one place (archbench.sweep.kinds): every
kind a spec may name has a module there behind one interface, and nothing else in the package
branches on a kind's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archbench.common.errors import UsageError
from archbench.sweep.kinds import KINDS, describe, kind_of, resolve_target
from archbench.sweep.kinds.base import ClusterKind
from archbench.sweep.spec import CLUSTER_KINDS, load_spec
from archbench.sweep.target import ClusterTarget

PACKAGE = Path(__file__).resolve().parent.parent / "archbench"
KIND_BRANCH = re.compile(
    r"""kind\s*(?:[!=]=\s*|in\s*\(.*)["'](?:localhost|emulated|slurm|hostfile)["']"""
)


def test_every_kind_a_spec_names_is_a_module_behind_one_interface() -> None:
    assert set(KINDS) | {"auto"} == set(CLUSTER_KINDS)
    for name, kind in KINDS.items():
        assert isinstance(kind, ClusterKind) and kind.name == name
        assert type(kind).__module__ == f"archbench.sweep.kinds.{name}"
        assert type(kind).resolve is not ClusterKind.resolve, name


def test_nothing_outside_the_kinds_branches_on_a_kinds_name() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "kinds" not in path.relative_to(PACKAGE).parts
        for line in path.read_text(encoding="utf-8").splitlines()
        if KIND_BRANCH.search(line)
    ]
    # the spec's own check that `hostfile:` goes with kind hostfile reads the spec, not a target
    assert found == ['sweep/spec.py: if (kind == "hostfile") != (hostfile is not None):']


def test_what_each_kind_does_differently(tmp_path: Path) -> None:
    (tmp_path / "hosts.txt").write_text("h1 slots=2\nh2 slots=2\n")
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        f"study: s\ncluster: {{kind: hostfile, hostfile: {tmp_path / 'hosts.txt'}, "
        "bandwidth: 10gbit}\nfixed: {steps: 20}\n"
    )
    spec = load_spec(spec_path)
    hostfile = resolve_target(spec)
    assert hostfile == ClusterTarget(
        "hostfile", (("h1", 2), ("h2", 2)), bandwidth="10gbit"
    )  # fmt: skip
    assert describe(hostfile) == "hostfile (h1:2, h2:2, links 10gbit claimed)"
    local = resolve_target(spec, "localhost")
    assert local.kind == "localhost" and local.bandwidth is None
    # how the sweep checks each kind's hosts before the first run
    assert kind_of(hostfile).host_checks(False) == "ssh"
    assert kind_of(local).host_checks(True) is None
    assert KINDS["slurm"].host_checks(False) is None and KINDS["slurm"].host_checks(True) == "srun"
    # only the emulated cluster's links are set per run, and only it is brought up by the sweep
    assert [name for name, kind in KINDS.items() if kind.shapes_links] == ["emulated"]
    assert kind_of(hostfile).manager(hostfile, spec, None, print) is None
    with pytest.raises(UsageError, match="unknown cluster kind 'cloud'"):
        resolve_target(spec, "cloud")
