"""A training process's temporary files (archbench.runtime.scratch): a run stopped by its launcher leaves
none behind. TensorFlow's autograph writes a module file for each function it converts and
removes it only at a normal exit; the ranks of a stopped run leave with os._exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, launch_env, launcher_prefix


def _files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_a_run_stopped_by_its_launcher_leaves_no_temporary_file(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    command = [
        *launcher_prefix("mpirun", 2), "-x", "TMPDIR", sys.executable, "-m", "archbench.train",
        "--arch", "p2p", "--model", "mlp", "--dataset", "fashion_mnist", "--steps", "1000000",
        "--eval-samples", "200", "--out", str(tmp_path / "records.jsonl"),
    ]  # fmt: skip
    launcher = subprocess.Popen(
        command, cwd=REPO, env=launch_env(TMPDIR=str(temporary)), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.startswith("__autograph") for p in _files(temporary)):
            assert launcher.poll() is None, launcher.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "TensorFlow converted no function in 120 s"
            time.sleep(0.2)
        launcher.send_signal(signal.SIGTERM)  # mpirun passes it on to the ranks
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert "stopped by SIGTERM" in stderr, stderr[-2000:]
    assert _files(temporary) == [] and list(temporary.iterdir()) == []


def test_a_killed_process_folder_is_removed_by_the_next_process_of_its_host(tmp_path: Path):
    import os
    import socket

    from archbench.runtime import scratch

    host = scratch._host()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # a process id no longer in use
    gone.wait()
    assert not Path(f"/proc/{gone.pid}").exists()
    left = tmp_path / f"archbench-{host}-{gone.pid}-ab_c12"
    alive = tmp_path / f"archbench-{host}-{os.getpid()}-xyz789"
    elsewhere = tmp_path / f"archbench-not{socket.gethostname()}x-{gone.pid}-q1w2e3"
    profile = tmp_path / "archbench-profile-k8j7h6"
    for folder in (left, alive, elsewhere, profile):
        folder.mkdir()
        (folder / "__autograph_generated_file1.py").write_text("")
    assert scratch.remove_stale(tmp_path) == [left]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (alive, elsewhere, profile)
    )
