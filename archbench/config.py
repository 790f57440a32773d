"""Training configuration: the command-line flags of `archbench train`, validated before any work.

Validation is cheap (no TensorFlow import) so bad input fails in well under a second with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from dataclasses import dataclass, field

from archbench.errors import UsageError

ARCHITECTURES = ("single", "ring", "p2p", "ps")
DATASETS = ("fashion_mnist", "mnist", "cifar10", "synthetic", "text")
OPTIMIZERS = ("sgd",)
COMPRESSIONS = ("none", "fp16")
# How the ring's allreduce is run under the MPI controller: `ring` forces Open MPI's ring
# (coll/tuned algorithm 4: reduce-scatter then allgather, 2(W-1)/W of the data per rank);
# `default` leaves the choice to the library's decision rules. Gloo always runs its ring.
ALLREDUCE_ALGORITHMS = ("ring", "default")
PS_SHARDINGS = ("round-robin", "balanced")
P2P_SCHEDULES = ("naive", "staggered")


@dataclass
class TrainConfig:
    arch: str = "single"
    model: str = "mlp"
    dataset: str = "fashion_mnist"
    data_dir: str | None = None
    text_file: str | None = None
    synthetic_shape: tuple[int, ...] = (28, 28, 1)
    synthetic_classes: int = 10
    synthetic_samples: int = 2048
    seq_len: int = 64
    batch_size: int = 32
    epochs: int | None = None
    steps: int | None = None
    lr: float = 0.05
    momentum: float = 0.9
    optimizer: str = "sgd"
    seed: int = 1
    eval_every: int = 0
    eval_samples: int = 0
    target_accuracy: float | None = None
    warmup_steps: int = 5
    probe_every: int = 10
    threads: int = 0
    out: str | None = None
    run_id: str | None = None
    study: str | None = None
    # ring (Horovod)
    fusion_threshold_mb: float = 64.0
    cycle_time_ms: float = 1.0
    compression: str = "none"
    allreduce_algorithm: str = "ring"
    # ps
    num_ps: int = 1
    sync: bool = True
    ps_sharding: str = "round-robin"
    ps_timeout_s: float = 60.0
    # p2p
    p2p_schedule: str = "staggered"
    # anything else a backend wants to record
    extra: dict = field(default_factory=dict)

    def as_record(self, world_size: int, num_workers: int) -> dict:
        """The `config` object of the run record."""
        record = dataclasses.asdict(self)
        record.pop("extra")
        record["synthetic_shape"] = list(self.synthetic_shape)
        record["global_batch_size"] = self.batch_size * num_workers
        record["sync"] = "sync" if self.sync else "async"
        if self.arch != "ps":
            record["num_ps"] = 0
            record["ps_sharding"] = None
        if self.arch != "ring":
            record["fusion_threshold_mb"] = None
            record["cycle_time_ms"] = None
            record["compression"] = None
            record["allreduce_algorithm"] = None
        if self.arch != "p2p":
            record["p2p_schedule"] = None
        record.update(self.extra)
        return record


def _positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {value}")
        return value

    return parse


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 32x32x3, got {text!r}") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"shape dimensions must be positive, got {text!r}")
    return dims


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    from archbench.models import MODEL_NAMES_HELP

    add = parser.add_argument
    add("--arch", choices=ARCHITECTURES, default="single", help="communication architecture")
    add("--model", default="mlp", help=MODEL_NAMES_HELP)
    add("--dataset", choices=DATASETS, default="fashion_mnist")
    add("--data-dir", help="folder with the data set's files (default for fashion_mnist: Debian's)")
    add(
        "--text-file",
        help="corpus for --dataset text (default: the Python standard library's sources)",
    )
    add(
        "--synthetic-shape",
        type=_shape,
        default=(28, 28, 1),
        help="input shape for synthetic data, e.g. 224x224x3",
    )
    add("--synthetic-classes", type=_positive_int("--synthetic-classes"), default=10)
    add("--synthetic-samples", type=_positive_int("--synthetic-samples"), default=2048)
    add(
        "--seq-len",
        type=_positive_int("--seq-len"),
        default=64,
        help="characters per window (text)",
    )
    add(
        "--batch-size",
        type=_positive_int("--batch-size"),
        default=32,
        help="samples per worker per step",
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--epochs", type=_positive_int("--epochs"), help="passes over the training set (default 1)"
    )
    length.add_argument(
        "--steps", type=_positive_int("--steps"), help="training steps (instead of --epochs)"
    )
    add("--lr", type=float, default=0.05, help="learning rate")
    add("--momentum", type=float, default=0.9)
    add("--optimizer", choices=OPTIMIZERS, default="sgd")
    add("--seed", type=int, default=1)
    add(
        "--eval-every",
        type=_non_negative_int,
        default=0,
        help="evaluate every N steps (0: at each epoch end)",
    )
    add(
        "--eval-samples",
        type=_non_negative_int,
        default=0,
        help="test samples per evaluation (0: all)",
    )
    add(
        "--target-accuracy", type=float, help="record the training time to reach this test accuracy"
    )
    add(
        "--warmup-steps",
        type=_non_negative_int,
        default=5,
        help="steps left out of the timing statistics",
    )
    add(
        "--probe-every",
        type=_non_negative_int,
        default=10,
        help="every Nth step runs in two timed phases (compute, then exchange) to split the step time; 0: never",
    )
    add(
        "--threads",
        type=_non_negative_int,
        default=0,
        help="TensorFlow threads per process (0: cores / local ranks)",
    )
    add("--out", help="append the run record to this JSON-lines file")
    add("--run-id", help="identifier of this run in the record (default: generated)")
    add("--study", help="name of the study this run belongs to")
    ring = parser.add_argument_group("ring (Horovod)")
    ring.add_argument(
        "--fusion-threshold-mb", type=float, default=64.0, help="Horovod tensor-fusion buffer (MB)"
    )
    ring.add_argument("--cycle-time-ms", type=float, default=1.0, help="Horovod cycle time (ms)")
    ring.add_argument("--compression", choices=COMPRESSIONS, default="none")
    ring.add_argument(
        "--allreduce-algorithm",
        choices=ALLREDUCE_ALGORITHMS,
        default="ring",
        help="MPI controller: Open MPI's ring allreduce (default) or the library's own choice "
        "per message size; Gloo always runs its ring",
    )
    ps = parser.add_argument_group("ps (parameter server)")
    ps.add_argument(
        "--num-ps", type=int, default=1, help="number of parameter-server tasks (ranks 0..K-1)"
    )
    sync = ps.add_mutually_exclusive_group()
    sync.add_argument(
        "--sync",
        dest="sync",
        action="store_true",
        default=None,
        help="synchronous updates (default)",
    )
    sync.add_argument(
        "--async", dest="async_", action="store_true", default=None, help="asynchronous updates"
    )
    ps.add_argument("--ps-sharding", choices=PS_SHARDINGS, default="round-robin")
    ps.add_argument(
        "--ps-timeout",
        dest="ps_timeout_s",
        type=float,
        default=60.0,
        help="seconds to wait for a server or worker before failing the run",
    )
    p2p = parser.add_argument_group("p2p (peer to peer)")
    p2p.add_argument("--p2p-schedule", choices=P2P_SCHEDULES, default="staggered")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Builds and validates a TrainConfig; raises UsageError naming the first problem."""
    from archbench.models import check_model_name

    if args.sync and args.async_:
        raise UsageError("--sync and --async are mutually exclusive")
    config = TrainConfig(
        arch=args.arch,
        model=args.model,
        dataset=args.dataset,
        data_dir=args.data_dir,
        text_file=args.text_file,
        synthetic_shape=tuple(args.synthetic_shape),
        synthetic_classes=args.synthetic_classes,
        synthetic_samples=args.synthetic_samples,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps=args.steps,
        lr=args.lr,
        momentum=args.momentum,
        optimizer=args.optimizer,
        seed=args.seed,
        eval_every=args.eval_every,
        eval_samples=args.eval_samples,
        target_accuracy=args.target_accuracy,
        warmup_steps=args.warmup_steps,
        probe_every=args.probe_every,
        threads=args.threads,
        out=args.out,
        run_id=args.run_id,
        study=args.study,
        fusion_threshold_mb=args.fusion_threshold_mb,
        cycle_time_ms=args.cycle_time_ms,
        compression=args.compression,
        allreduce_algorithm=args.allreduce_algorithm,
        num_ps=args.num_ps,
        sync=not bool(args.async_),
        ps_sharding=args.ps_sharding,
        ps_timeout_s=args.ps_timeout_s,
        p2p_schedule=args.p2p_schedule,
    )
    if config.epochs is None and config.steps is None:
        config.epochs = 1
    if not config.lr > 0:
        raise UsageError(f"--lr must be positive, got {config.lr}")
    if not 0 <= config.momentum < 1:
        raise UsageError(f"--momentum must be in [0, 1), got {config.momentum}")
    if config.target_accuracy is not None and not 0 < config.target_accuracy <= 1:
        raise UsageError(f"--target-accuracy must be in (0, 1], got {config.target_accuracy}")
    if config.arch == "ps" and config.num_ps < 1:
        raise UsageError(f"--num-ps must be at least 1, got {config.num_ps}")
    if config.ps_timeout_s <= 0:
        raise UsageError("--ps-timeout must be positive")
    if config.fusion_threshold_mb < 0 or config.cycle_time_ms <= 0:
        raise UsageError("--fusion-threshold-mb must be >= 0 and --cycle-time-ms positive")
    check_model_name(config.model, config.dataset)
    check_output_path(config.out)
    return config


def check_output_path(path: str | None) -> None:
    """The record must be appendable: fail now rather than after training."""
    if path is None:
        return
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise UsageError(f"--out {path}: is a directory")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise UsageError(f"--out {path}: folder {folder} does not exist")
    # Try for real: as root, os.access says yes to nearly everything.
    try:
        if os.path.exists(target):
            with open(target, "a"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".archbench-probe-"):
                pass
    except OSError as exc:
        raise UsageError(f"--out {path}: not writable ({exc.strerror})") from None
