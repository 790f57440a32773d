"""Hosts and their slots: the one reader of `host:slots,host:slots` lists (mpirun's `-H`) and of
Open MPI style hostfiles (`host slots=N`), the text of both, and the hostfile a launcher's
command line names.

Bad input is a UsageError of one line naming what could not be read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from archbench.errors import UsageError

_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")


class HostSlots(NamedTuple):
    """A host as the launcher reaches it, and how many ranks it takes (its slots)."""

    name: str
    slots: int


def parse_host_list(text: str, flag: str = "-H") -> list[HostSlots]:
    """'node1,node2:2' -> [(node1, 1), (node2, 2)] (mpirun -H syntax; `flag` names the option
    in the error when the list names no host)."""
    hosts = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, slots = part.partition(":")
        if not name or (slots and (not slots.isdigit() or int(slots) < 1)):
            raise UsageError(f"cannot read host {part!r} (expected NAME or NAME:SLOTS)")
        hosts.append(HostSlots(name, int(slots) if slots else 1))
    if not hosts:
        raise UsageError(f"{flag} names no host")
    return hosts


def read_hostfile(path: str | Path) -> list[HostSlots]:
    """(host, slots) from an Open MPI style hostfile (`host slots=N`, comments with #)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"hostfile {path}: {exc.strerror or exc}") from None
    hosts: list[HostSlots] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        slots = 1
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key in ("slots", "max_slots", "max-slots") and value.isdigit() and int(value) > 0:
                if key == "slots":
                    slots = int(value)
            else:
                raise UsageError(
                    f"hostfile {path}:{number}: cannot read {word!r} (expected slots=N)"
                )
        hosts.append(HostSlots(words[0], slots))
    if not hosts:
        raise UsageError(f"hostfile {path}: names no host")
    return hosts


def total_slots(hosts: Iterable[tuple[str, int]]) -> int:
    return sum(slots for _, slots in hosts)


def check_host_name(name: str) -> str:
    """`name` when it is a host name (letters, digits, `.`, `_`, `-`); UsageError otherwise. A
    hostfile line or `-H` entry is `name slots=N` or `name:N`: a blank, a comma or a line break in
    a name would add hosts or slots that nobody asked for."""
    if not isinstance(name, str) or not _HOST_NAME.fullmatch(name):
        raise UsageError(
            f"host name {name!r} is not a host name (letters, digits, '.', '_', '-'; at most 253)"
        )
    return name


def hostfile_text(hosts: Iterable[tuple[str, int]]) -> str:
    """An Open MPI hostfile (one `host slots=N` line per host), which horovodrun reads too."""
    return "".join(f"{check_host_name(name)} slots={int(slots)}\n" for name, slots in hosts)


def host_list_text(hosts: Iterable[tuple[str, int]]) -> str:
    """'node1:1,node2:2': the -H form of mpirun and horovodrun."""
    return ",".join(f"{check_host_name(name)}:{int(slots)}" for name, slots in hosts)


def rank_hosts(hosts: Iterable[tuple[str, int]]) -> list[str]:
    """The host of each rank, in rank order, when ranks fill the hosts' slots in order."""
    return [name for name, slots in hosts for _ in range(slots)]


_HOSTFILE_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile")
_HOST_LIST_OPTIONS = ("-H", "--hosts", "--host", "-host")


def hostfile_of(argv: list[str] | None) -> str | None:
    """The hostfile (or `-H <host list>`) named on a launcher's command line."""
    if not argv:
        return None
    for index, arg in enumerate(argv[:-1]):
        if arg in _HOSTFILE_OPTIONS:
            return argv[index + 1]
        if arg in _HOST_LIST_OPTIONS:
            return f"-H {argv[index + 1]}"
    for arg in argv:
        if arg.startswith("--hostfile="):
            return arg.split("=", 1)[1]
    return None
