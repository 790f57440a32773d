"""The hosts of a Slurm allocation, from the variables Slurm sets inside `salloc`/`sbatch`.

Host names come from `scontrol show hostnames $SLURM_JOB_NODELIST` (Slurm's own expansion of
`node[01-04,07]`); slots per host from SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE or
SLURM_JOB_CPUS_PER_NODE, whose compressed form is `2(x3),1` (2 on each of three hosts, then 1).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping

from archbench.common.errors import UsageError
from archbench.common.hosts import MAX_SLOTS, HostSlots, check_host_name

_COUNT = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")
MAX_ALLOCATION_NODES = 65_536  # far above any allocation; bounds a garbage `(xN)`
# Slots come from the first of these that is set: tasks first (one rank per task), then CPUs.
SLOT_VARIABLES = ("SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE")


def parse_counts(text: str, num_hosts: int | None = None) -> list[int]:
    """Expands Slurm's per-node counts: '2(x3),1' -> [2, 2, 2, 1]; '4' on 3 hosts -> [4, 4, 4]."""
    counts: list[int] = []
    for part in text.strip().split(","):
        match = _COUNT.fullmatch(part.strip())
        if not match:
            raise UsageError(f"cannot read Slurm per-node count {text!r} (expected e.g. 2(x3),1)")
        value, repeat = int(match.group(1)), int(match.group(2) or 1)
        # bounded before the list is built: `2(x99999999999)` would fill the memory
        if not 1 <= value <= MAX_SLOTS or repeat > MAX_ALLOCATION_NODES:
            raise UsageError(
                f"Slurm per-node count {text!r} is out of range (1..{MAX_SLOTS} slots, at most "
                f"{MAX_ALLOCATION_NODES} nodes)"
            )
        counts.extend([value] * repeat)
    if num_hosts is not None and len(counts) != num_hosts:
        if len(counts) == 1:  # SLURM_NTASKS_PER_NODE=4 is one value for every node
            return counts * num_hosts
        raise UsageError(
            f"Slurm per-node count {text!r} gives {len(counts)} values for {num_hosts} hosts"
        )
    return counts


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list in pure Python: 'gpu[01-03,7],login1' -> gpu01 gpu02 gpu03 gpu7 login1.

    Used when `scontrol` is not on PATH; handles one bracket group per name, as Slurm prints them.
    """
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        match = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]([^\[\]]*)", item)
        if not match:
            if "[" in item or "]" in item or not item:
                raise UsageError(f"cannot read Slurm node list {text!r}")
            hosts.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for piece in ranges.split(","):
            if "-" in piece:
                low, high = piece.split("-", 1)
                if not (low.isdigit() and high.isdigit()) or not (
                    0 <= int(high) - int(low) < MAX_ALLOCATION_NODES
                ):
                    raise UsageError(f"cannot read Slurm node list {text!r} (range {piece!r})")
                width = len(low)
                hosts.extend(
                    f"{prefix}{n:0{width}d}{suffix}" for n in range(int(low), int(high) + 1)
                )
            elif piece.isdigit():
                hosts.append(f"{prefix}{piece}{suffix}")
            else:
                raise UsageError(f"cannot read Slurm node list {text!r} (item {piece!r})")
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Splits on commas outside brackets."""
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def scontrol_hostnames(nodelist: str, env: Mapping[str, str] | None = None) -> list[str]:
    """`scontrol show hostnames NODELIST`, one host per line (our own expansion without scontrol)."""
    try:
        completed = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=30,
            env=dict(env) if env is not None else None,
        )
    except FileNotFoundError:  # a container inside the allocation may lack Slurm's client tools
        return expand_nodelist(nodelist)
    except subprocess.TimeoutExpired:
        raise UsageError("scontrol show hostnames did not answer within 30 s") from None
    if completed.returncode != 0:
        detail = (completed.stderr or completed.stdout).strip().splitlines()
        raise UsageError(
            f"scontrol show hostnames {nodelist} failed: {detail[-1] if detail else completed.returncode}"
        )
    hosts = [line.strip() for line in completed.stdout.splitlines() if line.strip()]
    if not hosts:
        raise UsageError(f"scontrol show hostnames {nodelist} printed no hosts")
    return hosts


def allocation_hosts(env: Mapping[str, str] | None = None) -> list[HostSlots]:
    """(host, slots) for every node of the current allocation; UsageError outside one."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError(
            "--cluster slurm: SLURM_JOB_NODELIST is not set (run inside salloc or sbatch)"
        )
    hosts = scontrol_hostnames(nodelist, env)
    for variable in SLOT_VARIABLES:
        if env.get(variable):
            slots = parse_counts(env[variable], len(hosts))
            break
    else:
        slots = [1] * len(hosts)
    # scontrol's names go to the launcher as any hostfile's do: checked the same way
    return [
        HostSlots(check_host_name(host), count) for host, count in zip(hosts, slots, strict=True)
    ]
