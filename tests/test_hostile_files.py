"""Issue 49's holes, each as it was reproduced: a file the user was handed (a placement hostfile, a
trace, an interpreter a spec names) must not run commands or choose where files go; and what the
tasks of a parameter-server job send each other is data, never code. Each test ran against the
code before the fix and failed there (the hostfile and the script ran, the chart escaped)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.common.errors import RunFailed, UsageError
from archbench.common.hosts import parse_host_list, read_hostfile
from archbench.timeline.traceformat import complete, metadata

CLI = [sys.executable, "-m", "archbench.cli"]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("ARCHBENCH_TRACEBACK", None)
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def _one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# --------------------------------------------------------------------------- 1: a placement hostfile


def test_a_placement_hostfile_cannot_hand_ssh_an_option(tmp_path):
    """horovodrun runs `ssh <host> true` through a shell: a host `-Fsshcfg` made ssh read a
    config whose ProxyCommand ran. The study is refused before anything runs."""
    (tmp_path / "hosts.txt").write_text("-Fsshcfg slots=2\n")
    (tmp_path / "sshcfg").write_text("Host *\n  ProxyCommand touch PWNED\n")
    (tmp_path / "study.yaml").write_text(
        "cluster: localhost\nfixed: {arch: ring, workers: 2, launcher: horovodrun, "
        "controller: gloo, placement: hosts.txt, steps: 10}\n"
    )
    before = _files(tmp_path)
    line = _one_line_exit_2(_cli(tmp_path, "sweep", "study.yaml"))
    assert "hosts.txt:1" in line and "'-Fsshcfg'" in line and "not starting with '-'" in line
    assert _files(tmp_path) == before  # no PWNED, no results folder


@pytest.mark.parametrize(
    "text", ["-Fsshcfg slots=2\n", "node1 slots=99999999999999999999999\n", "a;b slots=1\n"]
)
def test_every_hostfile_reader_checks_names_and_slots(tmp_path, text):
    path = tmp_path / "hosts.txt"
    path.write_text(text)
    with pytest.raises(UsageError, match=f"^hostfile {path}:1: "):
        read_hostfile(path)


def test_a_host_list_and_a_non_utf8_hostfile_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="not starting with '-'"):
        parse_host_list("-oProxyCommand=x:1")
    with pytest.raises(UsageError, match="SLOTS in 1..1024"):
        parse_host_list("node1:99999999999999999999999")
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"n\xe9ud1 slots=1\n")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        read_hostfile(path)


# --------------------------------------------------------------------------- 3: a trace's step


def trace_file(path: Path, step: object = 7, **meta: object) -> Path:
    """A small trace as `--timeline` writes it: one rank, one step with compute and comm."""
    args = {"step": step}
    events = [
        metadata("process_name", 0, "rank 0: chief on a"),
        metadata("thread_name", 0, "t", 0),
        complete("step", "step", 0.0, 130.0, 0, 0, args),
        complete("forward a", "forward", 0.0, 40.0, 0, 1, args),
        complete("allreduce", "comm", 60.0, 40.0, 0, 2, args),
    ]
    other = {"writer": "archbench", "arch": "ring", "model": "mlp", "dilation_factor_D": 1.0}
    path.write_text(json.dumps({"traceEvents": events, "otherData": {**other, **meta}}))
    return path


def test_a_trace_step_cannot_choose_where_the_gantt_is_written(tmp_path):
    """The chart was named f"{stem}-step{step}" from the trace's own `args.step`: a step
    `x/../../ESCAPED` wrote ESCAPED.png two folders above --out-dir."""
    out = tmp_path / "a" / "out"
    (out / "t-stepx").mkdir(parents=True)  # the folder the step's path walks through
    trace_file(tmp_path / "t.json", step="x/../../ESCAPED")
    before = _files(tmp_path)
    line = _one_line_exit_2(_cli(tmp_path, "timeline", "t.json", "--out-dir", str(out)))
    assert "step 'x/../../ESCAPED' is not an integer" in line
    assert _files(tmp_path) == before


def test_a_good_trace_is_drawn_under_a_token_of_its_name(tmp_path):
    trace_file(tmp_path / "odd name;.json")
    proc = _cli(tmp_path, "timeline", "odd name;.json", "--out-dir", "out")
    assert proc.returncode == 0, proc.stderr
    assert sorted(_files(tmp_path / "out")) == ["odd_name_-step7.png", "odd_name_-step7.svg"]


# --------------------------------------------------------------------------- 4: the spec's python


@pytest.mark.parametrize("command", [["submit", "--dry-run"], ["sweep", "--dry-run"], ["sweep"]])
def test_a_shell_script_named_python3_is_refused_unrun(tmp_path, command):
    """`python:` was checked by its base name, and `submit --dry-run` ran the program to see
    whether it imports archbench: a shell script named python3 ran."""
    script = tmp_path / "bin" / "python3"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'RAN'}\n")
    script.chmod(0o755)
    (tmp_path / "study.yaml").write_text(
        f"python: {script}\ncluster: localhost\nfixed: {{steps: 10}}\n"
    )
    before = _files(tmp_path)
    verb, *flags = command
    line = _one_line_exit_2(_cli(tmp_path, verb, "study.yaml", *flags))
    assert "is not a Python interpreter" in line
    assert _files(tmp_path) == before  # no RAN, no batch script, no results


def test_a_copy_of_a_shell_named_python_and_a_link_to_one_are_refused(tmp_path):
    from archbench.sweep.preflight import interpreter_problem

    copy = tmp_path / "copy" / "python3"
    copy.parent.mkdir()
    copy.write_bytes(Path("/bin/sh").resolve().read_bytes())
    copy.chmod(0o755)
    assert "without CPython's entry point" in interpreter_problem(str(copy), from_spec=True)
    link = tmp_path / "link" / "python3"
    link.parent.mkdir()
    link.symlink_to("/bin/sh")
    assert "named python" in interpreter_problem(str(link), from_spec=True)
    assert interpreter_problem(sys.executable, from_spec=True) is None


# --------------------------------------------------------------------------- the PS wire


def test_what_ps_tasks_send_each_other_is_json_and_a_pickle_is_refused_unrun(tmp_path):
    import numpy as np

    from archbench.ps import wire
    from archbench.ps.lifecycle import _gathered
    from archbench.trainers.ps import _report_from

    report = {"worker": 1, "steps": 20, "staleness": {0: 18, 1: 2}, "last_global_step": 40,
              "row_counts": [[np.int64(3), np.int64(4)]]}  # fmt: skip
    back = _report_from(wire.dumps(report))
    assert back["staleness"] == {"0": 18, "1": 2} and back["row_counts"] == [[3, 4]]
    spans = {"spans": [(0, 1, "comm", "allreduce", 5, 9, {"step": 7}, 0)], "dilation": 1.0}
    assert _gathered(wire.dumps([1, spans]), tasks=2) == (
        1,
        {"spans": [[0, 1, "comm", "allreduce", 5, 9, {"step": 7}, 0]], "dilation": 1.0},
    )

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    for blob in (pickle.dumps(Boom()), b"[" * 100000, b'{"worker": 1}'):
        with pytest.raises(RunFailed):
            _report_from(blob)
        with pytest.raises(RunFailed):
            _gathered(blob, tasks=2)
    with pytest.raises(RunFailed, match="rank 5"):
        _gathered(wire.dumps([5, None]), tasks=2)
    assert not (tmp_path / "PWNED").exists()


# --------------------------------------------------------------------------- a cluster's state


@pytest.mark.parametrize("text", ["[" * 100000, "not json", '{"name": 1}', "[1, 2]"])
def test_a_garbage_state_file_is_one_line_and_a_name_never_a_path(tmp_path, text):
    """`state.py` caught only FileNotFoundError: a garbage state.json was a traceback (`init
    --cluster x` reads it too); a name is checked wherever it becomes a folder."""
    from archbench.cluster import state

    folder = tmp_path / "clusters" / "x"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(text)
    env = {**os.environ, "ARCHBENCH_RUN_DIR": str(tmp_path)}
    before = _files(tmp_path)
    for action in ("status", "env", "down"):
        proc = subprocess.run(
            [*CLI, "cluster", action, "--name", "x"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert "is not a state file `cluster up` wrote" in _one_line_exit_2(proc)
    assert _files(tmp_path) - {"cluster.lock"} == before  # the lock every cluster action takes
    with pytest.raises(UsageError, match="cluster name '../../../tmp/x' must be"):
        state.cluster_dir("../../../tmp/x")
