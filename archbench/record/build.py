"""The one builder of run records: training writes it for a finished or failed run, the sweep for
a run that could not write its own (a crash, a timeout, a configuration the command refused)."""

from __future__ import annotations

from typing import Any

from archbench.archs import arch as architecture
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
