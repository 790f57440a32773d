"""What a sweep checks before its first run, and how an I/O error mid-sweep is put to the user.

A study whose interpreter or launcher is missing would fail every run the same way; a file the
driver cannot write stops the study. Either way the user gets one line naming the program or the
file and what to do, never a stack trace, and every record already kept stays kept.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

from archbench.errors import UsageError

IMPORT_CHECK_TIMEOUT_S = 60.0


def check_python(python: str, from_spec: bool) -> None:
    """The interpreter runs and has archbench; UsageError naming it otherwise."""
    where = "the spec's python:" if from_spec else "the interpreter"
    found = shutil.which(python) if os.sep not in python else python
    if not found or not os.path.isfile(found):
        raise UsageError(f"{where} {python} does not exist; set python: to a Python with archbench")
    if not os.access(found, os.X_OK):
        raise UsageError(
            f"{where} {python} is not executable; set python: to a Python with archbench"
        )
    try:
        probe = subprocess.run(
            [found, "-c", "import archbench; print('archbench importable')"],
            capture_output=True,
            text=True,
            timeout=IMPORT_CHECK_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{where} {python} cannot be started ({exc})") from None
    if probe.returncode != 0 or "archbench importable" not in probe.stdout:
        raise UsageError(
            f"{where} {python} cannot import archbench; install it there "
            "(pip install -e .) or set python: to the interpreter that has it"
        )


def check_launchers(launchers: set[str]) -> None:
    """Every launcher the plan uses (mpirun, or a horovodrun path) can be found."""
    for launcher in sorted(launchers):
        if shutil.which(launcher) is None:
            package = "openmpi-bin" if launcher == "mpirun" else "horovod"
            raise UsageError(
                f"the study's runs need {launcher}, which is not on PATH; install {package} "
                "or activate the environment that has it"
            )


def io_problem(exc: OSError, results: Path, kept: int) -> str:
    """One line for an I/O error that stops the sweep: the file, why, and what to do."""
    where = exc.filename or str(results.parent)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = "free space on its file system"
    elif exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
        fix = "make it writable (permissions, chattr -i, a read-only mount)"
    else:
        fix = "fix the cause"
    return (
        f"cannot write {where} ({exc.strerror or exc}): {fix}, then run the sweep again to "
        f"resume; the {kept} finished record(s) in {results} are kept"
    )
