"""How a run's ending becomes its status and error, and the progress lines a sweep prints.

tests/launch_logs/ holds real launcher output: mpirun and horovodrun failing to start because ssh
to a host was refused, dropped during the handshake (a listener that closes every connection, as
a busy sshd does), or closed by the node's sshd; and an mpirun job whose rank failed.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.record import RunRecord
from archbench.sweep import records
from archbench.sweep.kinds import resolve_target
from archbench.sweep.launch_failures import LAUNCH_FAILED, launcher_start_failure
from archbench.sweep.plan import build_plan
from archbench.sweep.progress import Progress, format_duration
from archbench.sweep.records import classify
from archbench.sweep.runner import ProcessOutcome
from archbench.sweep.spec import load_spec


def ended(code: int, timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(returncode=code, timed_out=timed_out, wall_s=3.0, stragglers_killed=0)


OK = {"status": "ok", "error": None}
LAUNCH_LOGS = Path(__file__).resolve().parent / "launch_logs"


def launch_log(name: str) -> str:
    return (LAUNCH_LOGS / f"{name}.log").read_text()


@pytest.mark.parametrize(
    "outcome,own,tail,status,error_type,message",
    [
        (ended(0), OK, "", "ok", None, None),
        # the chief's ok record was written whole; only the teardown overran
        (ended(-15, timed_out=True), OK, "", "ok", None, None),
        (ended(-15, timed_out=True), None, "", "timeout", "Timeout", "30 s timeout"),
        (ended(143, timed_out=True), {"status": "failed", "error": {"type": "Terminated", "message": "x"}},
         "", "timeout", "Timeout", "stopped"),
        (ended(1), {"status": "failed", "error": {"type": "EOFError", "message": "cut short"}},
         "", "failed", "EOFError", "cut short"),
        (ended(2), None, "noise\narchbench train: error: cnn needs image inputs\n", "failed",
         "InvalidConfiguration", "cnn needs image inputs"),
        (ended(2), None, "", "failed", "InvalidConfiguration", "exit status 2"),
        (ended(-9), None, "", "failed", "Killed", "SIGKILL"),
        (ended(137), None, "", "failed", "Killed", "SIGKILL"),
        (ended(1), None, "Traceback...\nValueError: bad\n", "failed", "Crashed", "ValueError: bad"),
        (ended(0), None, "", "failed", "MissingRecord", "without writing a run record"),
    ],
)  # fmt: skip
def test_how_a_run_ended_decides_its_status(outcome, own, tail, status, error_type, message):
    got_status, error = classify(outcome, own, tail, timeout_s=30)
    assert got_status == status
    if error_type is None:
        assert error is None
    else:
        assert error["type"] == error_type
        assert message in error["message"]


MPIRUN_DAEMONS = "Open MPI could not start its daemons"
SSH_DROPPED = "ssh connection dropped during the handshake"


@pytest.mark.parametrize(
    "log,code,reason,line",
    [
        ("mpirun_no_sshd", 255, MPIRUN_DAEMONS, "ORTE was unable to reliably start one or more daemons."),
        ("mpirun_ssh_dropped_at_handshake", 255, SSH_DROPPED,
         "kex_exchange_identification: Connection closed by remote host"),
        ("mpirun_ssh_session_closed", 255, "ssh connection closed by the remote host",
         "Connection to cap1 closed by remote host."),
        ("horovodrun_ssh_dropped_at_handshake", 1, SSH_DROPPED,
         "kex_exchange_identification: Connection closed by remote host"),
    ],
)  # fmt: skip
def test_launcher_start_failures_are_recognised_in_real_logs(log, code, reason, line):
    found = launcher_start_failure(ended(code), None, launch_log(log))
    assert found is not None and found[0] == reason and found[1].startswith(line)
    status, error = classify(ended(code), None, launch_log(log), timeout_s=30)
    assert status == "failed" and error["type"] == LAUNCH_FAILED and error["reason"] == reason
    assert line in error["message"]


def test_older_ssh_versions_handshake_message_is_recognised():
    old_ssh = "ssh_exchange_identification: read: Connection reset by peer"
    assert launcher_start_failure(ended(255), None, f"noise\n{old_ssh}\n") == (SSH_DROPPED, old_ssh)


def test_only_runs_that_never_started_count_as_launcher_start_failures():
    orte = launch_log("mpirun_no_sshd")
    failed = {"status": "failed", "error": {"type": "EOFError", "message": "x"}}
    # a rank wrote a record: it ran, whatever the launcher printed afterwards
    assert launcher_start_failure(ended(255), failed, orte) is None
    assert classify(ended(255), failed, orte, timeout_s=30)[1]["type"] == "EOFError"
    # timed out, refused as an invalid configuration, or ended well: not a start failure
    assert launcher_start_failure(ended(-15, timed_out=True), None, orte) is None
    assert classify(ended(-15, timed_out=True), None, orte, timeout_s=30)[0] == "timeout"
    assert launcher_start_failure(ended(2), None, orte) is None
    assert launcher_start_failure(ended(0), None, orte) is None
    # ranks that ran and failed
    rank_failed = launch_log("mpirun_rank_failed")
    assert launcher_start_failure(ended(1), None, rank_failed) is None
    assert classify(ended(1), None, rank_failed, timeout_s=30)[1]["type"] == "Crashed"


def test_progress_prints_plain_lines_with_counts_and_eta():
    stream = io.StringIO()
    # made, run-a starts, ends; run-b starts, ends; closed: 10 s, then 20 s of wall per run
    clock = iter([0.0, 0.0, 10.0, 10.0, 40.0, 40.0]).__next__
    progress = Progress(3, stream=stream, tty=False, clock=clock)
    progress.start("run-a")
    progress.finish("run-a", "ok", 10.0)
    progress.start("run-b")
    progress.finish("run-b", "timeout", 30.0, "Timeout")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/3] start run-a"
    assert lines[1].startswith("[1/3] ok      run-a 10.0s") and "ETA 20s" in lines[1]
    assert "[2/3] timeout run-b 30.0s - Timeout (ok 1, failed 1, ETA 20s)" in lines[3]
    assert lines[-1].startswith("1 ok, 1 failed, of 3 runs in")
    assert "\r" not in stream.getvalue()


def test_progress_says_when_a_run_is_tried_again_and_why():
    stream = io.StringIO()
    progress = Progress(2, stream=stream, tty=False)
    progress.start("run-a")
    progress.retry(
        "run-a", 1, "failed to launch (ssh connection dropped during the handshake)", 2.0
    )
    progress.finish("run-a", "ok", 4.0, "attempt 2 after 1 launch retry")
    lines = stream.getvalue().splitlines()
    assert lines[1] == (
        "[1/2] retry   run-a: attempt 1 failed to launch (ssh connection dropped during the handshake); again in 2s"
    )
    assert lines[2].startswith("[1/2] ok      run-a 4.0s - attempt 2 after 1 launch retry")


def test_progress_redraws_one_bar_on_a_terminal():
    stream = io.StringIO()
    progress = Progress(2, stream=stream, tty=True)
    progress.start("run-a")
    progress.finish("run-a", "ok", 5.0)
    text = stream.getvalue()
    assert "\r[" in text and "1/2 ok 1 failed 0" in text
    assert "[1/2] ok      run-a 5.0s" in text


@pytest.mark.parametrize("seconds,text", [(None, "?"), (4.4, "4s"), (75, "1m15s"), (3720, "1h02m")])
def test_durations(seconds, text):
    assert format_duration(seconds) == text


def test_a_hostfile_studys_records_carry_the_link_its_cluster_states(tmp_path: Path) -> None:
    """A hostfile cluster's ranks cannot see the rate its spec states (measured by `archbench
    init`, or the user's), so the sweep writes it into the record, where an emulated node's ranks
    write their shaped link: the performance model then prices the study's runs on it."""
    (tmp_path / "hosts.txt").write_text("localhost slots=2\n")
    spec_path = tmp_path / "mine.yaml"
    spec_path.write_text(
        "study: mine\n"
        f"cluster: {{kind: hostfile, hostfile: {tmp_path / 'hosts.txt'}, bandwidth: 1gbit}}\n"
        "fixed: {model: mlp, steps: 12, eval_samples: 200}\nfactors: {arch: [single]}\n"
    )
    target = resolve_target(load_spec(spec_path))
    assert (target.kind, target.bandwidth) == ("hostfile", "1gbit")
    (run,) = build_plan(load_spec(spec_path), target).runs
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # the chief's own record, as a run on one of the cluster's hosts writes it
    trained = subprocess.run(
        [sys.executable, "-m", "archbench.train", "--arch", "single", "--model", "mlp",
         "--steps", "12", "--eval-samples", "200", "--run-id", run.run_id,
         "--out", str(run_dir / "record.jsonl")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]

    def finished(link: str | None) -> RunRecord:
        record = records.build(
            run, "mine", ended(0), run_dir, "mpirun ...", str(tmp_path / "hosts.txt"),
            "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z", 1, target.kind, cluster_link=link,
        )  # fmt: skip
        assert record["status"] == "ok", record.get("error")
        return RunRecord(record)

    view = finished(target.bandwidth)
    assert view.link == "1gbit" and view.link_bits == 1e9
    assert not view.emulated  # a stated link is not the emulator's shaped one
    # where the cluster states no rate, none is made up
    assert finished(None).link_bits is None
