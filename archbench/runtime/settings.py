"""The registry of settings: one row per knob, from which everything else about it is derived.

A row says (in the manner of pyperf's METADATA) a setting's name, type, default, accepted levels,
unit, help and which architectures it applies to. From the rows come the flags of
`archbench train` and their validation (`archbench.runtime.config`), the record's `config`, a study's
factor checks and its dropping of settings that do not apply (`archbench.sweep`), and the flags
`archbench predict` shares with training. Adding a knob is one row here plus the code that uses it.

Three scopes: `train` settings are flags of `python -m archbench.train` and fields of its
configuration; `launch` settings say how a run is started (workers, placement, launcher,
controller, link bandwidth); `sweep` settings exist only in a study (extra words for the train
command).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archbench.common.archs import ARCHITECTURES, MULTI_PROCESS, WITH_SERVERS, has_servers
from archbench.common.errors import UsageError
from archbench.compression import CARRIED_BY, METHODS, OWN_EXCHANGE, carry_problem
from archbench.runtime.tensor_partition import APPLIES_TO as _PARTITIONED
from archbench.runtime.tensor_partition import PRIORITIES
from archbench.runtime.tensor_partition import problem as partition_problem
from archbench.runtime.warmgroup import RUNS_FILE_FLAG
from archbench.workloads.task import LOSSES

DATASETS = ("fashion_mnist", "mnist", "cifar10", "synthetic", "text", "words")
# The built-in image sets' training samples, known without loading them.
TRAIN_SIZES = {"fashion_mnist": 60000, "mnist": 60000, "cifar10": 50000}
OPTIMIZERS = ("sgd",)
COMPRESSIONS = METHODS  # which architecture carries which: archbench.compression.CARRIED_BY
ON_OFF = ("on", "off")
# How the ring's allreduce is run under the MPI controller: `ring` forces Open MPI's ring
# (coll/tuned algorithm 4: reduce-scatter then allgather, 2(W-1)/W of the data per rank);
# `default` leaves the choice to the library's decision rules. Gloo always runs its ring.
ALLREDUCE_ALGORITHMS = ("ring", "default")
PS_SHARDINGS = ("round-robin", "balanced")
P2P_SCHEDULES = ("naive", "staggered")
# How an embedding's gradient (IndexedSlices: the rows a batch touched) travels: `dense` turns it
# into a whole matrix first (ring: densify then allreduce); `sparse` sends the touched rows and
# their indices (ring: Horovod's allgather; p2p: each owner gets the rows in its shard; ps: pushes
# the touched rows, pulls only the rows a batch reads). archbench.runtime.sparse_rows says which ran.
SPARSE_EXCHANGES = ("dense", "sparse")
# Which samples each worker trains on (archbench.runtime.partition): `random` is the global shuffle of
# the sync semantics; `contiguous` gives each worker a contiguous run of documents; `graph` cuts
# the sample-word graph with METIS so each worker's samples share words.
DATA_PARTITIONS = ("random", "contiguous", "graph")
# Which server holds which embedding row (ps, sparse exchange): `range` contiguous row ranges
# (the shard plan's), `round-robin` row r on server r mod K, `hash` on a hash of r, `by-use` on the
# server of the worker whose partition uses it most (after partitioning the data).
PARAM_PARTITIONS = ("range", "round-robin", "hash", "by-use")
# Placements the sweep turns into hostfiles itself; any other level names a hostfile.
PLACEMENT_POLICIES = ("packed", "spread", "dedicated", "colocated", "one-host")
# Placements of parameter servers: on a host of their own, beside a worker, or every process of
# the job on one host (the research notes' "local server").
SERVER_PLACEMENTS = frozenset({"dedicated", "colocated", "one-host"})
LAUNCHERS = ("mpirun", "horovodrun")
CONTROLLERS = ("mpi", "gloo")

ALL = frozenset(ARCHITECTURES)
_MULTI = MULTI_PROCESS
_PS = WITH_SERVERS
_RING = frozenset({"ring"})
_P2P = frozenset({"p2p"})
_SPARSE = frozenset({"ring", "p2p", "ps"})
_COMPRESSED = frozenset(CARRIED_BY)
_SYNC_EVERY = frozenset({"ring", "p2p", "ps"})
_ONE_PROCESS = frozenset(ARCHITECTURES) - MULTI_PROCESS
_SHAPE = re.compile(r"\d+(x\d+)*")
# The most worker processes a run, a study or the performance model takes.
MAX_WORKERS = 4_096


class LevelError(ValueError):
    """A level the setting does not accept; the message says what it accepts."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # int | float | choice | str | bool | shape | args
    default: Any
    applies_to: frozenset[str]
    scope: str = "train"  # train | launch | sweep
    flag: str | None = None  # the train flag (default: --name-with-dashes for train settings)
    alias: str | None = None  # another spelling of the flag
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    check: Callable[[Any], None] | None = None
    numeric: bool = False  # a factor whose levels are ordered numbers
    unit: str = ""
    help: str = ""
    group: str | None = None  # train flags in one group are mutually exclusive
    reserved: bool = False  # set by the sweep for every run; a study may not set it
    not_applicable: Any = None  # the record's value where the setting does not apply

    @property
    def train_flag(self) -> str | None:
        if self.scope != "train":
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    def applies(self, arch: str, value: Any = None) -> bool:
        """Whether this setting (at level `value`) means anything for a run of `arch`."""
        if arch not in self.applies_to:
            return False
        if self.name == "placement" and value in SERVER_PLACEMENTS:
            return arch in WITH_SERVERS
        return True

    def coerce(self, value: Any) -> Any:
        """The level as the value the run uses; raises LevelError when no backend accepts it.
        A train setting whose default is None (not set) also takes None: the setting left unset,
        e.g. a study's `partition_mb: [null, 1]`."""
        if value is None and self.default is None and self.scope == "train":
            return None
        if self.kind == "int":
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or (isinstance(value, float) and not value.is_integer())  # also NaN and inf
            ):
                raise LevelError(f"must be an integer, got {value!r}")
            value = int(value)
        elif self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LevelError(f"must be a number, got {value!r}")
            value = float(value)
        elif self.kind == "choice":
            if isinstance(value, bool) and self.choices == ON_OFF:
                value = "on" if value else "off"  # YAML reads a bare on/off as true/false
            if value not in self.choices:
                raise LevelError(
                    f"must be one of {', '.join(map(str, self.choices))}, got {value!r}"
                )
        elif self.kind == "bool":
            if isinstance(value, str) and value.lower() in ("sync", "async"):
                value = value.lower() == "sync"  # `sync` reads its two modes by name
            if not isinstance(value, bool):
                raise LevelError(f"must be true or false, got {value!r}")
        elif self.kind in ("str", "shape"):
            if (
                not isinstance(value, str | int | float)
                or isinstance(value, bool)
                or str(value) == ""
            ):
                raise LevelError(f"must be a non-empty string, got {value!r}")
            value = str(value)
        elif self.kind == "args":
            if isinstance(value, str):
                value = value.split()
            if not isinstance(value, list) or not all(
                isinstance(v, str | int | float) for v in value
            ):
                raise LevelError(f"must be a list of command-line words, got {value!r}")
            value = [str(v) for v in value]
        self.check_range(value)
        if self.check is not None:
            self.check(value)
        return value

    def check_range(self, value: Any) -> None:
        """Raises LevelError unless a numeric value is finite and within [minimum, maximum]."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return
        if not math.isfinite(value):
            raise LevelError(f"must be a finite number, got {value!r}")
        too_small = self.minimum is not None and (
            value <= self.minimum if self.exclusive_minimum else value < self.minimum
        )
        if too_small or (self.maximum is not None and value > self.maximum):
            raise LevelError(f"must be {self.describe_range()}, got {value!r}")

    def describe_range(self) -> str:
        def number(bound: float) -> str:
            return f"{int(bound):,}" if self.kind == "int" else f"{bound:g}"

        low = self.minimum
        parts = [] if low is None else [f"{'>' if self.exclusive_minimum else '>='} {number(low)}"]
        if self.maximum is not None:
            parts.append(f"<= {number(self.maximum)}")
        return " and ".join(parts) or "finite"


def _check_model(value: str) -> None:
    # deferred: archbench.workloads.models loads numpy (the model's form only: no file is opened here)
    from archbench.workloads.models import model_source

    try:
        model_source(value)
    except UsageError as exc:
        raise LevelError(str(exc).removeprefix("--model ")) from None


def _check_dataset(value: str) -> None:
    if value in DATASETS:
        return
    # deferred: the user's data forms (its form only: no file is opened here)
    from archbench.workloads.user_data import parse_user_data

    try:
        found = parse_user_data(value)
    except UsageError as exc:
        raise LevelError(str(exc).split(": ", 1)[-1]) from None
    if found is None:
        raise LevelError(
            f"must be one of {', '.join(DATASETS)} or npz:FILE, npy:FOLDER, csv:FILE, "
            f"series:FILE, got {value!r}"
        )


def _check_bandwidth(value: str) -> None:
    # deferred: archbench.common.bandwidth loads only when a rate is checked
    from archbench.common.bandwidth import Bandwidth

    try:
        Bandwidth.tc_rate(value)
    except UsageError as exc:
        if "out of range" in str(exc):
            raise LevelError(f"must be between 1mbit and 100gbit, got {value!r}") from None
        raise LevelError(
            f"must be a rate like 100mbit or 1gbit (bit, kbit, mbit, gbit), got {value!r}"
        ) from None


def _check_shape(value: str) -> None:
    if not _SHAPE.fullmatch(value) or any(int(d) <= 0 for d in value.split("x")):
        raise LevelError(f"must be a shape like 32x32x3, got {value!r}")


def _check_placement(value: str) -> None:
    # A hostfile path is checked against the cluster when the plan is built.
    if value not in PLACEMENT_POLICIES and not ("/" in value or value.endswith(".txt")):
        raise LevelError(
            f"must be one of {', '.join(PLACEMENT_POLICIES)} or a hostfile path, got {value!r}"
        )


MAX_LABEL_CHARS = 200


def _check_label(value: str) -> None:
    # A run id or study name is a heading of the report and a key of every table: an empty one
    # or one holding a line break would add headings or rows nobody wrote.
    if not value.strip() or value != value.strip() or not value.isprintable():
        raise LevelError(
            f"must be a name on one line (printable, no leading or trailing blank), got {value!r}"
        )
    if len(value) > MAX_LABEL_CHARS:
        raise LevelError(f"must be at most {MAX_LABEL_CHARS} characters, got {len(value)}")


def train_flags() -> dict[str, Setting]:
    """Every flag of `archbench train` (the sweep's own included), with the row it sets."""
    flags = {}
    for row in TRAIN_SETTINGS:
        flags[row.train_flag] = row
        if row.kind == "bool":
            flags["--a" + row.train_flag[2:]] = row  # --sync / --async
    return flags


def _check_extra_args(words: list[str]) -> None:
    """`extra_args` carries flags of `archbench train` that no setting covers: never one the
    sweep sets for every run (--out, --run-id, --study), nor a setting's flag, which the plan,
    the run id and the record would not know (nor an abbreviation of either, which argparse
    would take for it)."""
    flags = train_flags()
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in ("-h", "--help") or (flag.startswith("--h") and "--help".startswith(flag)):
            raise LevelError(f"must not hold {flag}: the run would print its help and stop")
        if len(flag) < 3 or not flag.startswith("--"):
            continue  # a value, a negative number, or `--`
        if flag.startswith("--runs") and RUNS_FILE_FLAG.startswith(flag):
            raise LevelError(f"must not hold {flag}: the sweep starts warm groups itself")
        meant = flags.get(flag) or next(
            (row for name, row in flags.items() if name.startswith(flag)), None
        )
        if meant is None:
            continue  # a flag this registry does not know: what extra_args is for
        said = flag if flag in flags else f"{flag} (taken for {meant.train_flag})"
        if meant.reserved:
            raise LevelError(f"must not hold {said}: the sweep sets it for every run")
        raise LevelError(
            f"must not hold {said}: give the setting {meant.name} under fixed: or factors:"
        )


def _model_help() -> str:
    # deferred: archbench.workloads.models loads numpy
    from archbench.workloads.models import MODEL_NAMES_HELP

    return MODEL_NAMES_HELP


S = Setting
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        # --- train settings (flags of python -m archbench.train) ---
        S("arch", "choice", "single", ALL, choices=ARCHITECTURES, help="communication architecture"),
        S("model", "str", "mlp", ALL, check=_check_model, help="model name (see --help)"),
        S("dataset", "str", "fashion_mnist", ALL, check=_check_dataset, help=f"one of {', '.join(DATASETS)}, or your own: npz:FILE (x_train, y_train, x_test, y_test), npy:FOLDER (the same four .npy files, memory-mapped), csv:FILE (a table), series:FILE (a time series in a CSV)"),
        S("loss", "choice", "crossentropy", ALL, choices=LOSSES, help="crossentropy: labels are classes (the model outputs logits; test accuracy); mse: labels are values (test RMSE)"),
        S("label_column", "str", None, ALL, help="csv/series: the column to predict, by name or 0-based index (default: the last column; series: the last numeric one)"),
        S("feature_columns", "str", None, ALL, help="csv/series: the input columns, comma separated (default: every other column; series: every numeric column)"),
        S("test_fraction", "float", 0.2, ALL, minimum=0, exclusive_minimum=True, maximum=0.9, numeric=True, help="csv/series: the share held out for testing (a table's rows seeded, the same for every run; a series' last time steps)"),
        S("window", "int", 32, ALL, minimum=1, maximum=1_000_000, numeric=True, unit="rows", help="series: the time steps one sample reads"),
        S("horizon", "int", 1, ALL, minimum=1, maximum=1_000_000, numeric=True, unit="rows", help="series: how many steps after its window a sample's label lies"),
        S("data_dir", "str", None, ALL, help="folder with the data set's files (default for fashion_mnist: Debian's)"),
        S("text_file", "str", None, ALL, help="corpus for --dataset text or words (default: the Python standard library's sources)"),
        S("vocab_size", "int", 20_000, ALL, minimum=2, maximum=10_000_000, numeric=True, unit="words", help="words in the vocabulary of --dataset words (the most frequent; the rest share one id)"),
        S("synthetic_shape", "shape", (28, 28, 1), ALL, check=_check_shape, help="input shape for synthetic data, e.g. 224x224x3"),
        S("synthetic_classes", "int", 10, ALL, minimum=1, maximum=1_000_000),
        S("synthetic_samples", "int", 2048, ALL, minimum=1, maximum=100_000_000),
        S("seq_len", "int", 64, ALL, minimum=1, maximum=65_536, numeric=True, unit="tokens", help="tokens per window: characters (text) or words (words)"),
        S("batch_size", "int", 32, ALL, minimum=1, maximum=1_048_576, numeric=True, unit="samples", help="samples per worker per step"),
        S("epochs", "int", None, ALL, minimum=1, maximum=1_000_000, numeric=True, group="length", help="passes over the training set (default 1)"),
        S("steps", "int", None, ALL, minimum=1, maximum=1_000_000_000, numeric=True, group="length", help="training steps (instead of --epochs)"),
        S("lr", "float", 0.05, ALL, minimum=0, exclusive_minimum=True, maximum=1e6, numeric=True, help="learning rate"),
        S("momentum", "float", 0.9, ALL, minimum=0, maximum=0.999999, numeric=True),
        S("optimizer", "choice", "sgd", ALL, choices=OPTIMIZERS),
        S("seed", "int", 1, ALL, minimum=0, maximum=2**31 - 1),
        S("eval_every", "int", 0, ALL, minimum=0, maximum=1_000_000_000, unit="steps", help="evaluate every N steps (0: at each epoch end)"),
        S("eval_samples", "int", 0, ALL, minimum=0, maximum=1_000_000_000, help="test samples per evaluation (0: all)"),
        S("target_accuracy", "float", None, ALL, minimum=0, exclusive_minimum=True, maximum=1, help="record the training time to reach this test accuracy"),
        S("warmup_steps", "int", 5, ALL, minimum=0, maximum=1_000_000_000, unit="steps", help="steps left out of the timing statistics"),
        S("probe_every", "int", 10, ALL, minimum=0, maximum=1_000_000_000, unit="steps", help="every Nth step runs in two timed phases (compute, then exchange) to split the step time; 0: never"),
        S("compute_window_ms", "float", None, ALL, minimum=0, maximum=60_000, unit="ms", help="a probe's compute phase is repeated back to back for at least this long and its mean pass reported (default: 10 CFS periods where the process has a CPU quota, else one pass; 0: one pass)"),
        S("companions", "int", 0, _ONE_PROCESS, minimum=0, maximum=1023, numeric=True, help="single: copies of the same training that run at the same time on other hosts and record nothing, so the baseline is measured with the machine loaded as a job of 1 + N workers loads it (the emulated cluster's nodes share one machine's memory and caches)"),
        S("threads", "int", 0, ALL, minimum=0, maximum=4096, help="TensorFlow threads per process (0: cores / local ranks)"),
        # timelines (archbench.timeline): a Chrome trace of a few steps after warm-up
        # --timeline-file: the spelling horovodrun lets through (it takes --timeline for an
        # ambiguous abbreviation of its own --timeline-filename and --timeline-mark-cycles)
        S("timeline", "str", None, ALL, reserved=True, alias="--timeline-file", help="write a Chrome Trace Event Format file of --timeline-steps traced steps after warm-up (left out of the step statistics, as probes are); under horovodrun spell it --timeline-file"),
        S("timeline_steps", "int", 3, ALL, minimum=1, maximum=100, unit="steps", help="steps --timeline traces (default 3)"),
        S("stop_sampler", "choice", "on", ALL, choices=ON_OFF, help="--timeline on a CPU budget (an emulated node): a thread notes where each of the budget's stops fell, drawn as spans (on, default), or the trace has each step's throttled total only (off)"),
        S("out", "str", None, ALL, reserved=True, help="append the run record to this JSON-lines file"),
        S("run_id", "str", None, ALL, reserved=True, check=_check_label, help="identifier of this run in the record (default: generated)"),
        S("study", "str", None, ALL, reserved=True, check=_check_label, help="name of the study this run belongs to"),
        S("fusion_threshold_mb", "float", 64.0, _RING, minimum=0, maximum=1e6, numeric=True, unit="MB", help="Horovod tensor-fusion buffer (MB)"),
        S("cycle_time_ms", "float", 1.0, _RING, minimum=0, exclusive_minimum=True, maximum=1e6, numeric=True, unit="ms", help="Horovod cycle time (ms)"),
        # gradient compression (archbench.compression): the method, then its parameters
        S("compression", "choice", "none", _COMPRESSED, choices=COMPRESSIONS, help="gradient compression: none; fp16 (ring); topk (ring, p2p, ps --sync); powersgd (ring)"),
        S("compression_ratio", "float", 0.01, _COMPRESSED, minimum=0, exclusive_minimum=True, maximum=1, numeric=True, help="topk: share of the gradient's entries each worker sends (default 0.01)"),
        S("powersgd_rank", "int", 2, _RING, minimum=1, maximum=65_536, numeric=True, help="powersgd: rank of the factors P and Q (default 2)"),
        S("compression_warmup_steps", "int", 0, _COMPRESSED, minimum=0, maximum=1_000_000_000, unit="steps", help="topk: the kept share falls exponentially from dense to the ratio over these first steps (default 0)"),
        S("error_feedback", "choice", "on", _COMPRESSED, choices=ON_OFF, help="topk, powersgd: what a worker did not send is added to its next gradient (default on)"),
        S("allreduce_algorithm", "choice", "ring", _RING, choices=ALLREDUCE_ALGORITHMS, help="MPI controller: Open MPI's ring allreduce (default) or the library's own choice per message size; Gloo always runs its ring"),
        S("num_ps", "int", 1, _PS, minimum=1, maximum=4096, numeric=True, not_applicable=0, help="number of parameter-server tasks (ranks 0..K-1)"),
        S("sync", "bool", True, _PS, not_applicable="sync", help="synchronous updates (default); --async: asynchronous updates"),
        S("ps_sharding", "choice", "round-robin", _PS, choices=PS_SHARDINGS),
        S("ps_timeout_s", "float", 60.0, _PS, flag="--ps-timeout", minimum=0, exclusive_minimum=True, maximum=1e6, unit="s", help="seconds to wait for a server or worker before failing the run"),
        S("p2p_schedule", "choice", "staggered", _P2P, choices=P2P_SCHEDULES),
        # sparse models (archbench.runtime.sparse_rows, archbench.runtime.partition)
        S("sparse_exchange", "choice", "dense", _SPARSE, choices=SPARSE_EXCHANGES, help="embedding gradients: dense (densified, the default) or sparse (touched rows and their indices; ps: --sync only)"),
        S("data_partition", "choice", "random", _SPARSE, choices=DATA_PARTITIONS, help="which samples each worker trains on: random (the global shuffle, default), contiguous (runs of documents), graph (METIS cut of the sample-word graph); only random keeps the sync semantics"),
        S("param_partition", "choice", "range", _PS, choices=PARAM_PARTITIONS, help="which server holds which embedding row (--sparse-exchange sparse): range (default), round-robin, hash, by-use"),
        # synchronization frequency (local SGD): archbench.runtime.localsgd says which steps communicate
        S("sync_every", "int", 1, _SYNC_EVERY, minimum=1, maximum=1_000_000, numeric=True, unit="steps", help="average the workers' models every H steps, each worker applying its own gradients in between (1: synchronous training, gradients averaged every step; ps: --sync only)"),
        # tensor partitioning and priority scheduling (archbench.runtime.tensor_partition)
        S("partition_mb", "float", None, _PARTITIONED, minimum=0, exclusive_minimum=True, maximum=1e6, numeric=True, unit="MB", help="cut every gradient and parameter message larger than this many MB (2^20 bytes) into pieces sent on their own (default: not cut)"),
        S("priority", "choice", "off", _PARTITIONED, choices=PRIORITIES, help="send and pull pieces first layers first (on) or in the exchange's own order (off, default)"),
        S("sync_every_warmup_steps", "int", 0, _SYNC_EVERY, minimum=0, maximum=1_000_000_000, numeric=True, unit="steps", help="synchronous steps (gradients averaged) before the local steps of --sync-every start"),
        # --- sweep settings ---
        # extra words appended to the train command, for flags this registry does not know yet
        S("extra_args", "args", [], ALL, scope="sweep", check=_check_extra_args),
        # --- launch settings (how the run is started) ---
        S("workers", "int", 2, _MULTI, scope="launch", minimum=1, maximum=MAX_WORKERS, numeric=True, help="worker processes"),
        S("placement", "str", "spread", _MULTI, scope="launch", check=_check_placement, help="where ranks go: a policy or a hostfile"),
        S("launcher", "choice", "mpirun", _MULTI, scope="launch", choices=LAUNCHERS),
        S("controller", "choice", None, _RING, scope="launch", choices=CONTROLLERS),
        S("bandwidth", "str", None, _MULTI, scope="launch", check=_check_bandwidth, unit="bit/s", help="link between hosts, e.g. 200mbit, 1gbit"),
    )
}  # fmt: skip
TRAIN_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS.values() if s.scope == "train")
# Flag groups of `archbench train`'s help, by the architectures a setting applies to.
_HELP_GROUPS = {
    _RING: "ring (Horovod)",
    _PS: "ps (parameter server)",
    _P2P: "p2p (peer to peer)",
    _COMPRESSED: "communication reduction: compression, --sync-every, sparse models (ring, p2p, ps)",
    _PARTITIONED: "tensor partitioning and priority (p2p, ps)",
}


