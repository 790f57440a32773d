"""A private temporary folder for each training process.

TensorFlow's autograph writes a module file for every function it converts
(`__autograph_generated_file*.py` in the temporary folder) and removes it when the process exits
normally. A rank that leaves with `os._exit` (a failed run, one stopped by the launcher) skips
that, and a study of many runs left thousands of such files behind. So a training process puts
its temporary files in a folder of its own inside the usual one, and removes the folder on every
way out: at a normal exit, and before each `os._exit`. A rank killed outright (SIGKILL) leaves
its folder, named after its host and process: the next training process of the same host name
removes the folders of that host's processes that are gone (a host name of its own keeps a
container whose processes this one cannot see, sharing the folder, out of it).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

_FOLDER = re.compile(r"archbench-(?P<host>.+)-(?P<pid>\d+)-\w+$")
_claimed: str | None = None


def claim() -> str:
    """This process's temporary folder (made once; later calls return the same one)."""
    global _claimed
    if _claimed is None or not os.path.isdir(_claimed):
        remove_stale(Path(tempfile.gettempdir()))
        _claimed = tempfile.mkdtemp(prefix=f"archbench-{_host()}-{os.getpid()}-")
        tempfile.tempdir = _claimed  # every later temporary file of this process goes there
        atexit.register(release)
    return _claimed


def release() -> None:
    """Removes the folder and what is in it; call before os._exit. Later temporary files of the
    process go to the usual folder again."""
    if _claimed is not None:
        shutil.rmtree(_claimed, ignore_errors=True)
        tempfile.tempdir = None


def _host() -> str:
    return re.sub(r"[^\w.]", "_", socket.gethostname()) or "host"


def remove_stale(folder: Path) -> list[Path]:
    """Removes the folders in `folder` that this host's killed training processes left (see the
    module's docstring); returns them."""
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _FOLDER.match(entry.name)
        if match is None or match["host"] != _host() or not entry.is_dir():
            continue
        if os.path.exists(f"/proc/{match['pid']}"):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
