"""Where a command writes its files (a report, figures, a fit): checked for real before any work.

A folder the user names with --out may not exist yet, or be one nobody may write in (`/sys`, a
read-only mount). As root, os.access says yes to nearly everything, so the check makes (and
removes) a scratch folder in the deepest folder that exists, the one the command's own files would
go in or below.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def folder_problem(folder: str | os.PathLike[str], parents: bool = True) -> str | None:
    """Why files could not be written in `folder` (made when missing) now, or None. Leaves
    nothing behind. Without `parents`, only `folder` itself may be missing: its parent must be
    a folder already (a slip in a path does not make a tree of folders nobody asked for)."""
    asked = Path(os.path.abspath(folder))
    existing = asked
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not parents and existing not in (asked, asked.parent):
        return f"{asked.parent} does not exist"
    try:
        probe = tempfile.mkdtemp(dir=existing, prefix=".archbench-probe-")
    except OSError as exc:
        return f"{exc.strerror or exc} (in {existing})"
    os.rmdir(probe)
    return None


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a file could not be written whole (by a rename) at `path` now, or None: it must be a
    regular file, or a new name in a folder that exists or is one level below one (never a
    device, a pipe or a folder, which a rename would replace or fail on; no tree of folders
    nobody asked for)."""
    target = Path(path)
    if target.is_dir():
        return "is a folder, not a file"
    if target.exists() and not target.is_file():
        return "is not a regular file (a device, a pipe or a socket)"
    return folder_problem(target.parent, parents=False)