def setting(name: str) -> Setting:
    """The named setting; raises LevelError listing the known names."""
    row = SETTINGS.get(name)
    if row is not None and not row.reserved:
        return row
    if row is not None:
        raise LevelError(
            f"{name!r} is set by the sweep for every run ({row.train_flag}); remove it"
        )
    hint = _closest(name)
    known = sorted(n for n, s in SETTINGS.items() if not s.reserved)
    raise LevelError(
        f"unknown setting {name!r}{f' (did you mean {hint!r}?)' if hint else ''}; "
        f"known: {', '.join(known)}"
    )


def _closest(name: str) -> str | None:
    import difflib

    known = [n for n, s in SETTINGS.items() if not s.reserved]
    matches = difflib.get_close_matches(name.replace("-", "_"), known, n=1, cutoff=0.7)
    return matches[0] if matches else None


def applies(name: str, arch: str, value: Any = None) -> bool:
    """Whether setting `name` (at level `value`) means anything for a run of `arch`."""
    return SETTINGS[name].applies(arch, value)


# --- command-line flags ----------------------------------------------------------------------


def _cli_type(row: Setting) -> Callable[[str], Any] | None:
    """The argparse type of a row: a parse-time check for settings of every architecture (those
    of one architecture are checked after parsing, for the run's architecture only)."""
    if row.kind == "shape":
        return parse_shape
    if row.kind not in ("int", "float"):
        return None
    convert = int if row.kind == "int" else float
    checked = row.applies_to == ALL and row.minimum is not None

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            what = "an integer" if row.kind == "int" else "a number"
            raise argparse.ArgumentTypeError(
                f"{row.train_flag} must be {what}, got {text!r}"
            ) from None
        if checked and row.kind == "int" and value < row.minimum:
            bound = "positive" if row.minimum == 1 else f">= {row.minimum:g}"
            raise argparse.ArgumentTypeError(f"{row.train_flag} must be {bound}, got {value}")
        return value

    return parse


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 32x32x3, got {text!r}") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"shape dimensions must be positive, got {text!r}")
    return dims


