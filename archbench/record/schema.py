"""The run record's schema: its version, the keys every record carries, and how a record of an
older version is brought up to this one when it is read. Every key, with its type, unit and the
version since which records carry it, is declared in archbench.record.keys.

Each version's migration is named by the version it brings a record to (`migrate_to_2`,
`migrate_to_3`); the one reader (archbench.record.io) applies them in order, says from which
version a record came in `migrated_from`, and names what a migration worked out in `derived`
(dotted key -> what it was derived from). A record of a version newer than this one is refused
with one line.

Version 2 adds `cluster.placement`, the canonical placement stored at write time (`dedicated`:
no server shares a host with a worker; `colocated`: one does; `spread`: no servers, workers on
more than one host; null: one host without servers, or hosts unknown). `migrate_to_2` works it
out from a version 1 record's hosts and roles the same way, and writes a boolean `config.sync`
as "sync" / "async".

Version 3 declares every key (archbench.record.keys). Keys were added under version 2 after
records of it had been written; `migrate_to_3` derives those that follow from what an older
record holds, as training writes them now: `timing.epoch_s` (and `timing.samples_per_epoch`),
one epoch of the configured data set at the median step's throughput; `config.sync_every` /
`config.sync_every_warmup_steps` (a run written before the setting existed synchronized every
step: 1 and 0 where the setting applies, null elsewhere); `config.compression` of a p2p or ps
run written when only ring could compress (null then) is "none", what those runs did;
`timing.step_s_amortized`, the median step (what it is without --sync-every) where that is a
number;
`timing.exposed_comm_s`, the whole exchange time (`comm_s_median`) where the part not hidden
by overlap was not measured; `result.time_to_target_s`, read off the evaluation curve.
"""

from __future__ import annotations

import math
from typing import Any

from archbench.common.errors import UsageError
from archbench.runtime.settings import SETTINGS, TRAIN_SIZES

SCHEMA_NAME = "archbench.run"
VERSION = 3
SCHEMA = f"{SCHEMA_NAME}/{VERSION}"
OLDER_SCHEMAS = tuple(f"{SCHEMA_NAME}/{version}" for version in range(1, VERSION))
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
        # Records without it predate a user's own data sets: a built-in one's size is known.
        config = record.get("config")
        samples = built_in_train_size(config if isinstance(config, dict) else {})
        if samples is None:
            return
        timing["samples_per_epoch"] = int(samples)
        _derived(record, "timing.samples_per_epoch", "config.dataset")
    timing["epoch_s"] = samples / rate
    _derived(record, "timing.epoch_s", "timing.samples_per_epoch / timing.samples_per_s")


def built_in_train_size(config: dict[str, Any]) -> int | None:
    """Training samples of a built-in or synthetic data set, known without loading it."""
    dataset = str(config.get("dataset") or SETTINGS["dataset"].default)
    if dataset == "synthetic":
        return int(config.get("synthetic_samples") or SETTINGS["synthetic_samples"].default)
    return TRAIN_SIZES.get(dataset)


def derive_sync_every(record: dict[str, Any]) -> None:
    """`config.sync_every` and its warm-up for a record written before they existed."""
    config = record.get("config")
    if not isinstance(config, dict) or "sync_every" in config or "arch" not in config:
        return

    applies = SETTINGS["sync_every"].applies(str(config["arch"]))
    config["sync_every"] = 1 if applies else None
    config.setdefault("sync_every_warmup_steps", 0 if applies else None)
    _derived(record, "config.sync_every", "config.arch")


def derive_compression(record: dict[str, Any]) -> None:
    """`config.compression` for a p2p or ps record written when compression was ring's alone
    (null there then): those runs sent dense gradients, which is "none" now."""
    config = record.get("config")
    if not isinstance(config, dict) or "arch" not in config or config.get("compression"):
        return

    if SETTINGS["compression"].applies(str(config["arch"])):
        config["compression"] = "none"
        _derived(record, "config.compression", "config.arch")


