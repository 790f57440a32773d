"""Run records of a study -> the model's inputs (StepConfig) and the measured step times."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archbench.errors import UsageError
from archbench.perfmodel import formulas as F
from archbench.perfmodel.calibration import is_finite_positive, read_jsonl
from archbench.perfmodel.modelinfo import variable_bytes_for
from archbench.perfmodel.predictor import StepConfig
from archbench.perfmodel.units import emulated_burst_bytes, link_bandwidth_bits

PS_ROLES = frozenset({"ps", "server", "parameter_server"})


@dataclass(frozen=True)
class Observation:
    """One successful run: what was configured and what was measured."""

    run_id: str
    config: StepConfig
    config_key: str  # identical for repetitions of one configuration
    step_s: float
    compute_s: float | None
    comm_s: float | None
    record: dict[str, Any]

    @property
    def arch_key(self) -> str:
        return self.config.key


def _get(record: dict[str, Any], dotted: str, default: Any = None) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return default
        value = value[part]
    return value


def placement_from_record(record: dict[str, Any]) -> F.Placement:
    """Host and role per rank as the run recorded them.

    Without per-rank hosts, one host per rank is assumed (the cluster's usual layout).
    """
    cluster = record.get("cluster") or {}
    config = record.get("config") or {}
    world = int(cluster.get("world_size") or 0)
    hosts = list(cluster.get("hosts") or [])
    roles = [str(r).lower() for r in (cluster.get("roles") or [])]
    num_ps = (
        int(cluster.get("num_ps") or config.get("num_ps") or 0) if config.get("arch") == "ps" else 0
    )
    if not world:
        world = len(hosts) or int(cluster.get("num_workers") or 1) + num_ps
    if len(roles) != world:
        roles = ["ps"] * num_ps + ["worker"] * (world - num_ps)
    if len(hosts) != world:
        hosts = [f"rank{i}" for i in range(world)]
    return F.Placement(
        hosts=tuple(str(h) for h in hosts),
        roles=tuple(F.PS if r in PS_ROLES else F.WORKER for r in roles),
    )


def cpu_sharing_ranks(record: dict[str, Any], placement: F.Placement) -> int:
    """Processes competing for the chief worker's cores.

    On an emulated cluster every namespace runs on the same machine, so all ranks share its
    cores; on a real cluster (or one machine) only the ranks placed on the same host do.
    """
    cluster = record.get("cluster") or {}
    # archbench records a shaped link only for its emulated cluster (cluster.link is the tc
    # rate of its veths; None on real hosts and on one machine)
    emulated = bool(cluster.get("emulated")) or bool(cluster.get("link"))
    if emulated:
        return len(placement.hosts)
    workers = placement.worker_hosts
    chief_host = workers[0] if workers else placement.hosts[0]
    return sum(1 for h in placement.hosts if h == chief_host)


def config_key(record: dict[str, Any]) -> str:
    """A digest of everything that defines a configuration (not the seed or repetition)."""
    config = dict(record.get("config") or {})
    for noise in ("seed", "run_id", "out", "study"):
        config.pop(noise, None)
    cluster = record.get("cluster") or {}
    identity = {
        "config": config,
        "workers": cluster.get("num_workers"),
        "hosts": cluster.get("hosts"),
        "roles": cluster.get("roles"),
        "link": cluster.get("link"),
        "placement": (record.get("factors") or {}).get("placement"),
    }
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _is_sync(value: Any) -> bool:
    """The record writes "sync" / "async"; older records a boolean."""
    if isinstance(value, str):
        return value.lower() != "async"
    return value is not False


def observation_from_record(record: dict[str, Any]) -> Observation | None:
    """The observation of a successful run, or None when the record cannot be used."""
    if record.get("status") != "ok" or record.get("kind") not in (None, "run"):
        return None
    step_s = _get(record, "timing.step_s_median")
    param_bytes = _get(record, "model_stats.param_bytes")
    config = record.get("config") or {}
    if not is_finite_positive(step_s) or not is_finite_positive(param_bytes):
        return None
    arch = config.get("arch")
    if arch not in ("single", "ring", "p2p", "ps"):
        return None
    placement = placement_from_record(record)
    variable_bytes = variable_bytes_for(record) if arch == "ps" else None
    sharding = _get(record, "comm.ps.sharding") or {}
    plan = None
    if sharding.get("bytes_per_server") and sharding.get("variables_per_server"):
        plan = (
            tuple(float(b) for b in sharding["bytes_per_server"]),
            tuple(int(v) for v in sharding["variables_per_server"]),
        )
    step = StepConfig(
        arch=arch,
        model=str(config.get("model")),
        batch_size=int(config.get("batch_size") or 1),
        param_bytes=float(param_bytes),
        placement=placement,
        bandwidth_bits=link_bandwidth_bits(_get(record, "cluster.link")),
        sync=_is_sync(config.get("sync", True)),
        ps_sharding=str(config.get("ps_sharding") or "round-robin"),
        variable_bytes=variable_bytes,
        ps_plan=plan,
        fusion_threshold_mb=config.get("fusion_threshold_mb"),
        compression=str(config.get("compression") or "none"),
        p2p_schedule=str(config.get("p2p_schedule") or "staggered"),
        cpu_sharing_ranks=cpu_sharing_ranks(record, placement),
        link_burst_bytes=emulated_burst_bytes(_get(record, "cluster.link")),
    )
    compute = _get(record, "timing.compute_s_median")
    comm = _get(record, "timing.comm_s_median")
    return Observation(
        run_id=str(record.get("run_id")),
        config=step,
        config_key=config_key(record),
        step_s=float(step_s),
        compute_s=float(compute) if is_finite_positive(compute) else None,
        comm_s=float(comm) if isinstance(comm, int | float) and comm >= 0 else None,
        record=record,
    )


def study_records(study_dir: str | Path) -> list[dict[str, Any]]:
    """The run records of a study folder: the sweep's results.jsonl (one record per run),
    else every .jsonl under it (report/ and the sweep's per-run folders excluded). A run id
    seen twice keeps its last record."""
    folder = Path(study_dir)
    if not folder.is_dir():
        raise UsageError(f"study folder {folder} does not exist")
    paths = [folder / "results.jsonl"]
    if not paths[0].is_file():
        paths = [
            path
            for path in sorted(folder.rglob("*.jsonl"))
            if not {"report", "runs"} & set(path.relative_to(folder).parts[:-1])
        ]
    by_run: dict[str, dict[str, Any]] = {}
    for path in paths:
        for record in read_jsonl(path):
            if isinstance(record, dict):
                by_run[str(record.get("run_id", len(by_run)))] = record
    return list(by_run.values())


def study_observations(study_dir: str | Path) -> list[Observation]:
    records = study_records(study_dir)
    observations = [o for o in map(observation_from_record, records) if o is not None]
    if not observations:
        raise UsageError(f"no successful run records with step times under {study_dir}")
    return observations