def add_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    row: Setting,
    **override: Any,
) -> None:
    """Adds the flag of one row (`override` replaces argparse keywords, e.g. required=True)."""
    flag = row.train_flag or "--" + row.name.replace("_", "-")
    if row.kind == "bool":  # --sync / --async
        pair = parser.add_mutually_exclusive_group()
        pair.add_argument(
            flag, dest=row.name, action="store_true", default=override.get("default"),
            help=row.help.split(";")[0],
        )  # fmt: skip
        pair.add_argument(
            "--a" + flag[2:], dest=row.name, action="store_false",
            help="the opposite of " + flag,
        )  # fmt: skip
        return
    if row.name == "model":
        kwargs: dict[str, Any] = {"help": _model_help()}
    else:
        kwargs = {"help": row.help or None}
    kwargs.update(dest=row.name, default=row.default)
    if row.kind == "choice":
        kwargs["choices"] = row.choices
    elif (kind := _cli_type(row)) is not None:
        kwargs["type"] = kind
    kwargs.update(override)
    parser.add_argument(flag, *([row.alias] if row.alias else []), **kwargs)


def add_train_flags(parser: argparse.ArgumentParser) -> None:
    """Every train setting as a flag of `archbench train`, grouped as the help shows them."""
    groups: dict[str, Any] = {}
    for row in TRAIN_SETTINGS:
        target: Any = parser
        title = _HELP_GROUPS.get(row.applies_to)
        if title is not None:
            target = groups.get(title) or groups.setdefault(title, parser.add_argument_group(title))
        if row.group is not None:
            key = f"exclusive:{row.group}"
            target = groups.get(key) or groups.setdefault(
                key, target.add_mutually_exclusive_group()
            )
        add_flag(target, row, default=None if row.kind == "bool" else row.default)


