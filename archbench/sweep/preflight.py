"""What a sweep checks before its first run, and how an I/O error mid-sweep is put to the user.

A study whose interpreter or launcher is missing would fail every run the same way; a file the
driver cannot write stops the study. Either way the user gets one line naming the program or the
file and what to do, never a stack trace, and every record already kept stays kept.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from archbench.common.errors import StopError, UsageError

IMPORT_CHECK_TIMEOUT_S = 60.0


# A study's interpreter is a Python: python, python3 or python3.11, say (a venv's bin/python).
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")


def _locate(python: str) -> str | None:
    """The file `python` names (a bare name is looked up on PATH), or None."""
    found = shutil.which(python) if os.sep not in python else python
    return found if found and os.path.isfile(found) else None


# A compiled program starts with one of these (ELF; Mach-O, thin or fat), a script with `#!`.
_BINARY_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
# CPython's entry point, named in every python executable (defined, or imported from libpython).
_PYTHON_ENTRY = b"Py_BytesMain"
_SCAN_BYTES = 256 << 20  # a python executable is a few MiB; more is not one


def interpreter_problem(python: str, from_spec: bool) -> str | None:
    """What is wrong with `python` as the runs' interpreter, judged without running it (None:
    nothing). A spec may name only a Python: a program of another name, a script (a shell script
    named python3) or a program that is not CPython's executable is refused unrun, since checking
    that it imports archbench would run it."""
    found = _locate(python)
    if found is None:
        return "does not exist"
    if not os.access(found, os.X_OK):
        return "is not executable"
    if from_spec:
        return _not_a_python(found)
    return None


def _not_a_python(path: str) -> str | None:
    """Why the file at `path` (links followed) is not a Python executable, or None."""
    real = os.path.realpath(path)
    if not (
        PYTHON_NAME.fullmatch(os.path.basename(path))
        and PYTHON_NAME.fullmatch(os.path.basename(real))
    ):
        return "is not a Python interpreter (a program named python, python3 or python3.N)"
    try:
        with open(real, "rb") as handle:
            if handle.read(4) not in _BINARY_MAGIC:
                return (
                    "is not a Python interpreter (a script or other file, not a compiled program; "
                    "name the interpreter itself: python3 -c 'import sys; print(sys.executable)')"
                )
            handle.seek(0)
            if not _holds(handle, _PYTHON_ENTRY):
                return (
                    "is not a Python interpreter (a compiled program without CPython's entry point)"
                )
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def _holds(handle: BinaryIO, needle: bytes) -> bool:
    """Whether the open file holds `needle` in its first _SCAN_BYTES, read in blocks."""
    tail, seen = b"", 0
    while seen < _SCAN_BYTES:
        block = handle.read(1 << 20)
        if not block:
            return False
        if needle in tail + block:
            return True
        tail, seen = block[-len(needle) :], seen + len(block)
    return False


def check_python(python: str, from_spec: bool) -> None:
    """The interpreter is a Python and has archbench; UsageError naming it otherwise."""
    where = "the spec's python:" if from_spec else "the interpreter"
    problem = interpreter_problem(python, from_spec)
    if problem:
        raise UsageError(f"{where} {python} {problem}; set python: to a Python with archbench")
    try:
        probe = subprocess.run(
            [_locate(python) or python, "-c", "import archbench; print('archbench importable')"],
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


def check_hosts(
    hosts: list[str],
    python: str,
    say: Callable[[str], None],
    models: Sequence[str] = (),
    data_specs: Sequence[str] = (),
    through_srun: bool = False,
) -> None:
    """The study's hosts answer ssh without a password, have this host's stack and the same
    bytes in the user's model and data files (`models`, `data_specs`: the runs' --model and
    --dataset values): the cheap checks of `archbench doctor` (archbench.doctor.quick), so that a
    host that cannot run the study stops it before its first run instead of failing every run
    there (or training another model). `through_srun`: the hosts are the nodes of the Slurm
    allocation this runs in, whose files alone are compared, reached through srun (a site may
    refuse ssh to its nodes). Each problem is said on a line of its own; StopError (exit status
    1) after them."""
    # deferred: doctor's checks (threads, subprocess) load only before a study's first run
    from archbench.doctor.quick import allocation_problems, quick_problems

    check = allocation_problems if through_srun else quick_problems
    problems = check(hosts, python, os.getcwd(), models, data_specs)
    for problem in problems:
        say(problem.line())
    if problems:
        raise StopError(
            f"{len(problems)} problem(s) on the study's hosts (above); fix them and run the "
            "sweep again (`archbench doctor --study SPEC` makes every check)"
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
