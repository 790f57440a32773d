"""Commands run as one process group: output, a timeout that stops the whole tree, and a command
that dies with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from archbench.common.process_group import run_in_group


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for_file(path: Path, timeout_s: float = 10) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def wait_until_gone(pids: list[int], timeout_s: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def test_output_and_status_as_subprocess_run_gives_them():
    done = run_in_group(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    merged = run_in_group(["sh", "-c", "echo out; echo err >&2"], timeout_s=30, merge_stderr=True)
    assert merged.returncode == 0 and merged.stdout == "out\nerr\n" and merged.stderr is None


def test_a_timeout_stops_the_whole_tree_then_raises(tmp_path):
    pids = tmp_path / "pids"
    # A child and a grandchild in the background, as a launcher starts its ranks.
    script = f"sleep 60 & echo $! >> {pids}; sh -c 'echo $$ >> {pids}; sleep 60' & wait"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_group(["sh", "-c", script], timeout_s=1, grace_s=2)
    assert time.monotonic() - started < 20
    tree = [int(word) for word in pids.read_text().split()]
    assert len(tree) == 2
    assert wait_until_gone(tree) == []


def test_the_command_dies_with_the_process_that_started_it(tmp_path):
    pid_file = tmp_path / "pid"
    caller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                from archbench.common.process_group import run_in_group
                run_in_group(["sh", "-c", "echo $$ > {pid_file}; exec sleep 60"], timeout_s=60)
                """
            ),
        ],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        command = int(wait_for_file(pid_file))
        assert alive(command)
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(timeout=10)
        assert wait_until_gone([command]) == []
    finally:
        if caller.poll() is None:
            caller.kill()
