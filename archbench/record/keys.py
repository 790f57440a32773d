"""Every key of the run record, declared once: its dotted path, type, unit, the schema version
since which records carry it, and who writes it (docs/record.md is the prose around this table).

A path's parts are dict keys; `*` stands for any key of a mapping whose keys are data (a node's
name, a step kind, a package). An `open` object's inner keys are its writer's own detail (an
architecture's shard plan, the compression's facts) and are not declared one by one; a
`mapping`'s keys are data. `only` says who writes a key that not every record has (None: every
record of its section's writer; a failed run's record holds None where it has no value).

Units: `s` is seconds of the run's training time: on a dilated emulated cluster that is virtual
time (real / D, archbench.record.build.in_virtual_time), and a rate (`samples/s`) is per virtual
second; `real s` is real seconds, never dilated (start-up, the emulation's own readings);
`share` is a fraction in [0, 1]; `count` a number of things; `bytes` a size; `bytes/step` bytes
per training step (averaged over every step, local ones included); `time` an ISO-8601 UTC time.
A key of the run's configuration has the unit of its setting (archbench.runtime.settings).

`since`: 1 for keys the first schema's records carry, 2 for keys written under version 2
(version 2 records written before a key was added lack it: where the key follows from what the
record holds, the reader's `migrate_to_3` adds it), 3 for keys new in version 3.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from archbench.runtime.phases import PHASES
from archbench.runtime.settings import SETTINGS, TRAIN_SETTINGS

S = "s"  # training time: virtual on a dilated cluster
REAL_S = "real s"  # real seconds, never dilated
RATE = "samples/s"  # per second of training time (virtual on a dilated cluster)
BYTES = "bytes"
PER_STEP = "bytes/step"
SHARE = "share"
COUNT = "count"
TIME = "time"
UNITS = {
    S: "seconds of training time; on a dilated emulated cluster virtual time (real / D)",
    REAL_S: "real seconds, never dilated",
    RATE: "samples per second of training time (virtual on a dilated cluster)",
    BYTES: "bytes",
    PER_STEP: "bytes per training step, averaged over every step",
    SHARE: "a fraction in [0, 1]",
    COUNT: "a number of things",
    TIME: "ISO-8601 UTC time",
}


@dataclass(frozen=True)
class Key:
    path: str  # dotted; `*` for any key of a mapping
    type: str  # str | int | float | bool | list | object | mapping | any
    unit: str  # one of UNITS, a setting's unit, or "" (none)
    since: int  # the schema version since which records carry it
    writer: str  # the code that writes it
    only: str | None = None  # who writes it where not every record has it
    open: bool = False  # an object whose inner keys are its writer's detail
    retired: bool = False  # only older records carry it; no longer written

    @property
    def section(self) -> str:
        return self.path.split(".", 1)[0] if "." in self.path else ""


_UNIT_WORDS = {"-": "", "real_s": REAL_S}  # the table's one-word spellings


def _keys(writer: str, since: int, rows: str, only: str | None = None, **flags) -> list[Key]:
    """Keys of one writer from lines `path type unit [since]` (unit `-` for none)."""
    out = []
    for line in rows.strip().splitlines():
        words = line.split()
        path, kind, unit = words[:3]
        out.append(
            Key(path, kind, _UNIT_WORDS.get(unit, unit),
                int(words[3]) if len(words) > 3 else since, writer, only, **flags)
        )  # fmt: skip
    return out


_RUN = "archbench.record.build"
_TOP = _keys(
    _RUN,
    1,
    """
    schema str -
    run_id str -
    study str -
    status str -
    started_at str time
    finished_at str time
    config object -
    cluster object -
    env object -
    model_stats object -
    timing object -
    comm object -
    result object -
    error object -
    """,
) + [
    Key("fidelity", "object", "", 2, "archbench.train (the chief's fidelity probe)", "training"),
    Key("launch", "object", "", 2, "archbench.train, archbench.sweep.records", "training, sweep"),
    Key("timeline", "object", "", 2, "archbench.timeline.tracer", "--timeline"),
    Key("sweep", "object", "", 1, "archbench.sweep.records", "the sweep"),
    Key("migrated_from", "str", "", 2, "archbench.record.schema (on read)", "older records"),
    Key("derived", "mapping", "", 3, "archbench.record.schema (on read)", "older records"),
    Key("factors", "mapping", "", 1, "older sweeps (now sweep.factors)", retired=True),
    Key("kind", "str", "", 1, "other JSON lines beside the records", "not a run record"),
]

# `config`: one key per train setting (archbench.runtime.settings owns their types and units), and the
# keys training and the sweep add.
_CONFIG_SINCE_1 = frozenset(
    "arch model dataset data_dir text_file synthetic_shape synthetic_classes synthetic_samples "
    "seq_len batch_size epochs steps lr momentum optimizer seed eval_every eval_samples "
    "target_accuracy warmup_steps probe_every threads out run_id study fusion_threshold_mb "
    "cycle_time_ms compression num_ps sync ps_sharding ps_timeout_s p2p_schedule "
    "global_batch_size controller steps_run dataset_source workers launcher".split()
)
_SETTING_TYPES = {"int": "int", "float": "float", "choice": "str", "str": "str", "bool": "str",
                  "shape": "list", "args": "list"}  # fmt: skip


def _config_keys() -> list[Key]:
    keys = []
    for row in TRAIN_SETTINGS:
        applies = sorted(row.applies_to)
        everywhere = len(applies) == len(SETTINGS["arch"].applies_to)
        keys.append(
            Key(f"config.{row.name}", _SETTING_TYPES[row.kind], row.unit,
                1 if row.name in _CONFIG_SINCE_1 else 2, "archbench.runtime.settings.record_config",
                None if everywhere else f"applies to {', '.join(applies)} (else its "
                f"not-applicable value)")
        )  # fmt: skip
    for name in ("workers", "placement", "bandwidth", "launcher"):
        row = SETTINGS[name]
        keys.append(
            Key(f"config.{name}", _SETTING_TYPES[row.kind], row.unit,
                1 if name in _CONFIG_SINCE_1 else 2, "archbench.sweep.records", "the sweep")
        )  # fmt: skip
    return (
        keys
        + _keys(
            "archbench.train",
            1,
            """
        config.global_batch_size int samples
        config.controller str -
        config.steps_run int count
        config.dataset_source str -
        """,
        )
        + _keys(
            "archbench.workloads.user_data.data_facts",
            3,
            "config.dataset_sha256 str -",
            "a user's data set (npz:, npy:, csv:, series:)",
        )
    )


_CLUSTER = _keys(
    "archbench.record.build.cluster_section",
    1,
    """
    cluster.world_size int count
    cluster.num_workers int count
    cluster.num_ps int count
    cluster.hosts list -
    cluster.roles list -
    cluster.launcher str -
    cluster.launcher_command str -
    cluster.hostfile str -
    cluster.link str bit/s
    cluster.placement str - 2
    """,
) + [
    Key("cluster.dilation", "float", "", 2, "archbench.train", "training (null: not dilated)"),
    Key("cluster.vcpus_per_node", "int", "count", 2, "archbench.train", "training"),
    Key(
        "cluster.slurm_job_id",
        "str",
        "",
        2,
        "archbench.train, archbench.sweep.records",
        "training; the sweep inside a Slurm allocation",
    ),  # fmt: skip
    Key("cluster.slurm_nodelist", "str", "", 2, "archbench.sweep.records", "sweep under Slurm"),
    Key("cluster.cpus_per_node", "float", "count", 1, "before time dilation", retired=True),
    Key("cluster.emulated", "bool", "", 1, "before the fidelity section", retired=True),
]

_ENV = _keys(
    "archbench.runtime.environment.environment",
    1,
    """
    env.python str -
    env.tensorflow str -
    env.horovod str -
    env.mpi str -
    env.mpi_transport object - 3
    env.mpi_transport.btl_tcp_flags str - 3
    env.mpi_transport.set_by str - 3
    env.mpi4py str -
    env.numpy str -
    env.cpu str -
    env.cores int count
    env.gpu list -
    env.archbench str -
    env.git_commit str -
    env.platform str -
    env.hostname str -
    env.command str -
    env.packages mapping - 2
    env.constraints object - 2
    env.constraints.sha256 str - 2
    env.constraints.pinned int count 2
    env.constraints.differs list - 2
    """,
) + _keys(
    "archbench.runtime.environment.run_environment",
    1,
    """
    env.load_avg_start float processes
    env.load_avg_end float processes
    """,
    "training",
)

_MODEL_STATS = _keys(
    "archbench.workloads.models.parameter_stats",
    1,
    """
    model_stats.params int count
    model_stats.param_bytes int bytes
    model_stats.tensors int count
    """,
) + _keys(
    "archbench.workloads.model_source.source_facts",
    3,
    """
    model_stats.label str -
    model_stats.source str -
    model_stats.file str -
    model_stats.sha256 str -
    """,
    "a user's model (FILE.py:FUNCTION, package.module:FUNCTION, FILE.keras / FILE.h5)",
)

_TIMING = (
    _keys("archbench.train", 1, "timing.wall_s float s")
    + _keys(
        "archbench.train",
        1,
        """
        timing.train_s float s
        timing.samples_per_epoch int samples 2
        timing.epoch_s float s 2
        timing.compute_s_median_per_rank list s 2
        timing.dispatch_s_per_rank list s 3
        timing.compute_core_share_per_rank list - 3
        timing.startup_s float s 2
        timing.eval_s float s 2
        timing.epochs list -
        """,
        "an ok run",
    )
    + _keys(
        "archbench.runtime.loop.step_statistics",
        1,
        """
        timing.step_s_median float s
        timing.step_s_p10 float s
        timing.step_s_p90 float s
        timing.step_s_mean float s
        timing.step_s_std float s
        timing.timed_steps int count
        timing.step_blocks int count 2
        timing.step_block_s float s 2
        timing.compute_s_median float s
        timing.comm_s_median float s
        timing.exposed_comm_s float s
        timing.probe_steps int count
        timing.compute_window_s float s 2
        timing.compute_passes_median float count 2
        timing.step_s_amortized float s 2
        timing.samples_per_s float samples/s
        timing.samples_per_s_wall float samples/s
        timing.warmup_s float s
        """,
        "an ok run",
    )
    + _keys(
        "archbench.runtime.loop.step_statistics",
        2,
        """
        timing.step_s_median_by_kind mapping s
        timing.comm_s_median_by_kind mapping s
        """,
        "--sync-every > 1 (ring, p2p, ps)",
    )
)

_COMM = (
    _keys(
        "Trainer.comm_stats",
        1,
        """
        comm.bytes_sent_per_step int bytes/step
        comm.bytes_received_per_step int bytes/step
        comm.bytes_total int bytes
        comm.bytes_method str -
        """,
    )
    + _keys("Trainer.comm_stats", 1, "comm.bytes_received_total int bytes", "p2p; ps")
    + _keys("Trainer.extra_record", 1, "comm.controller str -", "ring, p2p, ps")
    + _keys("RingTrainer.extra_record", 1, "comm.nccl_built bool -", "ring")
    + _keys("RingTrainer.extra_record", 2, "comm.allreduce_algorithm str -", "ring")
    + _keys(
        "P2PTrainer.extra_record",
        1,
        """
        comm.p2p_schedule str -
        comm.bytes_sent_per_step_per_rank list bytes/step
        comm.bytes_received_per_step_per_rank list bytes/step
        comm.gradient_encoding str -
        comm.densified_gradients list -
        comm.params_identical_across_ranks bool -
        """,
        "p2p",
    )
    + _keys("P2PTrainer.extra_record", 1, "comm.shard_plan object -", "p2p", open=True)
    + _keys(
        "archbench.compression.record",
        2,
        "comm.compression object -",
        "ring, p2p, ps with --compression topk or powersgd",
        open=True,
    )  # fmt: skip
    + _keys(
        "archbench.runtime.sparse_rows.record",
        2,
        "comm.sparse_exchange object -",
        "ring, p2p, ps",
        open=True,
    )  # fmt: skip
    + _keys(
        "archbench.runtime.sparse_rows.record",
        2,
        """
        comm.sparse_exchange.setting str -
        comm.sparse_exchange.ran str -
        comm.sparse_exchange.sparse_variables list -
        comm.sparse_exchange.rows_per_step float count
        comm.sparse_exchange.row_bytes_per_worker_per_server_per_step list bytes/step
        """,
        "ring, p2p, ps (the row bytes: ps with sparse rows)",
    )
    + _keys(
        "archbench.runtime.tensor_partition",
        2,
        "comm.tensor_partition object -",
        "p2p, ps with --partition-mb or --priority on",
        open=True,
    )  # fmt: skip
    + _keys(
        "archbench.runtime.tensor_partition",
        2,
        """
        comm.tensor_partition.partition_bytes int bytes
        comm.tensor_partition.priority str -
        comm.tensor_partition.piece_count int count
        comm.tensor_partition.partitioned bool -
        comm.tensor_partition.pipelined_median_s float s
        comm.tensor_partition.first_layer_lead_median_s float s
        """,
        "p2p, ps with --partition-mb or --priority on (the medians: p2p)",
    )
    + _keys(
        "archbench.runtime.localsgd.comm_record",
        2,
        """
        comm.sync_every int steps
        comm.sync_every_warmup_steps int steps
        comm.steps_by_kind mapping count
        comm.exchange_steps int count
        comm.bytes_sent_per_exchange_step int bytes
        """,
        "ring, p2p, ps",
    )
    + _keys(
        "archbench.train._partition_record",
        2,
        """
        comm.partition object -
        comm.partition.data_partition str -
        comm.partition.data_partition_s float s
        comm.partition.equivalence_oracle str -
        comm.partition.samples_per_worker list count
        comm.partition.distinct_words_per_worker list count
        comm.partition.edge_cut int count
        comm.partition.param_partition str -
        comm.partition.param_partition_s float s
        comm.partition.rows_per_server list count
        """,
        "ring, p2p, ps (param_*, rows_per_server: ps with a row placement)",
    )
    + _keys(
        "PSTrainer.extra_record",
        2,
        """
        comm.param_partition object -
        comm.param_partition.param_partition str -
        comm.param_partition.param_partition_s float s
        comm.param_partition.rows_per_server list count
        """,
        "ps (moved to comm.partition where the data partition applies)",
    )
    + _keys(
        "PSTrainer.extra_record",
        1,
        """
        comm.ps object -
        comm.ps.mode str -
        comm.ps.momentum_on str -
        comm.ps.update_lr float -
        comm.ps.bytes_held_per_server list bytes
        comm.ps.optimizer_bytes_per_server list bytes
        comm.ps.bytes_served_per_server_per_step list bytes/step
        comm.ps.bytes_received_per_server_per_step list bytes/step
        comm.ps.bytes_received_all_servers_per_step int bytes/step 2
        comm.ps.bytes_pushed_per_worker_per_step int bytes/step
        comm.ps.bytes_pulled_per_worker_per_step int bytes/step
        comm.ps.staleness object -
        comm.ps.staleness.median float steps
        comm.ps.staleness.max int steps
        comm.ps.staleness.mean float steps
        comm.ps.staleness.updates int count
        comm.ps.staleness.histogram mapping count
        comm.ps.global_step int count
        comm.ps.steps_per_worker mapping count
        comm.ps.setup_s float s
        comm.ps.sharding object -
        comm.ps.sharding.bytes_per_server list bytes
        comm.ps.sharding.variables_per_server list count
        """,
        "ps",
    )
    + _keys("PSTrainer.extra_record", 1, "comm.ps.cluster_spec object -", "ps", open=True)
    + _keys("ShardPlan.summary", 1, "comm.ps.sharding object -", "ps", open=True)
)

_RESULT = _keys(
    "archbench.train",
    1,
    """
    result.final_loss float -
    result.last_train_loss float -
    result.test_accuracy float share
    result.test_rmse float - 3
    result.param_norm float -
    result.param_digest_per_rank list -
    result.target_accuracy float share
    result.time_to_target_s float s
    """,
)

_ERROR = _keys(
    "archbench.train, archbench.sweep.records",
    1,
    """
    error.type str -
    error.message str -
    """,
    "a run that did not finish",
) + [
    Key("error.step", "int", "count", 1, "archbench.train", "a diverged run"),
    Key("error.log_tail", "str", "", 1, "archbench.sweep.records", "the sweep"),
]

_FIDELITY = (
    _keys("archbench.cluster.fidelity.FidelityProbe", 2, "fidelity.emulated bool -")
    + _keys(
        "archbench.cluster.fidelity.FidelityProbe",
        2,
        """
        fidelity.cluster str -
        fidelity.dilation float -
        fidelity.vcpus_per_node int count
        fidelity.vcpus_per_process float count
        fidelity.thread_cap_cpus float count
        fidelity.cfs_period_us int us
        fidelity.cgroup str -
        fidelity.idle_wait any -
        fidelity.idle_halt_poll_us int us 3
        fidelity.idle_pollers int count 3
        fidelity.cap_cost_ratio float - 3
        fidelity.link str bit/s
        fidelity.link_rate any -
        fidelity.window_s float s
        fidelity.window_real_s float real_s
        fidelity.machine_idle_share float share
        fidelity.steps int count
        fidelity.nodes mapping -
        fidelity.nodes.*.usage_s float real_s
        fidelity.nodes.*.busy_vcpus float count
        fidelity.nodes.*.nr_periods int count
        fidelity.nodes.*.threads int count
        fidelity.nodes.*.capped_cpu_s float real_s
        fidelity.nodes.*.throttled_s float real_s
        fidelity.nodes.*.node_throttled_s float real_s
        fidelity.nodes.*.core_wait_s float real_s
        fidelity.nodes.*.core_wait_share float share
        fidelity.nodes.*.background_threads int count
        fidelity.nodes.*.background_cpu_s float real_s
        fidelity.nodes.*.busiest_thread_cpus float count
        fidelity.nodes.*.uncapped_cpu_s float real_s
        fidelity.nodes.*.wire_bytes_sent_per_step float bytes/step
        fidelity.nodes.*.wire_bytes_received_per_step float bytes/step
        """,
        "the emulated cluster",
    )
    + _keys(
        "archbench.train",
        2,
        """
        fidelity.real object -
        fidelity.real.time_to_target_s float real_s
        """,
        "a dilated emulated cluster",
    )
    + _keys(
        "archbench.train",
        2,
        "fidelity.real.timing object real_s",
        "a dilated emulated cluster (the timing keys in real seconds)",
        open=True,
    )  # fmt: skip
)

_TIMELINE_FIGURES = "\n".join(
    f"timeline.{part}_s float s" for part in
    "step compute comm_hidden comm_exposed update wait host throttled unaccounted comm".split()
) + "\ntimeline.stopped_s float s 3"  # the sampled stops: since version 3  # fmt: skip
_TIMELINE = _keys(
    "archbench.timeline.tracer",
    2,
    _TIMELINE_FIGURES
    + """
        timeline.file str -
        timeline.steps int count
        timeline.traced_steps int count
        timeline.overlap float share
        timeline.overlap_per_rank mapping share
        timeline.coverage_min float share
        timeline.span_coverage_min float share
        timeline.span_coverage_median float share
        timeline.median_step int count
        timeline.critical_path list -
        timeline.dilation float -
        timeline.clock_bound_s float s
        timeline.cost object -
        timeline.cost.traced_step_s_median float s
        timeline.cost.timed_step_s_median float s
        timeline.cost.ratio float -
        """,
    "--timeline",
) + _keys("archbench.timeline.tracer", 2, "timeline.cost.whole_run any -", "--timeline, ring")


def _launch_keys() -> list[Key]:
    rows = """
        launch.warm bool -
        launch.group str -
        launch.position int count
        launch.group_size int count
        launch.group_startup_s float real_s
        launch.phases_s object real_s
        """ + "\n".join(f"launch.phases_s.{phase} float real_s" for phase in PHASES)
    return _keys("archbench.train.launch_section, archbench.runtime.warmgroup", 2, rows, "training")


_SWEEP = _keys(
    "archbench.sweep.records",
    1,
    """
    sweep.factors mapping -
    sweep.repetition int count
    sweep.attempt int count
    sweep.launch_failures list -
    sweep.config mapping -
    sweep.command str -
    sweep.hostfile str -
    sweep.log str -
    sweep.exit_status int -
    sweep.timed_out bool -
    sweep.timeout_s float real_s
    sweep.driver_wall_s float real_s
    sweep.stragglers_killed int count
    sweep.cluster str -
    sweep.recorded_at str time
    """,
    "the sweep",
)


def _all_keys() -> tuple[Key, ...]:
    keys = [
        *_TOP, *_config_keys(), *_CLUSTER, *_ENV, *_MODEL_STATS, *_TIMING, *_COMM, *_RESULT,
        *_ERROR, *_FIDELITY, *_TIMELINE, *_launch_keys(), *_SWEEP,
    ]  # fmt: skip
    unique: dict[str, Key] = {}
    for key in keys:
        previous = unique.get(key.path)
        # a sub-object declared both with some inner keys and open: one entry, open
        unique[key.path] = key if previous is None or key.open else previous
    return tuple(unique.values())


KEYS: tuple[Key, ...] = _all_keys()
BY_PATH: dict[str, Key] = {key.path: key for key in KEYS}
_PATTERNS = tuple(key for key in KEYS if "*" in key.path)
# mappings whose entries' keys are declared by `*` patterns (e.g. fidelity.nodes.*.usage_s)
_PATTERNED = frozenset(key.path.split(".*", 1)[0] for key in _PATTERNS)


def _lookup(dotted: str) -> Key | None:
    key = BY_PATH.get(dotted)
    if key is not None:
        return key
    depth = dotted.count(".")
    for pattern in _PATTERNS:
        if pattern.path.count(".") == depth and fnmatch.fnmatchcase(dotted, pattern.path):
            return pattern
    return None


def declared(dotted: str) -> Key | None:
    """The declaration that covers a dotted path: its own or a `*` pattern's; that of an open
    object above it; that of a mapping it is an entry of (or below one, where no pattern
    declares the entries' keys). None where the path is not declared."""
    key = _lookup(dotted)
    if key is not None:
        return key
    parts = dotted.split(".")
    for end in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:end])
        above = _lookup(prefix)
        if above is None:
            continue
        if above.open:
            return above
        if above.type == "mapping" and (end == len(parts) - 1 or prefix not in _PATTERNED):
            return above
        return None
    return None


