"""Launcher start failures: the launcher could not start its daemons on the hosts, so no rank ran.

On a busy machine sshd can drop or refuse a connection, and mpirun then gives up before any rank
starts. Such a run says nothing about its configuration, so the sweep tries it again (a bounded
number of times, `launch_retries` in the spec). Only a run that wrote no record and ended on its
own with one of the messages below counts: a run that trained and then failed, timed out, or was
refused as an invalid configuration is never retried.
"""

from __future__ import annotations

import re
from typing import Any

from archbench.sweep.runner import ProcessOutcome

LAUNCH_FAILED = "LaunchFailed"  # the error type of such a run's record

# What ssh and mpirun (Open MPI's ORTE) print when the launcher could not start: reason -> pattern,
# the most specific first (mpirun's message follows ssh's, which says why).
LAUNCHER_START_FAILURES: dict[str, re.Pattern[str]] = {
    "ssh connection dropped during the handshake": re.compile(
        r"\b(ssh|kex)_exchange_identification\b"
    ),
    "ssh connection closed by the remote host": re.compile(
        r"Connection to \S+ closed by remote host"
    ),
    "Open MPI could not start its daemons": re.compile(
        r"ORTE was unable to reliably start one or more daemons"
    ),
}


def launcher_start_failure(
    outcome: ProcessOutcome, own: dict[str, Any] | None, log_text: str
) -> tuple[str, str] | None:
    """(reason, the log line that shows it) when the launcher failed to start, else None.

    `own` is the record the training command wrote (None when no rank wrote one); exit status 2
    is the training command refusing its arguments, and 0 a launcher that did start.
    """
    if own is not None or outcome.timed_out or outcome.returncode in (0, 2):
        return None
    for reason, pattern in LAUNCHER_START_FAILURES.items():
        match = pattern.search(log_text)
        if match:
            start = log_text.rfind("\n", 0, match.start()) + 1
            end = log_text.find("\n", match.end())
            return reason, log_text[start : end if end >= 0 else None].strip()
    return None