def derive_step_s_amortized(record: dict[str, Any]) -> None:
    """`timing.step_s_amortized` for a record written before --sync-every: the median step,
    which is what the amortized step is when one kind of step ran."""
    timing = record.get("timing")
    if not isinstance(timing, dict) or "step_s_amortized" in timing:
        return
    if number_or_none(timing.get("step_s_median")) is not None:
        timing["step_s_amortized"] = timing["step_s_median"]
        _derived(record, "timing.step_s_amortized", "timing.step_s_median")


def derive_exposed_comm_s(record: dict[str, Any]) -> None:
    """`timing.exposed_comm_s` where an older record did not measure it (absent or null): the
    whole exchange time stands in for the part not hidden by overlap."""
    timing = record.get("timing")
    if not isinstance(timing, dict) or number_or_none(timing.get("exposed_comm_s")) is not None:
        return
    comm = number_or_none(timing.get("comm_s_median"))
    if comm is not None:
        timing["exposed_comm_s"] = timing["comm_s_median"]
        _derived(record, "timing.exposed_comm_s", "timing.comm_s_median")


def derive_time_to_target_s(record: dict[str, Any]) -> None:
    """`result.time_to_target_s` for a record written before training stored it: the training
    time of the first evaluation at or above `result.target_accuracy` (null: not reached)."""
    result, timing = record.get("result"), record.get("timing")
    if not isinstance(result, dict) or "time_to_target_s" in result:
        return
    target = number_or_none(result.get("target_accuracy"))
    if target is None:
        return
    points = timing.get("epochs") if isinstance(timing, dict) else None
    reached = first_point_at(points if isinstance(points, list) else [], target)
    result["time_to_target_s"] = reached[1] if reached else None
    _derived(record, "result.time_to_target_s", "timing.epochs")


def _derived(record: dict[str, Any], dotted: str, source: str) -> None:
    derived = record.setdefault("derived", {})
    if isinstance(derived, dict):
        derived[dotted] = source


def migrate_to_2(record: dict[str, Any]) -> None:
    """A version 1 record as version 2 writes it: `config.sync` as text, `cluster.placement`."""
    config = record.get("config")
    if isinstance(config, dict) and isinstance(config.get("sync"), bool):
        config["sync"] = "sync" if config["sync"] else "async"
    cluster = record.get("cluster")
    if isinstance(cluster, dict) and "placement" not in cluster:
        cluster["placement"] = placement_of(cluster.get("hosts"), cluster.get("roles"))


def migrate_to_3(record: dict[str, Any]) -> None:
    """A version 2 record as version 3 writes it: the keys added under version 2 after it was
    written, where they follow from what it holds (see the module's docstring)."""
    derive_epoch_s(record)
    derive_sync_every(record)
    derive_compression(record)
    derive_step_s_amortized(record)
    derive_exposed_comm_s(record)
    derive_time_to_target_s(record)


# Each version's migration, by the version it brings a record to; applied in order.
MIGRATIONS = {2: migrate_to_2, 3: migrate_to_3}


class NewerSchema(UsageError):
    """A record written by a newer archbench than this one."""


def version_of(schema: Any) -> int:
    """The version a record's `schema` names: N of "archbench.run/N" (or a bare N); 1 for a
    record that names none it can be read as (the first schema's records, and older ones)."""
    text = str(schema) if isinstance(schema, str | int) and not isinstance(schema, bool) else ""
    name, _, number = text.rpartition("/")
    if name in (SCHEMA_NAME, "") and number.isdigit():
        return max(1, int(number))
    return 1


def migrate(record: dict[str, Any]) -> dict[str, Any]:
    """The record as this schema writes it, in place: each migration from its version's on, in
    order (saying from which version in `migrated_from`). Raises NewerSchema for a version this
    archbench does not know."""
    if not isinstance(record, dict):
        return record
    schema = record.get("schema")
    version = version_of(schema)
    if version > VERSION:
        raise NewerSchema(
            f"run record schema {schema} is newer than this archbench reads ({SCHEMA}): "
            "read it with a newer archbench"
        )
    if version == VERSION and schema == SCHEMA:
        return record
    for target in range(version + 1, VERSION + 1):
        MIGRATIONS[target](record)
    record["migrated_from"] = schema
    record["schema"] = SCHEMA
    return record
