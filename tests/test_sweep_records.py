"""How a run's ending becomes its status and error, and the progress lines a sweep prints."""

from __future__ import annotations

import io

import pytest

from archbench.sweep.progress import Progress, format_duration
from archbench.sweep.records import classify
from archbench.sweep.runner import ProcessOutcome


def ended(code: int, timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(returncode=code, timed_out=timed_out, wall_s=3.0, stragglers_killed=0)


OK = {"status": "ok", "error": None}


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


def test_progress_prints_plain_lines_with_counts_and_eta():
    stream = io.StringIO()
    progress = Progress(3, stream=stream, tty=False)
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