def field(dotted: str) -> str:
    """`dotted`, checked to be a declared key (readers name the record's fields through it)."""
    if declared(dotted) is None:
        raise KeyError(f"{dotted} is not a declared key of the run record (archbench.record.keys)")
    return dotted


def record_paths(record: dict, prefix: str = "") -> list[str]:
    """Every dotted key path of a record: dicts are descended into (not an open object's),
    lists are values."""
    paths = []
    for name, value in record.items():
        dotted = f"{prefix}{name}"
        paths.append(dotted)
        key = BY_PATH.get(dotted)
        if isinstance(value, dict) and not (key is not None and key.open):
            paths.extend(record_paths(value, f"{dotted}."))
    return paths


def undeclared(record: dict) -> list[str]:
    """The key paths of a record that no declaration covers."""
    return [dotted for dotted in record_paths(record) if declared(dotted) is None]


SECTIONS = ("", "config", "cluster", "env", "model_stats", "timing", "comm", "result", "error",
            "fidelity", "timeline", "launch", "sweep")  # fmt: skip


def markdown() -> str:
    """The reference tables of docs/record.md ('Every key'), one per section."""
    lines: list[str] = []
    for section in SECTIONS:
        lines += ["", f"**{section or 'top level'}**", ""]
        lines += [
            "| key | type | unit | since | only in | written by |",
            "|---|---|---|---|---|---|",
        ]
        for key in KEYS:
            if key.section != section:
                continue
            only = "older records" if key.retired else (key.only or "")
            who = key.writer + ("; inner keys: the writer's" if key.open else "")
            row = (f"`{key.path}`", key.type, key.unit, str(key.since), only, who)
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines[1:]) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
