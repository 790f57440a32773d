"""The one builder of run records: training writes it for a finished or failed run, the sweep for
a run that could not write its own (a crash, a timeout, a configuration the command refused)."""

from __future__ import annotations

import re
from typing import Any

from archbench.common.archs import arch as architecture
from archbench.record.schema import SCHEMA, complete, placement_of


def cluster_section(
    arch: str,
    world_size: int,
    num_ps: int | None,
    hosts: list[str] | None,
    launcher: str,
    hostfile: str | None,
    link: str | None,
    **more: Any,
) -> dict[str, Any]:
    """The record's `cluster`: process counts and roles from the architecture's descriptor, and
    the canonical placement of those roles on `hosts` (roles only once every rank's host is
    known)."""
    descriptor = architecture(arch)
    known = isinstance(hosts, list) and len(hosts) == world_size
    roles = descriptor.roles(world_size, num_ps) if known else None
    return {
        "world_size": world_size,
        "num_workers": descriptor.workers(world_size, num_ps),
        "num_ps": descriptor.servers(num_ps),
        "hosts": hosts,
        "roles": roles,
        "launcher": launcher,
        **more,
        "hostfile": hostfile,
        "link": link,
        "placement": placement_of(hosts, roles),
    }


def build_record(
    *,
    run_id: str | None,
    study: str | None,
    status: str,
    started_at: str,
    finished_at: str,
    config: dict[str, Any],
    cluster: dict[str, Any],
    env: dict[str, Any],
    model_stats: dict[str, Any] | None = None,
    timing: dict[str, Any] | None = None,
    comm: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """A record of this schema with every contract key (None where a failed run has no value);
    `more` adds sections beyond the contract (e.g. `fidelity`), before `error`."""
    record = {
        "schema": SCHEMA,
        "run_id": run_id,
        "study": study,
        "status": status,
        "started_at": started_at,
        "finished_at": finished_at,
        "config": config,
        "cluster": cluster,
        "env": env,
        "model_stats": model_stats or {},
        "timing": timing or {},
        "comm": comm or {},
        "result": result or {},
        **more,
        "error": error,
    }
    if status != "ok":
        complete(record)
    return record


_RATE = re.compile(r"(^|_)per_s($|_)")  # samples_per_s, samples_per_s_wall (not per_step)
_DURATION = re.compile(r"(^|_)s($|_)")  # step_s_median, train_s, compute_s_median_per_rank


def _unit(key: str) -> bool:
    return bool(_RATE.search(key) or _DURATION.search(key))


def in_virtual_time(section: Any, dilation: float, key: str = "") -> Any:
    """A copy of a record section in virtual time on a cluster dilated by D: every duration
    (a key with an `_s` word: `train_s`, `step_s_median`, `compute_s_median_per_rank`, nested
    ones included) divided by D, every rate (`samples_per_s`) multiplied by it. Keys name their
    unit, so a new timing is converted without being listed here; the entries of a mapping
    whose key names a unit (`step_s_median_by_kind: {sync: ...}`) have that unit."""
    if isinstance(section, dict):
        inherited = key if _unit(key) else ""
        return {
            name: in_virtual_time(value, dilation, name if _unit(name) else inherited)
            for name, value in section.items()
        }
    if isinstance(section, list):
        return [in_virtual_time(value, dilation, key) for value in section]
    if dilation == 1 or isinstance(section, bool) or not isinstance(section, int | float):
        return section
    if _RATE.search(key):
        return section * dilation
    if _DURATION.search(key):
        return section / dilation
    return section
