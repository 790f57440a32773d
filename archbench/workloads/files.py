"""The identity of a file a run reads (a model file, a data file): its sha256, worked out once
per version of the file in a process."""

from __future__ import annotations

import hashlib
import os

_DIGESTS: dict[tuple, str] = {}


def sha256_of(path: str) -> str:
    """The file's sha256 (hex); a folder's is over its files' names and digests, in name order."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                member = os.path.join(path, name)
                if os.path.isfile(member):
                    digest.update(f"{name}\0{sha256_of(member)}\n".encode())
        else:
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def readable_file_problem(path: str) -> str | None:
    """What stops a run reading `path` as a plain file (missing, a folder, a device, socket or
    pipe, unreadable), in words that follow the path; None when it reads."""
    if not os.path.lexists(path):
        return "no such file"
    if os.path.isdir(path):
        return "is a directory, not a file"
    if not os.path.isfile(path):
        return "is not a regular file (a device, socket or pipe)"
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None


def short_digest(digest: str) -> str:
    """A digest as a one-line message shows it: enough hex to tell two versions apart."""
    return f"{digest[:8]}…"
