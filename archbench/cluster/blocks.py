"""Marked blocks in shared text files (/etc/hosts, ~/.ssh/config, Open MPI's MCA params).

A block is inserted at the top of the file, between a BEGIN and an END line, and removing it
restores the file byte for byte. Files and directories that did not exist are created and
remembered, so that removing the last block deletes them again. A file is replaced whole (a
new file with the same mode and owner renamed over it), so that a process reading it at that
moment (ssh resolving a node's name while another cluster comes up) sees the old text or the
new, never a mix; where it cannot be replaced (/etc/hosts as a container's bind mount), it is
rewritten in place.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from archbench.cluster import state
from archbench.common.jsonl import read_json
from archbench.common.safe_text import one_line


def _markers(key: str) -> tuple[str, str]:
    return f"# BEGIN archbench {key}\n", f"# END archbench {key}\n"


def _registry_path() -> Path:
    return state.RUN_DIR / "created-paths.json"


def _load_registry() -> list[str]:
    try:
        return [str(path) for path in read_json(_registry_path(), max_bytes=1 << 20)]
    except FileNotFoundError:
        return []


def _save_registry(paths: list[str]) -> None:
    _registry_path().parent.mkdir(parents=True, exist_ok=True)
    _registry_path().write_text(json.dumps(sorted(set(paths)), indent=1) + "\n")


def remember_created(path: Path) -> None:
    """Note that archbench created path, so it is deleted again once unused."""
    _save_registry([*_load_registry(), str(path)])


def _forget_created(path: Path) -> None:
    _save_registry([p for p in _load_registry() if p != str(path)])


def strip_block(text: str, key: str) -> str:
    """The text without the block named key (unchanged when there is none)."""
    begin, end = _markers(key)
    start = text.find(begin)
    if start < 0 or (start > 0 and text[start - 1] != "\n"):
        return text
    stop = text.find(end, start)
    if stop < 0:
        return text
    return text[:start] + text[stop + len(end) :]


def with_block(text: str, key: str, body: list[str]) -> str:
    """The text with the block named key (re)placed at the top. The key and every line are one
    line each (UsageError otherwise), so a block never holds more lines than it was given."""
    one_line(key, "block name")
    for line in body:
        one_line(line, "line")
    begin, end = _markers(key)
    block = begin + "".join(line + "\n" for line in body) + end
    return block + strip_block(text, key)


def has_block(path: Path, key: str) -> bool:
    try:
        return _markers(key)[0] in path.read_text()
    except FileNotFoundError:
        return False


def _make_parents(path: Path, dir_mode: int) -> None:
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(mode=dir_mode)
        remember_created(directory)


def _rewrite(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.archbench-{os.getpid()}")
    try:
        if path.is_symlink():  # replacing it would cut the link
            raise OSError("symbolic link")
        status = path.stat()
        scratch.write_text(text)
        os.chmod(scratch, status.st_mode & 0o7777)
        os.chown(scratch, status.st_uid, status.st_gid)
        os.replace(scratch, path)
        return
    except OSError:  # a bind mount (EBUSY), a read-only directory: rewrite in place
        with contextlib.suppress(OSError):
            scratch.unlink()
    with open(path, "r+") as handle:
        handle.write(text)
        handle.truncate()


def insert_block(
    path: Path, key: str, body: list[str], file_mode: int = 0o644, dir_mode: int = 0o755
) -> None:
    """Put the block at the top of path, creating the file (and its directories) if needed."""
    if not path.exists():
        _make_parents(path, dir_mode)
        path.touch(mode=file_mode)
        os.chmod(path, file_mode)
        remember_created(path)
    _rewrite(path, with_block(path.read_text(), key, body))


def remove_block(path: Path, key: str) -> bool:
    """Remove the block; delete the file and directories archbench created once they are empty.
    Returns whether a block was removed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return False
    remaining = strip_block(text, key)
    removed = remaining != text
    if removed:
        _rewrite(path, remaining)
    created = set(_load_registry())
    if remaining == "" and str(path) in created:
        path.unlink()
        _forget_created(path)
        parent = path.parent
        while str(parent) in created and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            _forget_created(parent)
            parent = parent.parent
    return removed


def remove_created_dir(path: Path) -> None:
    """Remove a directory archbench created, if it is empty."""
    if str(path) in _load_registry() and path.is_dir() and not any(path.iterdir()):
        path.rmdir()
        _forget_created(path)