def check_levels(arch: str, values: dict[str, Any]) -> None:
    """Each value of a setting that applies to `arch` within its range; UsageError naming the
    flag and the range otherwise (settings that do not apply are not looked at)."""
    for row in TRAIN_SETTINGS:
        value = values.get(row.name)
        if value is None or not row.applies(arch) or row.kind not in ("int", "float"):
            continue
        try:
            row.check_range(value)
        except LevelError as exc:
            raise UsageError(f"{row.train_flag} {exc}") from None


# Elements of one synthetic sample (224x224x3 is 150,528): a batch of them is generated per step.
SYNTHETIC_SAMPLE_ELEMENTS_MAX = 64 * 1024 * 1024


def combination_problem(values: dict[str, Any]) -> str | None:
    """A problem between settings that each are in range, or None. `warmup_steps` None or absent
    is the default warm-up."""
    steps, warmup = values.get("steps"), values.get("warmup_steps")
    if steps is not None and warmup is not None and warmup >= steps:
        return (
            f"--warmup-steps {warmup} leaves no timed step of --steps {steps}: "
            "make the warm-up shorter than the run"
        )
    default_warmup = SETTINGS["warmup_steps"].default
    if steps is not None and warmup is None and steps <= default_warmup:
        # the run would be recorded ok with no timing at all
        return (
            f"--steps {steps} leaves no timed step after the default warm-up of {default_warmup} "
            f"steps: give more steps, or --warmup-steps below {steps}"
        )
    arch = values.get("arch")
    problem = _inapplicable_problem(arch, values)
    if problem:
        return problem
    if arch is not None and SETTINGS["compression"].applies(arch):
        problem = carry_problem(arch, values.get("compression"), values.get("sync") is not False)
        if problem:
            return problem
    problem = partition_problem(arch, values)
    if problem:
        return problem
    every = values.get("sync_every")
    if has_servers(values.get("arch")) and values.get("sync") is False and every and every > 1:
        return (
            f"--sync-every {every} needs synchronous parameter servers: --async applies each "
            "worker's update as it arrives, with no rounds to average; use --sync or --sync-every 1"
        )
    compression = values.get("compression")
    if arch in _SYNC_EVERY and every and every > 1 and compression in OWN_EXCHANGE:
        return (
            f"--sync-every {every} with --compression {compression} is not supported: local "
            "steps and compressed exchanges are not combined yet; use one of them"
        )
    problem = _sparse_problem(values)
    if problem:
        return problem
    shape = values.get("synthetic_shape")
    if values.get("dataset") == "synthetic" and shape:
        dims = [int(d) for d in (shape.split("x") if isinstance(shape, str) else shape)]
        if math.prod(dims) > SYNTHETIC_SAMPLE_ELEMENTS_MAX:
            return (
                f"--synthetic-shape {'x'.join(map(str, dims))} has {math.prod(dims):,} elements "
                f"per sample; at most {SYNTHETIC_SAMPLE_ELEMENTS_MAX:,}"
            )
    return None


