"""Run records (JSON lines) -> one pandas DataFrame with a column per record field.

Loading is tolerant by design: a half-written last line, failed or timed-out runs, records
from an older schema that lack newer fields, and studies with a single repetition all load;
what was odd about the data is collected in `Study.notes` so the report can say so. A record
whose sections are not objects (`config: "notadict"`) is left out, and a number outside the
range its declared unit allows (an accuracy of inf or -1e300, a negative time) is left out of
the record's row: the notes name both, and no figure, table or sentence shows them.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from archbench.analysis.fidelity import fidelity_notes
from archbench.analysis.fmt import placement_label
from archbench.analysis.labels import data_label, model_label, record_model_labels, short_names
from archbench.analysis.machine_load import overload_note
from archbench.analysis.quality import run_metric
from archbench.common.bandwidth import bits_or_none, link_bandwidth_bits
from archbench.common.errors import UsageError
from archbench.record import RunRecord, read_lines, study_files
from archbench.record.keys import BYTES, COUNT, PER_STEP, RATE, REAL_S, SHARE, S, declared
from archbench.record.keys import field as declared_field
from archbench.runtime import virtualtime
from archbench.runtime.settings import SERVER_PLACEMENTS

# Factor names that mark repetitions of one configuration, not a factor of the study.
REPLICATE_NAMES = frozenset({"rep", "repetition", "repeat", "replicate", "seed", "run", "run_id"})
# Factors that define the workload (what is trained) rather than how it is trained; the loss
# is the task (classes or values: accuracy and RMSE never share a comparison).
WORKLOAD_NAMES = frozenset({"model", "dataset", "workload", "text_file", "loss"})
# Config keys that follow from other settings or name the run, so they are never factors.
DERIVED_CONFIG_KEYS = frozenset(
    {
        "global_batch_size",
        "seed",
        "out",
        "run_id",
        "study",
        "steps_run",
        "dataset_source",
        "dataset_sha256",  # follows from the data set
        "timeline",
    }
)
# The placements of a parameter server a study names (dedicated, colocated, one-host), spelled
# as settings and records spell them; the report's labels for them are archbench.analysis.fmt's.
PLACEMENTS = SERVER_PLACEMENTS
# A run's throughput at a slow (p90) and a fast (p10) step: its within-run spread.
AT_STEP_P90, AT_STEP_P10 = "samples_per_s_at_step_p90", "samples_per_s_at_step_p10"

# Columns read as text (the others as numbers, NaN where absent or not a number).
TEXT_COLUMNS = frozenset(
    {"arch", "model", "dataset", "compression", "priority", "sparse_exchange", "data_partition",
     "param_partition", "timeline_file", "loss", "model_label", "model_sha256", "model_file",
     "model_source", "dataset_sha256"}
)  # fmt: skip
# Short column name -> dotted record field (each declared in archbench.record.keys), read for
# every record (NaN where absent).
FIELD_COLUMNS: dict[str, str] = {
    "arch": "config.arch",
    "model": "config.model",
    "dataset": "config.dataset",
    # a user's model and data (their short labels and digests name them in the report)
    "model_label": "model_stats.label",
    "model_sha256": "model_stats.sha256",
    "model_file": "model_stats.file",
    "model_source": "model_stats.source",
    "dataset_sha256": "config.dataset_sha256",
    "loss": "config.loss",
    "batch_size": "config.batch_size",
    "global_batch_size": "config.global_batch_size",
    "num_ps": "config.num_ps",
    "samples_per_s": "timing.samples_per_s",
    "train_s": "timing.train_s",
    "epoch_s": "timing.epoch_s",
    "samples_per_epoch": "timing.samples_per_epoch",
    "wall_s": "timing.wall_s",
    "cpus_per_node": "cluster.cpus_per_node",  # records from before time dilation
    "dilation": "cluster.dilation",
    "companions": "config.companions",
    "machine_idle_share": "fidelity.machine_idle_share",
    "cap_cost_ratio": "fidelity.cap_cost_ratio",
    "step_s": "timing.step_s_median",
    "step_s_p10": "timing.step_s_p10",
    "step_s_p90": "timing.step_s_p90",
    "compute_s": "timing.compute_s_median",
    "comm_s": "timing.comm_s_median",
    "test_accuracy": "result.test_accuracy",
    "test_rmse": "result.test_rmse",
    "final_loss": "result.final_loss",
    "target_accuracy": "result.target_accuracy",
    "time_to_target_s": "result.time_to_target_s",
    "bytes_per_step": "comm.bytes_sent_per_step",
    "step_s_amortized": "timing.step_s_amortized",
    # communication reductions (the speed-vs-accuracy section)
    "compression": "config.compression",
    "sync_every": "config.sync_every",
    "partition_mb": "config.partition_mb",
    "priority": "config.priority",
    "sparse_exchange": "config.sparse_exchange",
    "data_partition": "config.data_partition",
    "param_partition": "config.param_partition",
    "data_partition_s": "comm.partition.data_partition_s",
    "param_partition_s": "comm.partition.param_partition_s",
    "pipelined_s": "comm.tensor_partition.pipelined_median_s",
    "first_layer_lead_s": "comm.tensor_partition.first_layer_lead_median_s",
    "params": "model_stats.params",
    "cores": "env.cores",
    # --timeline (the timelines section): figures read from each run's trace
    "timeline_file": "timeline.file",
    "timeline_overlap": "timeline.overlap",
    "timeline_step_s": "timeline.step_s",
    "timeline_comm_s": "timeline.comm_s",
    "timeline_hidden_s": "timeline.comm_hidden_s",
    "timeline_exposed_s": "timeline.comm_exposed_s",
    "timeline_wait_s": "timeline.wait_s",
    "timeline_compute_s": "timeline.compute_s",
    "timeline_coverage": "timeline.coverage_min",
    "timeline_span_coverage": "timeline.span_coverage_min",
    "timeline_throttled_s": "timeline.throttled_s",
    "timeline_cost": "timeline.cost.ratio",
    "load_avg_start": "env.load_avg_start",
    "load_avg_end": "env.load_avg_end",
}
FIELD_COLUMNS = {column: declared_field(dotted) for column, dotted in FIELD_COLUMNS.items()}

# Units of amounts, never negative: archbench.record.keys' own and the settings' the report reads.
_AMOUNT_UNITS = frozenset({S, REAL_S, RATE, BYTES, PER_STEP, COUNT, "samples", "steps", "MB",
                           "processes"})  # fmt: skip


def _declared_range(dotted: str) -> tuple[float, float]:
    """The values a field's declared unit allows: a share in [0, 1], an amount never negative,
    anything else any finite number."""
    key = declared(dotted)
    unit = key.unit if key is not None else ""
    if unit == SHARE:
        return (0.0, 1.0)
    return (0.0, math.inf) if unit in _AMOUNT_UNITS else (-math.inf, math.inf)


# Every number the report reads, with the range its declared unit allows: a record that says
# otherwise (NaN step time, infinite throughput, a negative epoch, an accuracy of inf or -1e300)
# names the run in the report's data quality notes, and the value is left out (NaN) so that no
# figure, table, ranking or sentence uses it. The final loss is read as written: a diverged
# run's is NaN by design.
RANGED_FIELDS: dict[str, tuple[float, float]] = {
    dotted: _declared_range(dotted)
    for dotted in (
        *(d for c, d in FIELD_COLUMNS.items() if c not in TEXT_COLUMNS),
        declared_field("timing.exposed_comm_s"),
    )
    if dotted != "result.final_loss"
}
MEASURED_FIELDS: tuple[str, ...] = tuple(RANGED_FIELDS)

# Fields whose absence in successful runs limits what the report can show.
EXPECTED_FIELDS: tuple[str, ...] = tuple(
    declared_field(dotted) if dotted != "factors" else dotted
    for dotted in (
        "config.arch",
        "cluster.num_workers",
        "timing.samples_per_s",
        "timing.train_s",
        "timing.step_s_median",
        "timing.compute_s_median",
        "timing.comm_s_median",
        "timing.exposed_comm_s",
        "timing.epochs",
        "result.test_accuracy",
        "result.test_rmse",
        "result.time_to_target_s",
        "factors",
    )
)
# The test quality a run records is its task's: accuracy for classes, RMSE for values
# (archbench.analysis.quality); the other is null by design, not missing.
EXPECTED_FOR_METRIC = {"result.test_accuracy": "accuracy", "result.test_rmse": "rmse"}


@dataclass
class Study:
    """The records of one study, flattened, with what was odd about them."""

    name: str
    sources: list[Path]
    frame: pd.DataFrame  # every kept record (ok and not ok), one row each
    factors: list[str]  # factor names; each has a column "factors.<name>"
    factors_declared: bool  # True when the records carry the sweep's `factors`
    notes: list[str] = field(default_factory=list)
    # a user's models and data sets: 'label: the spec as given (sha256 …)', one line each
    workload_sources: list[str] = field(default_factory=list)
    folder: Path | None = None  # the study folder it was read from; None for records files

    @property
    def ok(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] == "ok"]

    @property
    def not_ok(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] != "ok"]

    @property
    def workload_factors(self) -> list[str]:
        return [name for name in self.factors if name in WORKLOAD_NAMES]

    @property
    def config_factors(self) -> list[str]:
        return [name for name in self.factors if name not in WORKLOAD_NAMES]


def factor_column(name: str) -> str:
    return f"factors.{name}"


def find_record_files(path: Path) -> list[Path]:
    """The JSON-lines files of a study (archbench.record's one rule)."""
    return study_files(path)


def read_records(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Records through archbench.record's reader (cut lines skipped, older schemas migrated)."""
    lines = read_lines(paths)
    for record, source, file in zip(lines.records, lines.sources, lines.files, strict=True):
        record["_source"] = source
        record["_file"] = file
    return lines.records, lines.bad


def flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted keys; lists (hosts, roles, epochs) are kept whole."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat[name] = value  # keep the whole too, so "factors" can be tested for presence
            flat.update(flatten(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


def normalise_placement(level: Any) -> Any:
    """Map the many ways of naming a placement (e.g. a hostfile's name) onto `dedicated` /
    `colocated`, as records spell them."""
    if not isinstance(level, str):
        return level
    # A hostfile path names its layout in its file name (e.g. hostfiles/ps-dedicated.txt).
    text = level.lower().replace("_", "-").rsplit("/", 1)[-1]
    if any(word in text for word in ("colocated", "co-located", "shared", "beside")):
        return "colocated"
    if any(word in text for word in ("dedicated", "separate")):
        return "dedicated"
    return level


def placement_from_hosts(record: RunRecord) -> str | None:
    """`dedicated` when no PS rank shares a host with a worker, else `colocated` (the record's
    placement; None for runs without servers, or hosts unknown)."""
    placement = record.placement
    return placement if placement in ("dedicated", "colocated") else None


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def record_factors(flat: dict[str, Any]) -> dict[str, Any]:
    """The factor levels a record lists: top-level `factors`, or the sweep's `sweep.factors`."""
    for key in ("factors", "sweep.factors"):
        value = flat.get(key)
        if isinstance(value, dict):
            return value
    return {}


def normalise_level(name: str, value: Any) -> Any:
    """One spelling per level: placements unified, a boolean `sync` as sync/async."""
    lowered = name.lower()
    if "placement" in lowered:
        return normalise_placement(value)
    if lowered == "sync" and isinstance(value, bool):
        return "sync" if value else "async"
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _worst_node(nodes: Any, key: str) -> float:
    """The largest value of `key` over a record's emulated nodes (NaN where none has it)."""
    if not isinstance(nodes, dict):
        return math.nan
    values = [_number(node.get(key)) for node in nodes.values() if isinstance(node, dict)]
    values = [value for value in values if not math.isnan(value)]
    return max(values) if values else math.nan


def _crowded_node(flat: dict[str, Any]) -> str:
    """The busiest node of a dilated run where its processes, each capped at
    `fidelity.vcpus_per_process` virtual cores, want more than the node's
    `fidelity.vcpus_per_node`: the node cannot give each the cores the dilation promised, as a
    host of that many cores could not. "" elsewhere (and where the record lacks the keys)."""
    hosts, node_vcpus, process_vcpus = (
        flat.get("cluster.hosts"),
        _number(flat.get("fidelity.vcpus_per_node")),
        _number(flat.get("fidelity.vcpus_per_process")),
    )
    capped = _number(flat.get("fidelity.dilation")) > 0  # NaN compares False: no caps, no promise
    if not capped or not isinstance(hosts, list) or not hosts:
        return ""
    if math.isnan(node_vcpus + process_vcpus):
        return ""
    host, processes = Counter(hosts).most_common(1)[0]
    if not virtualtime.crowded(processes, node_vcpus, process_vcpus):
        return ""
    return (
        f"{host} holds {processes} processes of {process_vcpus:g} virtual core each on its "
        f"{node_vcpus:g}"
    )


def _ps_link_bytes(flat: dict[str, Any]) -> float:
    """Bytes per step on the busier direction of the first PS host's link (emulated runs)."""
    nodes, hosts, roles = (
        flat.get("fidelity.nodes"),
        flat.get("cluster.hosts"),
        flat.get("cluster.roles"),
    )
    if not (isinstance(nodes, dict) and isinstance(hosts, list) and isinstance(roles, list)):
        return math.nan
    for host, role in zip(hosts, roles, strict=False):
        node = nodes.get(str(host).split(".")[0]) if "ps" in str(role).lower() else None
        if isinstance(node, dict) and "wire_bytes_sent_per_step" in node:
            return max(node["wire_bytes_sent_per_step"], node["wire_bytes_received_per_step"])
    return math.nan


def _link_use(flat: dict[str, Any], link: Any) -> float:
    """The busiest node's bytes per step (the larger direction, from its link's counters) over
    the exchange phase of the probe steps (`timing.comm_s_median`), as a share of the link's
    rate: how close the architecture's exchange came to the wire (NaN off an emulated cluster)."""
    nodes = flat.get("fidelity.nodes")
    busiest = max(
        _worst_node(nodes, "wire_bytes_sent_per_step"),
        _worst_node(nodes, "wire_bytes_received_per_step"),
    )
    exchange_s = _number(flat.get("timing.comm_s_median"))
    try:
        rate_bits = link_bandwidth_bits(link)
    except UsageError:  # a link the record names in no form of a rate
        return math.nan
    if math.isnan(busiest) or math.isnan(exchange_s) or exchange_s <= 0 or not rate_bits:
        return math.nan
    return busiest / exchange_s / (rate_bits / 8)


def implausible_values(flat: dict[str, Any]) -> dict[str, str]:
    """{field: what is wrong} for the numbers of a record that are not finite or are outside
    their declared range (a missing one, null, is not among them)."""
    found = {}
    for dotted, (low, high) in RANGED_FIELDS.items():
        value = flat.get(dotted)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        try:
            value = float(value)
        except OverflowError:  # an integer of hundreds of digits
            value = math.inf
        if math.isnan(value):
            found[dotted] = "NaN"
        elif math.isinf(value):
            found[dotted] = "infinite"
        elif value < low:
            found[dotted] = f"negative ({value:g})" if low == 0 else f"below {low:g} ({value:g})"
        elif value > high:
            found[dotted] = f"above {high:g} ({value:g})"
    return found


def shape_problem(record: dict[str, Any]) -> str | None:
    """What makes `record` not of a run record's shape (a section declared an object that holds
    something else), or None."""
    for name, value in record.items():
        key = None if name.startswith("_") or value is None else declared(name)
        if key is not None and key.type in ("object", "mapping") and not isinstance(value, dict):
            return f"{name} is {type(value).__name__}, not an object"
    return None


def _well_shaped(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a run record's shape, and 'run: problem' for each left out."""
    kept, left_out = [], []
    for record in records:
        problem = shape_problem(record)
        if problem is None:
            kept.append(record)
        else:
            left_out.append(f"{record.get('run_id') or record['_source']}: {problem}")
    return kept, left_out


def _row(flat: dict[str, Any], record: RunRecord) -> dict[str, Any]:
    """Short, typed analysis columns derived from one flattened record."""
    row: dict[str, Any] = {}
    implausible = implausible_values(flat)
    row["implausible"] = implausible
    for column, dotted in FIELD_COLUMNS.items():
        value = None if dotted in implausible else flat.get(dotted)
        row[column] = value if column in TEXT_COLUMNS else _number(value)
    row["status"] = str(flat.get("status") or "unknown")
    row["metric"] = run_metric(row["loss"], row["test_accuracy"], row["test_rmse"])
    row["run_id"] = flat.get("run_id")
    workers = record.workers
    row["workers"] = math.nan if workers is None else workers
    declared = record_factors(flat)
    row["link"] = record.link
    row["sync_mode"] = record.sync_mode
    # Samples per step over the step time, as `samples_per_s` is over the median step.
    for column, step in ((AT_STEP_P90, row["step_s_p90"]), (AT_STEP_P10, row["step_s_p10"])):
        row[column] = row["global_batch_size"] / step if step > 0 else math.nan
    # An older record that did not measure it holds the whole exchange time (archbench.record's
    # migration says so in `derived`).
    exposed = (
        math.nan
        if "timing.exposed_comm_s" in implausible
        else _number(flat.get("timing.exposed_comm_s"))
    )
    derivations = record.raw.get("derived")
    source = derivations.get("timing.exposed_comm_s") if isinstance(derivations, dict) else None
    row["exposed_from"] = (
        None if math.isnan(exposed) else (source or "timing.exposed_comm_s").split(".", 1)[1]
    )
    row["exposed_comm_s"] = max(exposed, 0.0) if not math.isnan(exposed) else math.nan
    per_rank = flat.get("timing.compute_s_median_per_rank")
    dispatch = flat.get("timing.dispatch_s_per_rank")
    if not isinstance(per_rank, list):
        per_rank = []
    shares = flat.get("timing.compute_core_share_per_rank")
    if not isinstance(dispatch, list) or len(dispatch) != len(per_rank):
        dispatch = [None] * len(per_rank)  # older records: no dispatch timed
    if not isinstance(shares, list) or len(shares) != len(per_rank):
        shares = [None] * len(per_rank)  # older records: no CPU metered
    workers = [
        (value, call, share)
        for value, call, share in zip(per_rank, dispatch, shares)
        if value is not None
    ]
    row["compute_s_per_worker"] = [_number(value) for value, _, _ in workers]
    row["dispatch_s_per_worker"] = [_number(call) for _, call, _ in workers]
    row["core_share_per_worker"] = [_number(share) for _, _, share in workers]
    row["emulated"] = bool(flat.get("fidelity.emulated"))
    row["core_wait_share"] = _worst_node(flat.get("fidelity.nodes"), "core_wait_share")
    row["crowded_node"] = _crowded_node(flat)
    # Nodes computing at once: a W-worker run's workers, a baseline's own and its companions'.
    row["load_nodes"] = (
        row["workers"]
        if record.multi_process
        else 1 + (0 if math.isnan(row["companions"]) else row["companions"])
    )
    row["ps_link_bytes_per_step"] = _ps_link_bytes(flat)
    row["link_use"] = _link_use(flat, record.link)
    epochs = flat.get("timing.epochs")
    row["epochs"] = epochs if isinstance(epochs, list) else []
    derived = placement_from_hosts(record)
    named = next(
        (
            normalise_placement(v)
            for v in (
                *(declared[k] for k in declared if "placement" in k.lower()),
                flat.get("config.placement"),
            )
            if v is not None
        ),
        None,
    )
    row["placement_hosts"] = derived
    # The study's own name for the placement where it is one of the two PS layouts; else the
    # layout the hosts show (e.g. a packed or spread policy, or a hostfile).
    placement = named if named in PLACEMENTS else derived
    row["placement"] = placement if record.has_servers else None
    error = flat.get("error")
    row["error"] = (
        f"{error.get('type', 'error')}: {error.get('message', '')}".strip()
        if isinstance(error, dict)
        else (str(error) if error else None)
    )
    return row


def _config_value(flat: dict[str, Any], row: dict[str, Any], name: str) -> Any:
    """A factor level read from the record when the record does not list it in `factors`."""
    lowered = name.lower()
    if lowered in ("workers", "num_workers", "np", "world_size"):
        return row["workers"] if lowered != "world_size" else flat.get("cluster.world_size")
    if lowered in ("link", "bandwidth"):
        return row["link"]
    if "placement" in lowered:
        return row["placement"]
    for prefix in ("config.", "cluster."):
        if f"{prefix}{name}" in flat:
            return flat[f"{prefix}{name}"]
    return None


def _hashable(value: Any) -> Any:
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value


def _dedupe(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """One record per run id: the last successful one, else the last one (retried runs)."""
    chosen: dict[Any, dict[str, Any]] = {}
    anonymous: list[dict[str, Any]] = []
    for record in records:
        run_id = record.get("run_id")
        if run_id is None:
            anonymous.append(record)
            continue
        previous = chosen.get(run_id)
        if previous is None or record.get("status") == "ok" or previous.get("status") != "ok":
            chosen[run_id] = record
    kept = list(chosen.values()) + anonymous
    return kept, len(records) - len(kept)


def level_sort_key(level: Any) -> tuple[int, float, str]:
    """Order levels numerically where they are numbers (2 < 10), else by name; None last."""
    if _is_missing(level):
        return (2, 0.0, "")
    number = _number(level)
    if not math.isnan(number):
        return (0, number, "")
    # "100mbit" < "1gbit": compare bandwidths by their value in bits/s.
    bandwidth = bits_or_none(str(level))
    if bandwidth is not None:
        return (0, bandwidth, str(level))
    return (1, 0.0, str(level))


def format_level(level: Any) -> str:
    """A factor level as a short label: 2.0 -> '2', True -> 'true', None -> 'n/a', a placement
    by its label ('colocated' -> 'co-located')."""
    if _is_missing(level):
        return "n/a"
    if isinstance(level, bool):
        return "true" if level else "false"
    if isinstance(level, float) and level.is_integer():
        return str(int(level))
    return placement_label(level)


# Read from the derived columns instead (the sweep also copies them into config).
DERIVED_COLUMNS = {"workers": "workers", "link": "link", "placement": "placement"}
CONFIG_ALIASES = {"bandwidth": "link", "workers": "workers", "placement": "placement"}


def _infer_factors(frame: pd.DataFrame, flats: list[dict[str, Any]]) -> list[str]:
    """Without declared factors: the settings that vary among runs of the same architecture.

    A setting that changes only together with the architecture (e.g. the fusion buffer, set
    for ring and absent for single) is part of what the architecture is, not a factor.
    """
    is_ok = (frame["status"] == "ok").to_numpy()
    use = is_ok if is_ok.any() else [True] * len(flats)
    rows = [flat for flat, keep in zip(flats, use, strict=True) if keep]
    archs = [str(flat.get("config.arch")) for flat in rows]
    names: list[str] = []
    if len(set(archs)) > 1:
        names.append("arch")

    def varies_within_an_arch(values: list[Any]) -> bool:
        seen: dict[str, set[Any]] = {}
        for arch, value in zip(archs, values, strict=True):
            if not _is_missing(value):
                seen.setdefault(arch, set()).add(_hashable(value))
        return any(len(levels) > 1 for levels in seen.values())

    config_keys = sorted({k for flat in rows for k in flat if k.startswith("config.")})
    for key in config_keys:
        name = key.removeprefix("config.")
        if name in DERIVED_CONFIG_KEYS or name in CONFIG_ALIASES or name == "arch" or "." in name:
            continue
        if varies_within_an_arch([flat.get(key) for flat in rows]):
            names.append(name)
    subset = frame.loc[list(use)]
    for name, column in DERIVED_COLUMNS.items():
        if varies_within_an_arch(list(subset[column])):
            names.append(name)
    # The architecture first, then the workload: the study's main factors.
    return sorted(names, key=lambda n: (n != "arch", n not in WORKLOAD_NAMES))


def config_label(levels: dict[str, Any]) -> str:
    """'arch=ring workers=2' for the levels that apply (n/a levels left out)."""
    parts = [f"{k}={format_level(v)}" for k, v in levels.items() if not _is_missing(v)]
    return " ".join(parts) if parts else "(one configuration)"


def load_study(path: Path) -> Study:
    """Read a study folder (or one records file) into a Study; UsageError when nothing loads."""
    default_name = path.name if path.is_dir() else path.stem
    study = load_files(find_record_files(path), default_name)
    study.folder = path if path.is_dir() else None
    return study


def load_files(sources: list[Path], default_name: str = "") -> Study:
    """Read the records of several files as one study; UsageError when nothing loads."""
    for source in sources:
        if not source.is_file():
            raise UsageError(f"no such file: {source}")
    raw, bad_lines = read_records(sources)
    raw, misshapen = _well_shaped(raw)
    if not any(isinstance(r.get("config"), dict) and "status" in r for r in raw):
        where = ", ".join(str(p) for p in sources)
        other = f" ({len(raw)} JSON line(s), none with a status and a config)" if raw else ""
        if misshapen:
            other = f" ({len(misshapen)} not of a run record's shape: {misshapen[0]})"
        raise UsageError(f"no run records in {where}{other}")
    records, superseded = _dedupe(raw)
    flats = [flatten({k: v for k, v in r.items() if not k.startswith("_")}) for r in records]
    rows = [_row(flat, RunRecord(r)) for flat, r in zip(flats, records, strict=True)]
    frame = pd.DataFrame(rows)
    frame["source"] = [r["_source"] for r in records]
    frame["file"] = [r["_file"] for r in records]
    name_workloads(frame)

    listed = [record_factors(flat) for flat in flats]
    declared = any(listed)
    if declared:
        seen: dict[str, None] = {}
        for levels in listed:
            seen.update(dict.fromkeys(levels))
        factors = [n for n in seen if n.lower() not in REPLICATE_NAMES]
        factors.sort(key=lambda n: (n != "arch", n not in WORKLOAD_NAMES))
    else:
        factors = _infer_factors(frame, flats)

    for name in factors:
        values = []
        for flat, row, levels in zip(flats, rows, listed, strict=True):
            if levels:
                # A factor a record does not list does not apply to its architecture.
                value = levels.get(name)
            else:
                value = _config_value(flat, row, name)  # older record: read its settings
            values.append(_hashable(normalise_level(name, value)))
        if name in SHORT_NAMED:
            values = _short_levels(frame, name, values)
        frame[factor_column(name)] = pd.Series(values, index=frame.index, dtype=object)

    frame["workload"] = _workload_labels(frame, [n for n in factors if n in WORKLOAD_NAMES])
    config_names = [n for n in factors if n not in WORKLOAD_NAMES]
    frame["config"] = [
        config_label({n: frame.at[i, factor_column(n)] for n in config_names}) for i in frame.index
    ]

    name = next((str(r["study"]) for r in records if r.get("study")), "") or default_name
    study = Study(
        name=name,
        sources=sources,
        frame=frame,
        factors=factors,
        factors_declared=declared,
    )
    study.notes.extend(_quality_notes(study, flats, bad_lines, superseded, misshapen))
    study.workload_sources = workload_sources(study.frame)
    return study


# The workload columns shown by a short name: the spec as given stays in `<name>_spec`.
SHORT_NAMED = ("model", "dataset")


def name_workloads(frame: pd.DataFrame) -> None:
    """`model` and `dataset` become the short names the report shows (archbench.analysis.labels);
    the specs as the records hold them move to `model_spec` and `dataset_spec`."""
    for name in SHORT_NAMED:
        frame[f"{name}_spec"] = frame[name]
    specs = list(frame["model_spec"])
    labels = record_model_labels(specs, list(frame["model_label"]))
    frame["model"] = short_names(specs, labels, list(frame["model_sha256"]))
    specs = list(frame["dataset_spec"])
    labels = [data_label(spec) for spec in specs]
    frame["dataset"] = short_names(specs, labels, list(frame["dataset_sha256"]))


def _short_levels(frame: pd.DataFrame, name: str, levels: list[Any]) -> list[Any]:
    """A model or data set factor's levels by the run's short name: the level a run lists is its
    spec (a sweep's `sweep.factors`), so each run's own name replaces it (a level that is not
    the run's spec, its label alone)."""
    spec, shown = frame[f"{name}_spec"], frame[name]
    label = model_label if name == "model" else data_label
    return [
        shown.iat[i] if isinstance(level, str) and level == spec.iat[i] else label(level)
        for i, level in enumerate(levels)
    ]


def workload_sources(frame: pd.DataFrame) -> list[str]:
    """One line per user's model or data set: its short name, the spec as given and the digest
    of its file(s), so a short name can be traced back to what was trained."""
    lines = []
    for name, digest in (("model", "model_sha256"), ("dataset", "dataset_sha256")):
        hashed = frame[frame[digest].map(lambda sha: isinstance(sha, str) and bool(sha))]
        # a built-in one has no digest: its name says all
        for _, run in hashed.drop_duplicates(subset=[name]).iterrows():
            spec = run[f"{name}_spec"]
            what = f"`{spec}`"
            if name == "model" and isinstance(run["model_file"], str):
                kind = run["model_source"] if isinstance(run["model_source"], str) else "model"
                # a module's spec names no file: say which one was trained
                where = "" if run["model_file"] in str(spec) else f" in {run['model_file']}"
                what += f" ({kind}{where})"
            lines.append(f"{name} `{run[name]}`: {what}, sha256 {run[digest][:16]}…")
    return lines


def _workload_labels(frame: pd.DataFrame, workload_factors: list[str]) -> list[str]:
    """'mlp/fashion_mnist' style labels; only the parts that vary, so labels stay short: the
    model first, then the data, and the loss only where the rest does not already tell it."""
    order = ("model", "dataset", "text_file", "workload")
    names = sorted(workload_factors, key=lambda n: order.index(n) if n in order else len(order))
    if "loss" in names and len(names) > 1:
        rest = frame[[factor_column(n) for n in names if n != "loss"]].astype(str)
        if (
            frame.assign(_rest=rest.agg("/".join, axis=1))
            .groupby("_rest")[factor_column("loss")]
            .nunique(dropna=False)
            <= 1
        ).all():
            names.remove("loss")  # each model/data set trains with one loss: it says nothing
    parts = [factor_column(n) for n in names]
    if not parts:
        model = frame["model"].fillna("?").astype(str)
        dataset = frame["dataset"].fillna("?").astype(str)
        if model.nunique() > 1 or dataset.nunique() <= 1:
            return list(model if dataset.nunique() <= 1 else model + "/" + dataset)
        return list(dataset)
    labels = []
    for i in frame.index:
        labels.append("/".join(format_level(frame.at[i, c]) for c in parts))
    return labels


def _quality_notes(
    study: Study,
    flats: list[dict[str, Any]],
    bad_lines: list[str],
    superseded: int,
    misshapen: list[str],
) -> list[str]:
    notes: list[str] = []
    frame = study.frame
    if misshapen:
        shown = "; ".join(misshapen[:5]) + (" ..." if len(misshapen) > 5 else "")
        notes.append(
            f"{len(misshapen)} record(s) were not of a run record's shape and were left out: "
            f"{shown}."
        )
    if bad_lines:
        shown = ", ".join(bad_lines[:5]) + (" ..." if len(bad_lines) > 5 else "")
        notes.append(
            f"{len(bad_lines)} line(s) were not complete JSON records (e.g. half-written) "
            f"and were ignored: {shown}."
        )
    if superseded:
        notes.append(
            f"{superseded} earlier record(s) of re-run configurations were superseded "
            "by their newer record."
        )
    odd = [
        (str(run_id or source), found)
        for run_id, source, found in zip(
            frame["run_id"], frame["source"], frame["implausible"], strict=True
        )
        if found
    ]
    if odd:
        shown = "; ".join(
            f"{run}: " + ", ".join(f"{field} {what}" for field, what in found.items())
            for run, found in odd[:5]
        ) + (" ..." if len(odd) > 5 else "")
        notes.append(
            f"{len(odd)} run(s) recorded values that cannot be (not finite, or outside their "
            "range: a negative time or size, a share beyond 0..1); those values are left out of "
            f"every figure, table and ranking: {shown}."
        )
    not_ok = study.not_ok
    if len(not_ok):
        counts = not_ok["status"].value_counts()
        what = ", ".join(f"{n} {status}" for status, n in counts.items())
        notes.append(
            f"{len(not_ok)} of {len(frame)} runs did not finish ({what}); "
            "they are left out of every figure and table."
        )
    ok_flats = [f for f, s in zip(flats, frame["status"], strict=True) if s == "ok"]
    ok_metrics = [m for m, s in zip(frame["metric"], frame["status"], strict=True) if s == "ok"]
    for dotted in EXPECTED_FIELDS:
        pool = ok_flats
        if dotted in EXPECTED_FOR_METRIC:
            pool = [
                f
                for f, metric in zip(ok_flats, ok_metrics, strict=True)
                if metric == EXPECTED_FOR_METRIC[dotted]
            ]
        if dotted == "factors":
            missing = sum(1 for f in ok_flats if not record_factors(f))
        else:
            # a NaN is named above as a value that cannot be, not counted as missing
            missing = sum(
                1
                for f in pool
                if (_is_missing(f.get(dotted)) and dotted not in implausible_values(f))
                or f.get(dotted) == []
            )
        if not missing:
            continue
        if dotted == "result.time_to_target_s":
            continue  # null is legitimate: the run did not reach its target
        if dotted == "factors":
            if not study.factors_declared:
                inferred = ", ".join(study.factors) or "none"
                notes.append(
                    "The records do not list the study's factors; they were inferred from "
                    f"the settings that vary: {inferred}."
                )
            else:
                notes.append(
                    f"{missing} successful record(s) do not list the study's factors "
                    "(older schema); their levels were read from their settings."
                )
            continue
        notes.append(
            f"{missing} of {len(pool)} successful records lack `{dotted}` "
            "(older schema or not measured); figures that need it use the others."
        )
    ok = study.ok
    if len(ok):
        reps = ok.groupby(["workload", "config"]).size()
        if reps.max() <= 1:
            notes.append(
                "Every configuration was measured once (a single repetition): there is no "
                "spread over repetitions, so the throughput figures show each run's own "
                "spread instead (the throughput at its p90 and p10 step time)."
            )
        elif reps.min() <= 1:
            notes.append(
                f"{int((reps <= 1).sum())} of {len(reps)} configurations have a single "
                "successful repetition: they have no spread over repetitions; where a "
                "figure can, it shows the run's own step p10-p90 spread instead."
            )
        overloaded = overload_note(ok[ok["cpus_per_node"].isna() & ok["dilation"].isna()])
        if overloaded:
            notes.append(overloaded)
        notes.extend(fidelity_notes(ok))
    return notes
