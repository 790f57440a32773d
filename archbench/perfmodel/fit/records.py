"""Run records of a study -> the model's inputs (StepConfig) and the measured step times."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archbench.common.archs import ARCHS, COMPANION_ROLE, gathers_rows
from archbench.common.archs import arch as architecture
from archbench.common.errors import UsageError
from archbench.perfmodel.measure.calibration import is_finite_positive
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.modelinfo import (
    embedding_shape,
    input_spec,
    ps_plan,
    shapes_only,
    vocab_of,
)
from archbench.perfmodel.model.predictor import StepConfig
from archbench.perfmodel.model.units import emulated_burst_bytes
from archbench.record import RunRecord, latest_per_run, read_lines, study_files
from archbench.record.keys import field
from archbench.record.schema import is_server_role, migrate


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


def placement_from_record(record: dict[str, Any]) -> F.Placement:
    """Host and role per rank as the run recorded them.

    Without per-rank hosts, one host per rank is assumed (the cluster's usual layout).
    """
    view = RunRecord(record)
    num_ps = view.servers
    hosts = view.hosts or []
    roles = [r.lower() for r in view.roles or []]
    world = view.world_size or len(hosts) or int(view.workers or 1) + num_ps
    if len(roles) != world:
        roles = architecture(view.arch).roles(world, num_ps) if view.arch in ARCHS else []
        roles = roles if len(roles) == world else ["ps"] * num_ps + ["worker"] * (world - num_ps)
    if len(hosts) != world:
        hosts = [f"rank{i}" for i in range(world)]
    # a baseline's companions load other nodes and neither train nor communicate
    kept = [(h, r) for h, r in zip(hosts, roles, strict=True) if r != COMPANION_ROLE] or [
        (hosts[0], roles[0])
    ]
    return F.Placement(
        hosts=tuple(h for h, _ in kept),
        roles=tuple(F.PS if is_server_role(r) else F.WORKER for _, r in kept),
    )


def cpu_sharing_ranks(record: dict[str, Any], placement: F.Placement) -> int:
    """Processes competing for the chief worker's cores.

    On an emulated cluster without time dilation every namespace runs on the same machine's
    cores, so all ranks share them; on a dilated one each node has cores of its own in virtual
    time, and, as on a real cluster (or one machine), only the ranks placed on the same host
    share them.
    """
    view = RunRecord(record)
    if view.emulated and not view.cluster.get("dilation"):
        return view.world_size or len(placement.hosts)
    workers = placement.worker_hosts
    chief_host = workers[0] if workers else placement.hosts[0]
    return sum(1 for h in placement.hosts if h == chief_host)


def config_key(record: dict[str, Any]) -> str:
    """A digest of everything that defines a configuration (not the seed or repetition)."""
    view = RunRecord(record)
    config = dict(view.config)
    for noise in ("seed", "run_id", "out", "study"):
        config.pop(noise, None)
    identity = {
        "config": config,
        "workers": view.cluster.get("num_workers"),
        "hosts": view.cluster.get("hosts"),
        "roles": view.cluster.get("roles"),
        "link": view.cluster.get("link"),
        "placement": (record.get("factors") or {}).get("placement"),
    }
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _shard_plan(view: RunRecord, num_ps: int) -> Any:
    """The plan the run recorded, else the PS trainer's planner's plan of its model."""
    sharding = view.get(field("comm.ps.sharding")) or {}
    if sharding.get("bytes_per_server") and sharding.get("variables_per_server"):
        return (
            tuple(float(b) for b in sharding["bytes_per_server"]),
            tuple(int(v) for v in sharding["variables_per_server"]),
        )
    try:
        shape, classes = input_spec(view.config)
        return ps_plan(
            str(view.config.get("model")), shape, classes, num_ps,
            str(view.config.get("ps_sharding") or "round-robin"), vocab_of(view.config),
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - a model or data not readable here only loses the plan
        return None


def _shapes(view: RunRecord) -> tuple | None:
    """The shapes of the record's model's variables (PowerSGD's factors); None when the model
    cannot be built, or a user's data read, here."""
    try:
        shape, classes = input_spec(view.config)
        return shapes_only(str(view.config.get("model")), shape, classes, vocab_of(view.config))
    except Exception:  # noqa: BLE001 - then PowerSGD is priced as the dense allreduce
        return None


def _sparse_rows(view: RunRecord) -> tuple[float | None, tuple[int, int] | None]:
    """(unique embedding rows a worker's batch touched per step, as the run counted them; the
    embedding's rows and width) of a run that exchanged rows sparse; (None, None) otherwise."""
    if view.config.get("sparse_exchange") != "sparse":
        return None, None
    rows = view.get(field("comm.sparse_exchange.rows_per_step"))
    try:
        shape, classes = input_spec(view.config)
        table = embedding_shape(
            str(view.config.get("model")), shape, classes, vocab_of(view.config)
        )
    except Exception:  # noqa: BLE001 - then the exchange is priced dense
        return None, None
    return (float(rows) if is_finite_positive(rows) else None), table


def _row_bytes_per_server(view: RunRecord) -> tuple[tuple[float, ...], ...] | None:
    """ps with sparse rows: each worker's row bytes to and from each server, as measured."""
    measured = view.get(field("comm.sparse_exchange.row_bytes_per_worker_per_server_per_step"))
    if not isinstance(measured, list) or not all(isinstance(row, list) for row in measured):
        return None
    try:
        return tuple(tuple(float(b) for b in row) for row in measured)
    except (TypeError, ValueError):
        return None


def observation_from_record(record: dict[str, Any]) -> Observation | None:
    """The observation of a successful run, or None when the record cannot be used. The record
    is read as this schema writes it (archbench.record's migration, which the reader has already
    applied to the records it read)."""
    view = RunRecord(migrate(record))
    if not view.ok or record.get("kind") not in (None, "run"):
        return None
    # the step over a round of local and averaging steps where --sync-every mixed them (it is
    # the median itself otherwise, and in records written before it existed: the reader's
    # migration gives them the median)
    step_s = view.get(field("timing.step_s_amortized"))
    param_bytes = view.get(field("model_stats.param_bytes"))
    config = view.config
    if not is_finite_positive(step_s) or not is_finite_positive(param_bytes):
        return None
    if view.arch not in ARCHS:
        return None
    placement = placement_from_record(record)
    servers = len(placement.ps_hosts)
    touched_rows, table = _sparse_rows(view)
    step = StepConfig(
        arch=view.arch,
        model=str(config.get("model")),
        batch_size=int(config.get("batch_size") or 1),
        param_bytes=float(param_bytes),
        placement=placement,
        bandwidth_bits=view.link_bits,
        sync=view.is_sync,
        ps_sharding=str(config.get("ps_sharding") or "round-robin"),
        ps_plan=_shard_plan(view, servers) if servers else None,
        fusion_threshold_mb=config.get("fusion_threshold_mb"),
        compression=str(config.get("compression") or "none"),
        compression_ratio=float(config.get("compression_ratio") or 0.01),
        powersgd_rank=int(config.get("powersgd_rank") or 2),
        variable_shapes=_shapes(view) if config.get("compression") == "powersgd" else None,
        p2p_schedule=str(config.get("p2p_schedule") or "staggered"),
        cpu_sharing_ranks=cpu_sharing_ranks(record, placement),
        link_burst_bytes=emulated_burst_bytes(
            view.cluster.get("link"), view.cluster.get("dilation")
        ),
        sync_every=int(config.get("sync_every") or 1),
        sparse_exchange=str(config.get("sparse_exchange") or "dense"),
        touched_rows=touched_rows,
        embedding_shape=table,
        # ring's record counts the rows it gathered, duplicates included
        rows_looked_up=touched_rows if gathers_rows(view.arch) else None,
        row_bytes_per_worker_per_server=_row_bytes_per_server(view),
    )
    compute = view.get(field("timing.compute_s_median"))
    comm = view.get(field("timing.comm_s_median"))
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
    """The run records of a study folder (archbench.record's one rule for a study's files);
    a run id seen twice keeps its last record."""
    folder = Path(study_dir)
    if not folder.is_dir():
        raise UsageError(f"study folder {folder} does not exist")
    try:
        files = study_files(folder)
    except UsageError:
        return []
    return latest_per_run(read_lines(files).records)


def study_observations(study_dir: str | Path) -> list[Observation]:
    records = study_records(study_dir)
    observations = [o for o in map(observation_from_record, records) if o is not None]
    if not observations:
        raise UsageError(f"no successful run records with step times under {study_dir}")
    return observations
