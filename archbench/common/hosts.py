"""Hosts and their slots: the one reader of `host:slots,host:slots` lists (mpirun's `-H`) and of
Open MPI style hostfiles (`host slots=N`), the text of both, and the hostfile a launcher's
command line names.

Bad input is a UsageError of one line naming what could not be read. Every host name read here,
from `-H`, a hostfile (a cluster's, a placement's, one given to `doctor` or `microbench`) or a
Slurm allocation, passes `check_host_name`: a launcher hands host names to ssh through a shell,
where a name starting with `-` is an option (`-Fsshcfg` runs that file's ProxyCommand).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from archbench.common.errors import UsageError
from archbench.common.safe_text import shown

_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
# The most ranks one host may run (a hostfile's slots=, -H's :N, a study's cluster.slots).
MAX_SLOTS = 1_024
# A hostfile is a few lines per host; anything larger is not one (a device, a data file).
MAX_HOSTFILE_BYTES = 1 << 20


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
        if not name or (slots and _slots(slots) is None):
            raise UsageError(
                f"cannot read host {part!r} (expected NAME or NAME:SLOTS, SLOTS in 1..{MAX_SLOTS})"
            )
        hosts.append(HostSlots(check_host_name(name), _slots(slots) if slots else 1))
    if not hosts:
        raise UsageError(f"{flag} names no host")
    return hosts


def read_hostfile(path: str | Path) -> list[HostSlots]:
    """(host, slots) from an Open MPI style hostfile (`host slots=N`, comments with #)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_HOSTFILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"hostfile {shown(str(path))}: {exc.strerror or exc}") from None
    if len(data) > MAX_HOSTFILE_BYTES:
        raise UsageError(
            f"hostfile {shown(str(path))}: larger than {MAX_HOSTFILE_BYTES >> 20} MiB, not a "
            "hostfile"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"hostfile {shown(str(path))}: not UTF-8 text (byte {exc.start}), not a hostfile"
        ) from None
    hosts: list[HostSlots] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        slots = 1
        for word in words[1:]:
            key, _, value = word.partition("=")
            count = _slots(value)
            if key in ("slots", "max_slots", "max-slots") and count is not None:
                if key == "slots":
                    slots = count
            else:
                raise UsageError(
                    f"hostfile {shown(str(path))}:{number}: cannot read {word!r} "
                    f"(expected slots=N, N in 1..{MAX_SLOTS})"
                )
        try:
            name = check_host_name(words[0])
        except UsageError as exc:
            raise UsageError(f"hostfile {shown(str(path))}:{number}: {exc}") from None
        hosts.append(HostSlots(name, slots))
    if not hosts:
        raise UsageError(f"hostfile {shown(str(path))}: names no host")
    return hosts


def _slots(text: str) -> int | None:
    """A count of slots in 1..MAX_SLOTS, or None (`isdigit` alone takes `²` and 10**22)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    count = int(text)
    return count if 1 <= count <= MAX_SLOTS else None


def total_slots(hosts: Iterable[tuple[str, int]]) -> int:
    return sum(slots for _, slots in hosts)


def check_host_name(name: str) -> str:
    """`name` when it is a host name (letters, digits, `.`, `_`, `-`); UsageError otherwise. A
    hostfile line or `-H` entry is `name slots=N` or `name:N`: a blank, a comma or a line break in
    a name would add hosts or slots that nobody asked for."""
    if not isinstance(name, str) or not _HOST_NAME.fullmatch(name):
        raise UsageError(
            f"host name {name!r} is not a host name (letters, digits, '.', '_', '-', "
            "not starting with '-'; at most 253)"
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
