"""Appending one JSON line to a records file, all or nothing; reading JSON, bounded.

Appending is shared by `archbench train --out` and the sweep's `results.jsonl`. Under an exclusive
lock: a line left cut short by an earlier crash (the file does not end in a newline) is cut off
first, so the new line starts on a line of its own; the line goes out in one write() and is
fsynced; a write that fails part-way (a full disk) is rolled back to the old size, so the file
holds the whole line or none of it, and the caller gets an OSError naming the file.

Reading (`loads`, `read_json`) is every JSON reader's: a record line, a runs file, a trace, a
cluster's state. A document nested deeper than MAX_DEPTH (`[[[[...` overflows Python's stack in the
decoder, and in any code that walks the value), larger than its reader's bound, not UTF-8, not JSON
or holding NaN or Infinity where its reader does not take them is a JsonProblem, whose message is
one line the caller puts after the file's name.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
from typing import Any

# Far deeper than any file archbench writes (a record is 4 levels, a trace 4).
MAX_DEPTH = 64
# A run's trace or a study's records can be large; a document beyond this is not one of ours.
MAX_BYTES = 256 << 20


class JsonProblem(ValueError):
    """Why a text is not a JSON document its reader takes; the message is one line."""


def _refuse_constant(name: str) -> Any:
    raise JsonProblem(f"holds {name}, which is not a JSON number")


def loads(text: str | bytes, allow_nan: bool = False, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`; JsonProblem (one line) when it is not JSON, is nested deeper
    than `max_depth` or (unless `allow_nan`: records may hold a diverged run's NaN) holds NaN or
    Infinity."""
    try:
        value = json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except JsonProblem:
        raise
    except RecursionError:
        raise JsonProblem(f"nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise JsonProblem(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:  # an integer of more than 4300 digits, say
        raise JsonProblem(f"not JSON ({' '.join(str(exc).split())[:200]})") from None
    if _deeper_than(value, max_depth):
        raise JsonProblem(f"nested deeper than {max_depth} levels")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and objects more than `limit` levels (walked without recursion,
    so that a value the decoder took cannot overflow the stack here)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def read_json(
    path: str | os.PathLike[str], max_bytes: int = MAX_BYTES, allow_nan: bool = False
) -> Any:
    """The JSON value of the file at `path`, read whole; JsonProblem (one line) when it is larger
    than `max_bytes` or is not a JSON document `loads` takes. OSError as open() raises it."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise JsonProblem(f"larger than {max_bytes:,} bytes")
    return loads(data, allow_nan=allow_nan)


# What the up-front check writes (then removes) next to the target: a record is a few KiB.
PROBE_BYTES = 4096


def cut_partial_tail(fd: int) -> int:
    """Cuts a last line that has no newline off the open file; returns the bytes removed."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    keep, position = 0, size
    while position > 0:  # read backwards in blocks until the last newline
        start = max(0, position - 65536)
        block = os.pread(fd, position - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        position = start
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return size - keep


def append_line(path: str | os.PathLike[str], line: bytes, lock: bool = True) -> int:
    """Appends `line` (ending in a newline) whole or not at all; returns the torn bytes cut first.

    Raises OSError (with the file name) when the line could not be written; the file is then as
    it was, apart from a torn tail that was already there.
    """
    path = os.fspath(path)
    assert line.endswith(b"\n")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if lock:
            fcntl.flock(fd, fcntl.LOCK_EX)
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        cut = cut_partial_tail(fd) if regular else 0
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)", path)
            os.fsync(fd)
        except OSError as exc:
            if regular:
                try:
                    os.ftruncate(fd, before)  # take back the part that did get written
                except OSError:
                    pass
            raise OSError(exc.errno, exc.strerror, path) from None
        return cut
    finally:
        os.close(fd)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_appendable(path: str, kind: str = "records go to a plain JSON-lines file") -> str | None:
    """Why a record could not be appended to `path` now, or None. Tries for real (as root,
    os.access says yes to nearly everything) and leaves nothing behind. `kind` says what the
    file must be when the path names something else (a device, a pipe)."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        return "is a directory"
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if os.path.exists(target):
        if not os.path.isfile(target):
            return f"is not a regular file ({kind})"
        try:
            with open(target, "ab"):
                pass
        except OSError as exc:
            return f"not writable ({exc.strerror})"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".archbench-probe-") as probe:
            probe.write(b"\n" * PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return f"not writable ({exc.strerror} in {folder})"
    return None
