"""The run record's schema: its version, the keys every record carries, and how a record of an
older version is brought up to this one when it is read.

Version 2 adds `cluster.placement`, the canonical placement stored at write time (`dedicated`:
no server shares a host with a worker; `colocated`: one does; `spread`: no servers, workers on
more than one host; null: one host without servers, or hosts unknown). Version 1 records are
migrated on read: their placement is worked out from their hosts and roles the same way, and a
boolean `config.sync` becomes "sync" / "async".

Keys added to a version after records of it were written are derived on read where the record
holds what they follow from: `timing.epoch_s` (and `timing.samples_per_epoch`), one epoch of the
configured data set at the median step's throughput, as training computes it now; and
`config.sync_every` / `config.sync_every_warmup_steps`: a run written before the setting existed
synchronized every step (1 and 0 where the setting applies, null elsewhere, as training writes
them now); `config.compression` of a p2p or ps run written when only ring could compress (null
then) is "none", what those runs did.
"""

from __future__ import annotations

import math
from typing import Any

SCHEMA = "archbench.run/2"
OLDER_SCHEMAS = ("archbench.run/1",)
PLACEMENTS = ("dedicated", "colocated", "spread")

# The contract (README, "Run record"): keys every record carries; more may be added, none renamed.
REQUIRED_KEYS = {
    "": (
        "schema",
        "run_id",
        "study",
        "status",
        "started_at",
        "finished_at",
        "config",
        "cluster",
        "env",
        "model_stats",
        "timing",
        "comm",
        "result",
        "error",
    ),
    "config": (
        "arch",
        "model",
        "dataset",
        "batch_size",
        "global_batch_size",
        "epochs",
        "steps",
        "lr",
        "optimizer",
        "seed",
        "sync",
        "num_ps",
        "ps_sharding",
        "controller",
        "fusion_threshold_mb",
        "cycle_time_ms",
        "compression",
    ),
    "cluster": (
        "world_size",
        "num_workers",
        "num_ps",
        "hosts",
        "roles",
        "launcher",
        "hostfile",
        "link",
        "placement",
    ),
    "env": (
        "python",
        "tensorflow",
        "horovod",
        "mpi",
        "mpi4py",
        "numpy",
        "cpu",
        "cores",
        "gpu",
        "archbench",
        "git_commit",
        "load_avg_start",
        "load_avg_end",
    ),
    "model_stats": ("params", "param_bytes"),
    "timing": (
        "wall_s",
        "train_s",
        "step_s_median",
        "step_s_p90",
        "compute_s_median",
        "comm_s_median",
        "samples_per_s",
        "epochs",
    ),
    "comm": ("bytes_sent_per_step", "bytes_total"),
    "result": ("final_loss", "test_accuracy", "param_norm", "target_accuracy", "time_to_target_s"),
}


def missing_keys(record: dict) -> list[str]:
    """Contract keys absent from a record ("section.key"); empty for a complete ok record."""
    missing = []
    for section, keys in REQUIRED_KEYS.items():
        holder = record if not section else record.get(section)
        if not isinstance(holder, dict):
            missing.append(section)
            continue
        missing.extend(f"{section}.{key}" if section else key for key in keys if key not in holder)
    return missing


def complete(record: dict[str, Any]) -> None:
    """Every contract key present (None where a failed run has no value), so readers need no guards."""
    for section, keys in REQUIRED_KEYS.items():
        holder = record if not section else record.get(section)
        if section and not isinstance(holder, dict):
            holder = record[section] = {}
        for key in keys:
            holder.setdefault(key, None)


def is_server_role(role: Any) -> bool:
    return "ps" in str(role).lower() or str(role).lower() in ("server", "parameter_server")


def placement_of(hosts: Any, roles: Any) -> str | None:
    """The canonical placement of ranks on hosts (see the module's docstring)."""
    if not isinstance(hosts, list) or not isinstance(roles, list) or len(hosts) != len(roles):
        return None
    server_hosts = {h for h, r in zip(hosts, roles, strict=True) if is_server_role(r)}
    worker_hosts = {h for h, r in zip(hosts, roles, strict=True) if not is_server_role(r)}
    if server_hosts:
        return "colocated" if server_hosts & worker_hosts else "dedicated"
    return "spread" if len(worker_hosts) > 1 else None


def number_or_none(value: Any) -> float | None:
    """A number read from a record; None for null, booleans, text and NaN."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def first_point_at(points: list[Any], target: float) -> tuple[int, float] | None:
    """(step, training seconds) of the first point of an evaluation curve (`timing.epochs`)
    whose test accuracy is at or above `target`, or None."""
    for point in points:
        if not isinstance(point, dict):
            continue
        accuracy = number_or_none(point.get("test_accuracy"))
        step, train_s = number_or_none(point.get("step")), number_or_none(point.get("train_s"))
        if accuracy is not None and accuracy >= target and step is not None and train_s is not None:
            return int(step), train_s
    return None


def derive_epoch_s(record: dict[str, Any]) -> None:
    """`timing.epoch_s` (and `samples_per_epoch`) for a record written before training stored
    them: the configured data set's training samples over the median step's throughput. Left
    out where the throughput or the data set's size is unknown (e.g. a failed run)."""
    timing = record.get("timing")
    if not isinstance(timing, dict) or number_or_none(timing.get("epoch_s")) is not None:
        return
    rate = number_or_none(timing.get("samples_per_s"))
    if rate is None or rate <= 0:
        return
    samples = number_or_none(timing.get("samples_per_epoch"))
    if samples is None:
        from archbench.perfmodel.model.modelinfo import train_size

        config = record.get("config")
        samples = number_or_none(train_size(config if isinstance(config, dict) else {}))
        if samples is None:
            return
        timing["samples_per_epoch"] = int(samples)
    timing["epoch_s"] = samples / rate


def derive_sync_every(record: dict[str, Any]) -> None:
    """`config.sync_every` and its warm-up for a record written before they existed."""
    config = record.get("config")
    if not isinstance(config, dict) or "sync_every" in config or "arch" not in config:
        return
    from archbench.settings import SETTINGS

    applies = SETTINGS["sync_every"].applies(str(config["arch"]))
    config["sync_every"] = 1 if applies else None
    config.setdefault("sync_every_warmup_steps", 0 if applies else None)


def derive_compression(record: dict[str, Any]) -> None:
    """`config.compression` for a p2p or ps record written when compression was ring's alone
    (null there then): those runs sent dense gradients, which is "none" now."""
    config = record.get("config")
    if not isinstance(config, dict) or "arch" not in config or config.get("compression"):
        return
    from archbench.settings import SETTINGS

    if SETTINGS["compression"].applies(str(config["arch"])):
        config["compression"] = "none"


def migrate(record: dict[str, Any]) -> dict[str, Any]:
    """The record as this schema writes it, in place: an older version is upgraded (and says
    from which version in `migrated_from`), and keys added since it was written are derived."""
    if not isinstance(record, dict):
        return record
    schema = record.get("schema")
    if schema != SCHEMA:
        config = record.get("config")
        if isinstance(config, dict) and isinstance(config.get("sync"), bool):
            config["sync"] = "sync" if config["sync"] else "async"
        cluster = record.get("cluster")
        if isinstance(cluster, dict) and "placement" not in cluster:
            cluster["placement"] = placement_of(cluster.get("hosts"), cluster.get("roles"))
        record["migrated_from"] = schema
        record["schema"] = SCHEMA
    derive_epoch_s(record)
    derive_sync_every(record)
    derive_compression(record)
    return record