def record_config(arch: str, values: dict[str, Any]) -> dict[str, Any]:
    """The record's `config` of the train settings: each value, or its not-applicable value
    (None; 0 servers; "sync" for the architectures that are always synchronous) where it does
    not apply to `arch`. Sync is written as sync/async."""
    record: dict[str, Any] = {}
    for row in TRAIN_SETTINGS:
        value = values.get(row.name, row.default)
        if row.name != "arch" and not row.applies(arch):
            value = row.not_applicable
        elif row.kind == "shape" and value is not None:
            value = list(value)
        elif row.name == "sync":
            value = "sync" if value else "async"
        record[row.name] = value
    return record


def _inapplicable_problem(arch: str | None, values: dict[str, Any]) -> str | None:
    """A setting given a value of its own for an architecture it means nothing to (`--num-ps 2`
    with `--arch p2p`): said, not silently dropped. Its default and its not-applicable value (as
    records hold it) pass."""
    if arch is None:
        return None
    for row in TRAIN_SETTINGS:
        value = values.get(row.name)
        if row.name == "arch" or value in (None, row.default, row.not_applicable):
            continue
        if row.name == "sync" and value in ("sync", "async"):
            value = value == "sync"  # a record's spelling of the two modes
            if value == row.default:
                continue
        if not row.applies(arch, value):
            given = "--async" if row.name == "sync" else f"{row.train_flag} {value}"
            return (
                f"{given} cannot apply to --arch {arch}: it applies to "
                f"{', '.join(sorted(row.applies_to))}"
            )
    return None


