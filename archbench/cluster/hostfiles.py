"""Hostfiles for a cluster that is up: Open MPI's format and horovodrun's `-H` form.

Both files are plain host lines with no comments: `<cluster>.txt` is read by
`mpirun --hostfile` and also by `horovodrun --hostfile`, whose parser takes every line as
`host slots=N`; `<cluster>.hosts` is one line for `horovodrun -H "$(cat hostfiles/<cluster>.hosts)"`.
"""

from __future__ import annotations

import re
from pathlib import Path

from archbench.cluster.sshd import project_root
from archbench.common.errors import UsageError
from archbench.common.hosts import HostSlots, host_list_text, hostfile_text

_GENERATED_LINE = re.compile(r"[a-z-]+\d+ slots=\d+")


def hostfiles_dir() -> Path:
    return project_root() / "hostfiles"


def hostfile_paths(cluster: str) -> tuple[Path, Path]:
    directory = hostfiles_dir()
    return directory / f"{cluster}.txt", directory / f"{cluster}.hosts"


def texts(nodes: list[str], slots: int) -> tuple[str, str]:
    """The two files' text: Open MPI's hostfile and horovodrun's `-H` line."""
    return _mpi_text(nodes, slots), _horovod_text(nodes, slots)


def _mpi_text(nodes: list[str], slots: int) -> str:
    return hostfile_text(HostSlots(node, slots) for node in nodes)


def _horovod_text(nodes: list[str], slots: int) -> str:
    return host_list_text(HostSlots(node, slots) for node in nodes) + "\n"


def _looks_generated(mpi_file: Path) -> bool:
    """A file `up` could have written (only uniform `<prefix>K slots=S` lines)."""
    try:
        lines = mpi_file.read_text().splitlines()
    except FileNotFoundError:
        return True
    return bool(lines) and all(_GENERATED_LINE.fullmatch(line) for line in lines)


def check_hostfiles_free(cluster: str) -> None:
    """Refuse to overwrite a hand-written hostfile that has the cluster's name."""
    for path in hostfile_paths(cluster):
        if path.exists() and not _looks_generated(hostfile_paths(cluster)[0]):
            raise UsageError(
                f"{path} exists and was not written by `archbench cluster up`; pick another --name"
            )


def write_hostfiles(cluster: str, nodes: list[str], slots: int) -> list[Path]:
    mpi_file, horovod_file = hostfile_paths(cluster)
    mpi_text, horovod_text = texts(nodes, slots)
    mpi_file.parent.mkdir(parents=True, exist_ok=True)
    mpi_file.write_text(mpi_text)
    horovod_file.write_text(horovod_text)
    return [mpi_file, horovod_file]


def remove_hostfiles(cluster: str, nodes: list[str], slots: int) -> None:
    """Delete the hostfiles `up` wrote, and only if they still say what `up` wrote."""
    mpi_file, horovod_file = hostfile_paths(cluster)
    for path, text in (
        (mpi_file, _mpi_text(nodes, slots)),
        (horovod_file, _horovod_text(nodes, slots)),
    ):
        try:
            if path.read_text() == text:
                path.unlink()
        except FileNotFoundError:
            pass
