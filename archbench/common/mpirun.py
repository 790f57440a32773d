"""The `mpirun` command line every command starts ranks with: a study's runs (archbench.sweep),
doctor's jobs across hosts, microbench's measuring jobs. A leaf, so that the checks and the
measurements below the sweep need nothing of it."""

from __future__ import annotations

from collections.abc import Sequence

from archbench.common.hosts import host_list_text


def mpirun_argv(
    world_size: int,
    hosts: str | Sequence[tuple[str, int]],
    program: list[str],
    forward_env: Sequence[str] = (),
    launcher_args: Sequence[str] = (),
) -> list[str]:
    """`mpirun` starting `program` on `world_size` ranks over a hostfile (a path) or exactly these
    (host, ranks) blocks (`-H`): ranks fill the hosts in order (`--map-by slot`), none is bound
    to a core, and each variable of `forward_env` is passed on to every rank."""
    where = ["--hostfile", hosts] if isinstance(hosts, str) else ["-H", host_list_text(hosts)]
    argv = ["mpirun", "-np", str(world_size), *where, "--map-by", "slot", "--bind-to", "none"]
    for name in forward_env:
        argv += ["-x", name]
    return argv + list(launcher_args) + program
