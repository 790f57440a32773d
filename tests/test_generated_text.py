"""Hostile names against every generator of scripts and configuration files.

Each generator (the sbatch script, slurm.conf and the task prolog, sshd_config, the ~/.ssh/config
and /etc/hosts blocks, hostfiles and -H lists, the sweep's command lines) is fed names holding a
newline, `$(...)`, backticks, quotes and blanks where a user's value reaches it. It must either
refuse the value (one UsageError naming it) or write text in which the value is inert: the
scripts are run by a real shell, which must not run anything the name says, and the
configuration files must hold exactly the directives they hold for a plain name.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from archbench.cluster import blocks, hostfiles, lifecycle, slurm, sshd, state
from archbench.cluster.state import ClusterState, NodeState
from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError
from archbench.common.hosts import host_list_text, hostfile_text
from archbench.sweep.commands import shell_line
from archbench.sweep.spec import load_spec
from archbench.sweep.submit import script_text

HOSTILE = [
    "a\ntouch pwned\nb",
    "a\r\ntouch pwned",
    "$(touch pwned)",
    "`touch pwned`",
    "'; touch pwned; '",
    '"; touch pwned; "',
    "a b",
    "x # comment",
    "%j",
    "a\u2028touch pwned",
]


def _refused_or(render, check) -> str:
    """'refused' when `render()` raises UsageError, else whatever check(text) returns."""
    try:
        text = render()
    except UsageError:
        return "refused"
    check(text)
    return "inert"


def _keys(text: str, separator: str = " ") -> list[str]:
    """The directive of every line that is not blank or a comment (`Key` of `Key value` or
    `Key=value`)."""
    keys = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keys.append(stripped.split(separator, 1)[0])
    return keys


# --------------------------------------------------------------------------- the batch script


def _stub_python(folder: Path) -> Path:
    """A program that records its arguments, one per line, NUL-separated, in calls.txt."""
    stub = folder / "python"
    stub.write_text('#!/bin/sh\nprintf "%s\\0" "$@" >> "$(dirname "$0")/calls.txt"\n')
    stub.chmod(0o755)
    return stub


def _run_script(text: str, folder: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1"}
    script = folder / "job.sbatch"
    script.write_text(text)
    return subprocess.run(
        ["bash", str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=30
    )


def _pwned(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.name.startswith("pwned")]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_spec_file_name_runs_nothing_in_the_batch_script(tmp_path, name):
    work = tmp_path / "work"
    work.mkdir()
    spec_path = work / f"s{name}.yaml"
    spec_path.write_text("study: hostile\nfixed: {steps: 10}\ncluster: localhost\n")
    stub = _stub_python(work)
    spec = load_spec(spec_path)

    def check(text: str) -> None:
        benign = script_text(spec, 1, None, None, str(stub), work)
        assert [line for line in text.splitlines() if line.startswith("#SBATCH")] == [
            line for line in benign.splitlines() if line.startswith("#SBATCH")
        ]
        result = _run_script(text, work)
        assert result.returncode == 0, result.stderr
        calls = (work / "calls.txt").read_text().split("\0")[:-1]
        # the sweep, then the report: each with the spec's path as one word, as it is
        assert calls[:6] == ["-m", "archbench.cli", "sweep", str(spec_path), "--cluster", "slurm"]
        assert calls[6:9] == ["-m", "archbench.cli", "report"] and len(calls) == 10

    outcome = _refused_or(lambda: script_text(spec, 1, None, None, str(stub), work), check)
    assert not _pwned(tmp_path), outcome
    if any(char in name for char in "\n\r\u2028"):
        assert outcome == "refused"  # a line break cannot be quoted in a comment line


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_folder_or_interpreter_is_refused_or_inert_in_the_batch_script(tmp_path, name):
    folder = tmp_path / f"d{name}"
    folder.mkdir()
    spec_path = folder / "spec.yaml"
    spec_path.write_text("study: hostile\nfixed: {steps: 10}\ncluster: localhost\n")
    spec = load_spec(spec_path)
    # the results folder and the working folder are #SBATCH values: plain words only
    with pytest.raises(UsageError):
        script_text(spec, 1, None, None, "/usr/bin/python3", tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "spec.yaml").write_text(spec_path.read_text())
    with pytest.raises(UsageError):
        script_text(load_spec(plain / "spec.yaml"), 1, None, None, "/usr/bin/python3", folder)
    # an interpreter in a hostile folder is quoted, or refused where it holds a line break
    stub = _stub_python(folder)
    work_spec = load_spec(plain / "spec.yaml")

    def check(text: str) -> None:
        result = _run_script(text, plain)
        assert result.returncode == 0, result.stderr
        assert (folder / "calls.txt").read_text().split("\0")[2] == "sweep"

    _refused_or(lambda: script_text(work_spec, 1, None, None, str(stub), plain), check)
    assert not _pwned(tmp_path)


# --------------------------------------------------------------------------- the cluster's files


def _state(tmp_path: Path, name: str = "hostile", node: str = "nd1") -> ClusterState:
    return ClusterState(
        name=name, status="up", bandwidth=Bandwidth.tc_rate("1gbit"), prefix="nd", slots=1, subnet_index=7,
        subnet="10.213.7.0/24", bridge="ab-nd", bridge_address="10.213.7.254",
        nodes=[NodeState(node, "10.213.7.1", "ab7n1"), NodeState("nd2", "10.213.7.2", "ab7n2")],
        slurm={},
    )  # fmt: skip


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    return tmp_path / "run"


def _same_keys(benign: str, separator: str = " "):
    def check(text: str) -> None:
        assert _keys(text, separator) == _keys(benign, separator)
        assert len(text.splitlines()) == len(benign.splitlines())

    return check


@pytest.mark.parametrize("name", HOSTILE)
def test_slurm_conf_takes_no_directive_from_a_name(tmp_path, run_dir, name):
    benign = slurm.conf_text(_state(tmp_path))
    for hostile in (_state(tmp_path, name=name), _state(tmp_path, node=name)):
        assert _refused_or(lambda s=hostile: slurm.conf_text(s), _same_keys(benign, "=")) in (
            "refused",
            "inert",
        )


@pytest.mark.parametrize("name", HOSTILE)
def test_slurm_conf_refuses_a_state_folder_that_is_not_a_plain_path(tmp_path, monkeypatch, name):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / name)
    with pytest.raises(UsageError):
        slurm.conf_text(_state(tmp_path))


@pytest.mark.parametrize("name", HOSTILE)
def test_the_task_prolog_exports_only_its_variables(tmp_path, name):
    def check(text: str) -> None:
        script = tmp_path / "prolog.sh"
        script.write_text(text)
        result = subprocess.run(["sh", str(script)], cwd=tmp_path, capture_output=True, text=True)
        assert result.stdout.splitlines() == [f"export LD_PRELOAD={name}"]

    _refused_or(lambda: slurm.task_prolog_text({"LD_PRELOAD": name}), check)
    assert not _pwned(tmp_path)


@pytest.mark.parametrize("name", HOSTILE)
def test_sshd_config_takes_no_directive_from_a_name(tmp_path, name):
    folder = tmp_path / "c"
    benign = sshd.sshd_config_text(folder, "nd1", folder / "sshd.pid", {"X": "1"})
    check = _same_keys(benign)
    renders = [
        lambda: sshd.sshd_config_text(folder, name, folder / "sshd.pid", {"X": "1"}),
        lambda: sshd.sshd_config_text(tmp_path / name, "nd1", folder / "sshd.pid", {"X": "1"}),
        lambda: sshd.sshd_config_text(folder, "nd1", folder / name, {"X": "1"}),
        lambda: sshd.sshd_config_text(folder, "nd1", folder / "sshd.pid", {"X": name}),
    ]
    for render in renders:
        assert _refused_or(render, check) in ("refused", "inert")


@pytest.mark.parametrize("name", HOSTILE)
def test_the_ssh_and_hosts_blocks_take_no_line_from_a_name(tmp_path, run_dir, name):
    benign_state, hostile = _state(tmp_path), _state(tmp_path, node=name)
    for lines in (lifecycle._ssh_config_lines, lifecycle._hosts_lines):
        benign = "\n".join(lines(benign_state))
        assert _refused_or(lambda f=lines: "\n".join(f(hostile)), _same_keys(benign)) in (
            "refused",
            "inert",
        )

    # a block named after the cluster: one BEGIN line and one END line, whatever the name
    def three_lines(text: str) -> None:
        begin, end = f"# BEGIN archbench cluster {name}", f"# END archbench cluster {name}"
        assert text.split("\n") == [begin, "x", end, ""]

    outcome = _refused_or(lambda: blocks.with_block("", f"cluster {name}", ["x"]), three_lines)
    assert outcome == ("refused" if any(c in name for c in "\n\r\u2028") else "inert")


@pytest.mark.parametrize("name", HOSTILE)
def test_hostfiles_and_host_lists_take_no_host_from_a_name(name):
    with pytest.raises(UsageError):
        hostfile_text([(name, 1)])
    with pytest.raises(UsageError):
        host_list_text([(name, 1)])
    with pytest.raises(UsageError):
        hostfiles.texts([name], 1)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_run_command_line_hands_the_shell_each_word_as_it_is(tmp_path, name):
    line = shell_line(["printf", "%s\\0", name, "--out", name], {"ENV_VALUE": name})
    result = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, timeout=30)
    assert result.stdout.decode().split("\0")[:-1] == [name, "--out", name]
    assert not _pwned(tmp_path)
    assert shlex.split(line)[-1] == name
