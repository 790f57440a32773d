"""`archbench init`: a starter study whose levels fit the hosts it is given (a hostfile, a Slurm
allocation), written only when the sweep accepts it (`archbench sweep --dry-run`), never over an
existing file unless --force; bad input gets one line and exit status 2, nothing written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def archbench(*args: str, cwd: Path, env: dict[str, str] | None = None):
    # outside any Slurm allocation unless the test gives one
    base = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "archbench.cli", *args],
        cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def init(tmp_path: Path, hostfile_text: str, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "hosts.txt").write_text(hostfile_text)
    return archbench(
        "init", "--hostfile", "hosts.txt", "--bandwidth", "1gbit", "-o", "runs/mine.yaml",
        *extra, cwd=tmp_path,
    )  # fmt: skip


def written(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "runs" / "mine.yaml").read_text())


def dry_run(tmp_path: Path, env: dict[str, str] | None = None) -> list[str]:
    """The training commands `archbench sweep --dry-run` prints for the written spec."""
    result = archbench("sweep", "runs/mine.yaml", "--dry-run", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "archbench.train" in line]


def test_one_host_gets_the_worker_counts_its_slots_hold_and_no_placement(tmp_path: Path):
    result = init(tmp_path, "h1 slots=4\n")
    assert result.returncode == 0, result.stderr
    spec = written(tmp_path)
    assert spec["cluster"] == {"kind": "hostfile", "hostfile": "hosts.txt", "bandwidth": "1gbit"}
    assert spec["factors"]["workers"] == [2, 4]
    assert "placement" not in spec["factors"]  # one host: every rank is there
    # a 4-worker PS run is 5 ranks on 4 slots: left out, the rest kept
    assert spec["exclude"] == [{"arch": "ps", "workers": 4}]
    assert spec["repetitions"] == 3 and spec["fixed"]["model"] == "mlp"
    commands = dry_run(tmp_path)
    assert any("--arch ps" in line for line in commands)
    assert not any("--arch ps" in line and "-np 5" in line for line in commands)


def test_two_hosts_of_one_slot_have_no_spare_host_for_a_server(tmp_path: Path):
    result = init(tmp_path, "h1 slots=1\nh2 slots=1\n")
    assert result.returncode == 0, result.stderr
    spec = written(tmp_path)
    assert spec["factors"]["workers"] == [2]
    assert "placement" not in spec["factors"]
    assert {"arch": "ps", "workers": 2} in spec["exclude"]
    text = (tmp_path / "runs" / "mine.yaml").read_text()
    assert "needs a spare host" in text and "slots=2" in text  # the comments say why
    commands = dry_run(tmp_path)
    assert commands and not any("--arch ps" in line for line in commands)


def test_three_hosts_place_the_server_on_the_spare_host(tmp_path: Path):
    result = init(tmp_path, "h1 slots=1\nh2 slots=1\nh3 slots=1\n")
    assert result.returncode == 0, result.stderr
    spec = written(tmp_path)
    assert spec["factors"]["workers"] == [2]
    assert spec["factors"]["placement"] == ["dedicated"]  # beside a worker needs slots=2
    assert "exclude" not in spec
    ps = [line for line in dry_run(tmp_path) if "--arch ps" in line]
    assert len(ps) == 3 and all("-np 3" in line for line in ps)


def test_slots_bring_more_workers_and_the_colocated_server(tmp_path: Path):
    result = init(tmp_path, "# a comment\nh1 slots=2\nh2 slots=2\nh3 slots=2  # fast NIC\n")
    assert result.returncode == 0, result.stderr
    spec = written(tmp_path)
    assert spec["factors"]["workers"] == [2, 4]
    assert spec["factors"]["placement"] == ["dedicated", "colocated"]
    # 4 workers and a server beside them: 5 ranks on the workers' 4 slots
    assert spec["exclude"] == [{"arch": "ps", "workers": 4, "placement": "colocated"}]
    assert dry_run(tmp_path)


def test_inside_a_slurm_allocation_its_nodes_are_the_hosts(tmp_path: Path):
    # The allocation's scontrol, as a site's would answer for nodes h[1-3]
    tools = tmp_path / "slurm-bin"
    tools.mkdir()
    (tools / "scontrol").write_text("#!/bin/sh\nprintf 'h1\\nh2\\nh3\\n'\n")
    (tools / "scontrol").chmod(0o755)
    allocation = {"SLURM_JOB_NODELIST": "h[1-3]", "SLURM_TASKS_PER_NODE": "2(x3)",
                  "SLURM_JOB_ID": "42", "PATH": f"{tools}:{os.environ['PATH']}"}  # fmt: skip
    result = archbench("init", "--bandwidth", "10gbit", "-o", "runs/mine.yaml", cwd=tmp_path,
                       env=allocation)  # fmt: skip
    assert result.returncode == 0, result.stderr
    spec = written(tmp_path)
    assert spec["cluster"] == {"kind": "slurm", "bandwidth": "10gbit"}
    assert spec["factors"]["workers"] == [2, 4]
    assert "Slurm job 42" in result.stdout
    assert dry_run(tmp_path, env=allocation)


@pytest.mark.parametrize(
    ("hostfile", "message"),
    [
        ("h1 slots=1\nh2 cores=4\n", "hosts.txt:2: cannot read 'cores=4'"),
        ("# nothing but a comment\n", "names no host"),
        ("h1 slots=1\n", "a distributed run needs at least 2"),
        ("h1 slots=1\nh$2 slots=1\n", "is not a host name"),
    ],
)
def test_a_bad_hostfile_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, hostfile: str, message: str
):
    result = init(tmp_path, hostfile)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("archbench init: error: ") and message in line, line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the hosts: --hostfile FILE"),
        (("--hostfile", "missing.txt"), "hostfile missing.txt: No such file"),
        (("--hostfile", "hosts.txt", "--steps", "3"), "must be above the warm-up"),
        (("--hostfile", "hosts.txt", "--bandwidth", "fast"), "fast"),
        (("--hostfile", "hosts.txt", "--data-dir", "nowhere"), "fashion_mnist: missing"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(tmp_path: Path, args: tuple[str, ...], message: str):
    (tmp_path / "hosts.txt").write_text("h1 slots=2\n")
    result = archbench("init", *args, "-o", "mine.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert message in line, line
    assert not (tmp_path / "mine.yaml").exists()


def test_an_existing_spec_is_kept_unless_forced(tmp_path: Path):
    spec = tmp_path / "runs" / "mine.yaml"
    spec.parent.mkdir()
    spec.write_text("study: mine  # my own\n")
    result = init(tmp_path, "h1 slots=2\nh2 slots=2\n")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "archbench init: error: runs/mine.yaml exists; keep it, or pass --force to write over it"
    )
    assert spec.read_text() == "study: mine  # my own\n"
    result = init(tmp_path, "h1 slots=2\nh2 slots=2\n", "--force")
    assert result.returncode == 0, result.stderr
    assert written(tmp_path)["factors"]["workers"] == [2, 4]
    assert [p.name for p in spec.parent.iterdir()] == ["mine.yaml"]  # no temporary left


# Issue 49, hole 2: what a user gives reaches the spec's comments and settings; a line break in
# it would start a line of its own (the issue's --data-dir put `warmup_steps: 7` into `fixed:`).
INJECTED = "\n  warmup_steps: 7\n  #"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--hostfile", "lh.txt", "--data-dir", "/tmp/dd" + INJECTED), "--data-dir"),
        (("--hostfile", "lh.txt", "-o", "d" + INJECTED + "/mine.yaml"), "-o"),
        (("--hostfile", "lh" + INJECTED + ".txt"), "--hostfile"),
        (("--hostfile", "lh.txt", "--model", "mlp" + INJECTED), "--model"),
    ],
)
def test_a_value_with_a_line_break_never_reaches_the_spec(
    tmp_path: Path, args: tuple[str, ...], flag: str
):
    for name in ("lh.txt", "lh" + INJECTED + ".txt"):
        (tmp_path / name).write_text("localhost slots=4\n")
    before = sorted(tmp_path.iterdir())
    result = archbench("init", *args, "--bandwidth", "1gbit", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"error: {flag} " in line and "control character" in line, line
    assert sorted(tmp_path.iterdir()) == before  # no spec, no folder


def test_the_spec_text_holds_no_line_a_value_could_add():
    """The last guard: a value that reached `render` another way (a Slurm job's id) is refused
    there too."""
    from archbench.common.errors import UsageError
    from archbench.common.hosts import HostSlots
    from archbench.init.hosts import Hosts
    from archbench.init.levels import Design
    from archbench.init.text import render
    from archbench.init.workload import Workload

    hosts = Hosts("slurm", [HostSlots("n1", 2)], {"kind": "slurm"}, "Slurm job 7" + INJECTED)
    data = Workload({"dataset": "fashion_mnist", "model": "mlp"}, "Fashion-MNIST", [], "mlp")
    with pytest.raises(UsageError, match="control character"):
        render("s", "runs/s.yaml", hosts, data, Design([2], []), ("1gbit", "given"), 100, 3)


def test_out_is_never_a_device_a_pipe_or_a_folder_even_with_force(tmp_path: Path):
    """Issue 49, hole 2: `init -o /dev/null --force` replaced the device with a regular file. A
    pipe stands in for the device here (replacing it harms nothing outside the test)."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (tmp_path / "folder").mkdir()
    for out, message in (("pipe", "is not a regular file"), ("folder", "is a folder")):
        result = init(tmp_path, "h1 slots=2\n", "-o", out, "--force")
        assert result.returncode == 2, result.stdout + result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"error: -o {out}: {message}" in line, line
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert not any((tmp_path / "folder").iterdir())


def test_out_makes_at_most_its_own_folder(tmp_path: Path):
    result = init(tmp_path, "h1 slots=2\n", "-o", "nowhere/deeper/mine.yaml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nowhere does not exist" in result.stderr
    assert not (tmp_path / "nowhere").exists()
    # a spec the sweep refuses leaves no folder made for it behind
    result = init(tmp_path, "h1 slots=1\n", "-o", "new/mine.yaml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ("{kind: hostfile}", "kind hostfile and hostfile: FILE go together"),
        ("{kind: localhost, hostfile: hosts.txt}", "kind hostfile and hostfile: FILE go together"),
        ("{kind: hostfile, hostfile: gone.txt}", "hostfile gone.txt: No such file"),
    ],
)
def test_a_spec_on_a_hostfile_names_one_that_exists(tmp_path: Path, cluster: str, message: str):
    (tmp_path / "hosts.txt").write_text("h1 slots=2\n")
    (tmp_path / "s.yaml").write_text(
        f"study: s\ncluster: {cluster}\nfixed: {{steps: 10}}\nfactors: {{arch: [ring]}}\n"
    )
    result = archbench("sweep", "s.yaml", "--dry-run", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert message in line, line
