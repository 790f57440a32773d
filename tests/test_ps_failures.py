"""Parameter-server runs that go wrong: a task killed mid-run, bad input.

A killed task must end the whole run within the bounded time (--ps-timeout plus the launcher's
own teardown), with a clear error, a failed record from the chief when it is still alive, and
no process left behind: under mpirun (which tears the job down) and without any launcher
(TF_CONFIG: the tasks must notice each other's death by themselves).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, launch_env, run_train
from record_files import read_records

from archbench.ps.cluster_spec import pick_free_port

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")

PS_TIMEOUT = 20
# the run must be over well before a hang would be: timeout + start-up slack on a busy machine
ENDS_WITHIN = PS_TIMEOUT + 40
LONG_RUN = ["--arch", "ps", "--num-ps", "1", "--model", "mlp", "--steps", "100000"]
LONG_RUN += ["--eval-every", "40", "--eval-samples", "200", "--ps-timeout", str(PS_TIMEOUT)]


class Output:
    """Collects a process's output lines in a thread, so waiting on a line never blocks."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared:\n{''.join(self.lines)[-3000:]}")

    @property
    def text(self) -> str:
        self.thread.join(timeout=5)
        return "".join(self.lines)


def pids_with(marker: str) -> list[int]:
    """Processes whose command line carries `marker` (this test's unique run id)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def mpi_rank_of(pid: int) -> int | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(b"OMPI_COMM_WORLD_RANK="):
            return int(item.split(b"=", 1)[1])
    return None


def wait_until_gone(marker: str, timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pids_with(marker):
        time.sleep(0.2)
    return pids_with(marker)


def kill_all(marker: str, *procs) -> None:
    """Clean-up after a failed assertion: this test's processes only, by pid."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for pid in pids_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@needs_mpirun
def test_killing_the_parameter_server_ends_the_mpirun_job_with_a_failed_record(tmp_path):
    run_id = f"pskill{uuid.uuid4().hex[:10]}"
    out = tmp_path / "records.jsonl"
    command = ["mpirun", "-np", "3", "--oversubscribe", sys.executable, "-m", "archbench.train"]
    command += [*LONG_RUN, "--sync", "--run-id", run_id, "--out", str(out)]
    mpirun = subprocess.Popen(
        command,
        cwd=REPO,
        env=launch_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Output(mpirun.stdout)
    try:
        output.wait_for("step 40/", timeout=300)  # the chief is training
        servers = [pid for pid in pids_with(run_id) if mpi_rank_of(pid) == 0]
        assert len(servers) == 1, servers
        os.kill(servers[0], signal.SIGKILL)
        killed_at = time.monotonic()
        returncode = mpirun.wait(timeout=ENDS_WITHIN + 30)
        took = time.monotonic() - killed_at
        assert returncode != 0
        assert took < ENDS_WITHIN, f"the run took {took:.0f} s to end"
        assert wait_until_gone(run_id) == [], "archbench processes survived the run"
        records = read_records(out)
        assert len(records) == 1, output.text[-3000:]
        record = records[0]
        assert record["status"] == "failed" and record["run_id"] == run_id
        message = record["error"]["message"]
        # the chief names the server that vanished (or, if the launcher was faster, says so)
        assert "parameter server ps/0" in message or "stopped by SIG" in message, message
        assert record["cluster"]["roles"] == ["ps", "chief", "worker"]
    finally:
        kill_all(run_id, mpirun)


def start_tf_config_tasks(tmp_path: Path, args: list[str]) -> dict[str, subprocess.Popen]:
    """ps/0, chief and worker/0 as three plain processes, described by TF_CONFIG only."""
    ports = set()
    while len(ports) < 3:
        ports.add(pick_free_port())
    ps_port, chief_port, worker_port = sorted(ports)
    cluster = {
        "ps": [f"127.0.0.1:{ps_port}"],
        "chief": [f"127.0.0.1:{chief_port}"],
        "worker": [f"127.0.0.1:{worker_port}"],
    }
    env = launch_env()
    for variable in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "SLURM_PROCID"):
        env.pop(variable, None)
    tasks = {}
    for name, kind in (("ps", "ps"), ("chief", "chief"), ("worker", "worker")):
        task_env = {
            **env,
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}}),
        }
        tasks[name] = subprocess.Popen(
            [sys.executable, "-m", "archbench.train", *args],
            cwd=REPO,
            env=task_env,
            stdout=(tmp_path / f"{name}.log").open("w"),
            stderr=subprocess.STDOUT,
            text=True,
        )
    return tasks