def _sparse_problem(values: dict[str, Any]) -> str | None:
    """Sparse exchange and partitionings where they cannot apply: another data set, or together
    with a setting they do not combine with (another architecture: `_inapplicable_problem`)."""
    data_partition = values.get("data_partition")
    if data_partition not in (None, "random") and values.get("dataset") != "words":
        return (
            f"--data-partition {data_partition} cannot apply to --dataset "
            f"{values.get('dataset')}: it partitions the documents and words of --dataset words "
            "(model wordlm)"
        )
    param_partition = values.get("param_partition")
    if param_partition not in (None, "range"):
        if values.get("sparse_exchange") != "sparse" or values.get("model") != "wordlm":
            return (
                f"--param-partition {param_partition} places the rows of wordlm's embedding: "
                "it needs --model wordlm and --sparse-exchange sparse"
            )
        if param_partition == "by-use" and data_partition in (None, "random"):
            return (
                "--param-partition by-use places each row where the data partition uses it: "
                "give --data-partition contiguous or graph (with random every worker uses every row)"
            )
    if values.get("sparse_exchange") == "sparse":
        compression = values.get("compression")
        if compression not in (None, "none"):
            return (
                f"--sparse-exchange sparse with --compression {compression} is not supported: "
                "use one of them"
            )
        every = values.get("sync_every")
        if every and every > 1:
            return f"--sparse-exchange sparse with --sync-every {every} is not supported: use one of them"
        if has_servers(values.get("arch")) and values.get("sync") is False:
            return "--sparse-exchange sparse needs synchronous parameter servers (--sync)"
    return None
