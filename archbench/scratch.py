"""A private temporary folder for each training process.

TensorFlow's autograph writes a module file for every function it converts
(`__autograph_generated_file*.py` in the temporary folder) and removes it when the process exits
normally. A rank that leaves with `os._exit` (a failed run, one stopped by the launcher) skips
that, and a study of many runs left thousands of such files behind. So a training process puts
its temporary files in a folder of its own inside the usual one, and removes the folder on every
way out: at a normal exit, and before each `os._exit`. Only a rank killed outright (SIGKILL) can
leave it, as one folder named after the process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_claimed: str | None = None


def claim() -> str:
    """This process's temporary folder (made once; later calls return the same one)."""
    global _claimed
    if _claimed is None or not os.path.isdir(_claimed):
        _claimed = tempfile.mkdtemp(prefix=f"archbench-{os.getpid()}-")
        tempfile.tempdir = _claimed  # every later temporary file of this process goes there
        atexit.register(release)
    return _claimed


def release() -> None:
    """Removes the folder and what is in it; call before os._exit."""
    if _claimed is not None:
        shutil.rmtree(_claimed, ignore_errors=True)
