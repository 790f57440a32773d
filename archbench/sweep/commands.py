"""The exact command of a run: rank layout over hosts, the hostfile, and the launcher's argv.

Ranks fill hostfile lines in order (`--map-by slot` for mpirun; horovodrun does the same), so a
layout is a list of (host, ranks) blocks in rank order. For `ps`, ranks 0..K-1 are the parameter
servers and the rest are workers (archbench.train's convention), so:

- `packed`: fill hosts in order up to their slots;
- `spread`: ranks split as evenly as possible over as many hosts as there are ranks;
- `dedicated` (ps): the PS ranks alone on the first host, workers spread over the others;
- `colocated` (ps): the same worker hosts as `dedicated`, with the PS ranks on the first of them;
- `one-host` (ps): every rank, servers and workers, on the first host (within its slots);
- any other placement level is a hostfile path: read (its host names checked, as every
  hostfile's are) and filled in order; the launcher reads the run's own hostfile written from it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from archbench.common.archs import MULTI_PROCESS
from archbench.common.archs import arch as architecture
from archbench.common.errors import UsageError
from archbench.common.hosts import HostSlots, read_hostfile, total_slots
from archbench.common.mpirun import mpirun_argv
from archbench.runtime.settings import PLACEMENT_POLICIES, SETTINGS
from archbench.sweep.target import ClusterTarget

Layout = tuple[HostSlots, ...]  # (host, ranks on it) in rank order


def _split(ranks: int, bins: int) -> list[int]:
    base, extra = divmod(ranks, bins)
    return [base + (1 if index < extra else 0) for index in range(bins)]


def _check_slots(
    layout: list[tuple[str, int]], hosts: dict[str, int], config: dict[str, Any], what: str
) -> Layout:
    for host, ranks in layout:
        if ranks > hosts[host]:
            raise UsageError(
                f"configuration {_describe(config)}: {what} puts {ranks} ranks on {host}, which has "
                f"{hosts[host]} slots (raise cluster.slots, or exclude this configuration)"
            )
    return tuple(HostSlots(host, ranks) for host, ranks in layout if ranks > 0)


def _describe(config: dict[str, Any]) -> str:
    keys = ("arch", "workers", "num_ps", "placement")
    return " ".join(f"{key}={config[key]}" for key in keys if key in config)


def layout_for(config: dict[str, Any], target: ClusterTarget) -> Layout:
    """Where each rank of this configuration goes; UsageError when the cluster cannot hold it."""
    descriptor = architecture(config["arch"])
    if not descriptor.multi_process:
        # The baseline on the first host; its companions one per host after it.
        ranks = 1 + config.get("companions", 0)
        if ranks > len(target.hosts) and not target.one_host:
            raise UsageError(
                f"configuration {_describe(config)} companions={ranks - 1}: {ranks} hosts needed, "
                f"the {target.kind} cluster has {len(target.hosts)}"
            )
        if target.one_host:
            return (HostSlots(target.hosts[0][0], ranks),)
        return tuple(HostSlots(host, 1) for host, _ in target.hosts[:ranks])
    workers = config["workers"]
    num_ps = descriptor.servers(config.get("num_ps"))
    world = descriptor.processes(workers, config.get("num_ps"))
    placement = config.get("placement", "packed")
    if placement not in PLACEMENT_POLICIES:
        hosts = read_hostfile(placement)
        if total_slots(hosts) < world:
            raise UsageError(
                f"configuration {_describe(config)}: {world} ranks but hostfile {placement} has "
                f"{total_slots(hosts)} slots"
            )
        return tuple(_fill(hosts, world))
    hosts = list(target.hosts)
    if world > target.total_slots:
        raise UsageError(
            f"configuration {_describe(config)}: {world} ranks but the {target.kind} cluster has "
            f"{target.total_slots} slots (raise cluster.slots, or exclude this configuration)"
        )
    capacity = dict(hosts)
    names = [name for name, _ in hosts]
    if target.one_host or placement == "packed":
        return tuple(_fill(hosts, world))
    if placement == "spread":
        used = names[: min(world, len(names))]
        return _check_slots(
            list(zip(used, _split(world, len(used)), strict=True)), capacity, config, "spread"
        )
    # dedicated / colocated / one-host: only ps keeps these levels (normalisation drops them)
    if placement == "one-host":
        return _check_slots([(names[0], world)], capacity, config, placement)
    if placement == "dedicated":
        worker_hosts = names[1 : 1 + min(workers, len(names) - 1)]
        shares = _split(workers, len(worker_hosts))
        blocks = [(names[0], num_ps), *zip(worker_hosts, shares, strict=True)]
    else:
        # Beside worker 0: the workers spread over every host, the servers join the first.
        worker_hosts = names[: min(workers, len(names))]
        blocks = list(zip(worker_hosts, _split(workers, len(worker_hosts)), strict=True))
        blocks[0] = (blocks[0][0], blocks[0][1] + num_ps)
    return _check_slots(blocks, capacity, config, placement)


def _fill(hosts: list[HostSlots], world: int) -> list[HostSlots]:
    blocks, left = [], world
    for host, slots in hosts:
        if left == 0:
            break
        take = min(slots, left)
        blocks.append(HostSlots(host, take))
        left -= take
    return blocks


def train_argv(config: dict[str, Any], python: str, out: str, run_id: str, study: str) -> list[str]:
    """`python -m archbench.train ...` with every train setting of the configuration."""
    argv = [python, "-m", "archbench.train"]
    for name, value in config.items():
        flag = SETTINGS[name].train_flag
        if not flag or value is None:  # None: a setting left unset (its default)
            continue
        if name == "sync":
            argv.append("--sync" if value else "--async")
        else:
            argv += [flag, str(value)]
    argv += ["--out", out, "--run-id", run_id, "--study", study]
    return argv + list(config.get("extra_args", []))


def horovodrun_path(python: str) -> str:
    """The horovodrun installed beside the interpreter that runs training."""
    candidate = Path(python).parent / "horovodrun"
    return str(candidate) if candidate.exists() else "horovodrun"


def launch_argv(
    config: dict[str, Any],
    train: list[str],
    hostfile: str | None,
    world_size: int,
    launcher_args: list[str],
    forward_env: list[str],
) -> list[str]:
    """The whole command: train alone without a hostfile (`single` on localhost), else under
    mpirun or horovodrun (`single` on a cluster: one rank on the first host, under mpirun)."""
    if hostfile is None:
        return train
    if config["arch"] in MULTI_PROCESS and config.get("launcher", "mpirun") == "horovodrun":
        argv = [horovodrun_path(train[0]), "-np", str(world_size), "--hostfile", hostfile]
        if config.get("controller"):
            argv.append(f"--{config['controller']}")
        return argv + launcher_args + train
    return mpirun_argv(world_size, hostfile, train, forward_env, launcher_args)


def default_python() -> str:
    return sys.executable or "python3"


def shell_line(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The command as one line a person can paste into a shell."""
    prefix = " ".join(f"{key}={shlex.quote(value)}" for key, value in (env or {}).items())
    return (prefix + " " if prefix else "") + shlex.join(argv)