def log_of(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text()


def test_tf_config_cluster_trains_and_every_task_exits(tmp_path):
    run_id = f"pstfc{uuid.uuid4().hex[:10]}"
    out = tmp_path / "records.jsonl"
    args = ["--arch", "ps", "--num-ps", "1", "--async", "--model", "mlp", "--steps", "30"]
    args += ["--eval-samples", "500", "--run-id", run_id, "--out", str(out)]
    tasks = start_tf_config_tasks(tmp_path, args)
    try:
        codes = {name: proc.wait(timeout=300) for name, proc in tasks.items()}
        assert codes == {"ps": 0, "chief": 0, "worker": 0}, log_of(tmp_path, "chief")[-3000:]
        [record] = read_records(out)
        assert record["status"] == "ok"
        assert record["cluster"]["launcher"] == "tf_config"
        assert record["cluster"]["roles"] == ["ps", "chief", "worker"]
        assert len(record["cluster"]["hosts"]) == 3  # gathered over the tasks' gRPC servers
        assert record["comm"]["ps"]["cluster_spec"]["source"] == "tf_config"
        assert record["comm"]["ps"]["global_step"] == 60
        assert wait_until_gone(run_id) == []
    finally:
        kill_all(run_id, *tasks.values())


def test_tf_config_worker_death_stops_the_server_and_the_chief(tmp_path):
    run_id = f"pstfk{uuid.uuid4().hex[:10]}"
    out = tmp_path / "records.jsonl"
    tasks = start_tf_config_tasks(
        tmp_path, [*LONG_RUN, "--sync", "--run-id", run_id, "--out", str(out)]
    )
    try:
        deadline = time.monotonic() + 300
        while "step 40/" not in log_of(tmp_path, "chief"):
            assert time.monotonic() < deadline, log_of(tmp_path, "chief")[-3000:]
            assert tasks["chief"].poll() is None, log_of(tmp_path, "chief")[-3000:]
            time.sleep(0.2)
        tasks["worker"].kill()
        killed_at = time.monotonic()
        codes = {name: tasks[name].wait(timeout=ENDS_WITHIN + 30) for name in ("ps", "chief")}
        took = time.monotonic() - killed_at
        assert codes == {"ps": 1, "chief": 1}
        assert took < ENDS_WITHIN, f"the run took {took:.0f} s to end"
        # the server saw the worker go and said which one
        assert "worker worker/1 (rank 2" in log_of(tmp_path, "ps")
        [record] = read_records(out)
        assert record["status"] == "failed" and record["error"]["type"] == "RunFailed"
        assert "stopped answering" in record["error"]["message"]
        assert wait_until_gone(run_id) == []
    finally:
        kill_all(run_id, *tasks.values())


@needs_mpirun
@pytest.mark.parametrize(
    "args,np,message",
    [
        (["--num-ps", "2"], 2, "--num-ps 2 needs at least 3 processes"),
        (["--num-ps", "0"], None, "--num-ps must be >= 1"),
        (["--sync", "--async"], None, "--async: not allowed with argument --sync"),
    ],
    ids=["num-ps-too-large", "num-ps-zero", "sync-and-async"],
)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, args, np, message):
    out = tmp_path / "records.jsonl"
    proc, records = run_train(
        ["--arch", "ps", *args], out=out, launcher="mpirun" if np else None, np=np or 1, timeout=120
    )
    assert proc.returncode == 2
    ours = [line for line in proc.stderr.splitlines() if line.startswith("archbench")]
    assert len(ours) == 1 and message in ours[0], proc.stderr
    assert not out.exists() and records == []


def test_an_error_names_the_task_it_came_from_and_only_that_task():
    from archbench.ps.cluster_spec import Task
    from archbench.ps.lifecycle import tasks_named_in

    server = Task("ps", 0, 0, "10.0.0.1:20001")
    chief = Task("worker", 0, 1, "10.0.0.2:20002")
    other = Task("worker", 1, 2, "10.0.0.3:20003")
    message = "UnavailableError: From /job:ps/replica:0/task:0: Connection reset by peer"
    assert tasks_named_in(message, [server, chief, other]) == [server]
    assert tasks_named_in(
        "From /job:worker/replica:0/task:1: Socket closed", [server, chief, other]
    ) == [other]
    assert tasks_named_in("Connection reset by peer", [server, chief, other]) == []


def test_a_listening_socket_that_closes_late_is_still_found_gone():
    import socket as sockets

    from archbench.ps.cluster_spec import Task
    from archbench.ps.lifecycle import gone_tasks

    listener = sockets.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    task = Task("ps", 0, 0, f"127.0.0.1:{listener.getsockname()[1]}")
    assert gone_tasks([task], settle_s=0.0) == []  # still there, and a look does not wait
    closer = threading.Timer(0.5, listener.close)  # as a dying server's socket closes late
    closer.start()
    try:
        assert gone_tasks([task], settle_s=5.0) == [task]
    finally:
        closer.cancel()
        listener.close()


def test_a_refused_peer_has_exited_but_one_unanswered_look_is_not_enough():
    import socket as sockets

    from archbench.common.errors import RunFailed
    from archbench.ps.cluster_spec import NO_ANSWER, REFUSED, Task, probe
    from archbench.ps.lifecycle import _check_still_there

    # A listener whose queue of unaccepted connections is full drops the next one's first
    # packet, as a congested link can: no answer, though the process is there.
    busy = sockets.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(0)
    queued = sockets.create_connection(busy.getsockname(), timeout=1)
    silent = Task("worker", 2, 3, f"127.0.0.1:{busy.getsockname()[1]}")
    # Bound after the busy listener, so the port freed here cannot be handed back to it.
    closed = sockets.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the host refuses
    gone = Task("worker", 1, 2, f"127.0.0.1:{port}")
    assert probe(gone.address) == REFUSED and probe(silent.address, timeout=0.2) == NO_ANSWER
    with pytest.raises(RunFailed, match=r"worker worker/1 .* exited while waiting"):
        _check_still_there([gone], {}, "waiting", timeout_s=60)
    silent_since: dict[int, float] = {}
    _check_still_there([silent], silent_since, "waiting", timeout_s=60)  # a dropped SYN, maybe
    assert list(silent_since) == [3]
    silent_since[3] -= 61  # ... and silent ever since, for longer than --ps-timeout
    with pytest.raises(RunFailed, match=r"worker worker/2 .* did not answer for --ps-timeout 60 s"):
        _check_still_there([silent], silent_since, "waiting", timeout_s=60)
    queued.close()
    busy.close()
