"""Training configuration: the command-line flags of `archbench train`, validated before any work.

Validation is cheap (no TensorFlow import) so bad input fails in well under a second with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable
from dataclasses import field
from functools import cache, cached_property

from archbench.common.archs import ARCHITECTURES
from archbench.common.errors import UsageError
from archbench.common.jsonl import check_appendable
from archbench.compression import CompressionSpec
from archbench.runtime.probes import too_short
from archbench.runtime.settings import (
    ALLREDUCE_ALGORITHMS,
    COMPRESSIONS,
    DATASETS,
    OPTIMIZERS,
    P2P_SCHEDULES,
    PS_SHARDINGS,
    SETTINGS,
    TRAIN_SETTINGS,
    add_train_flags,
    check_levels,
    combination_problem,
    record_config,
)

__all__ = [
    "ALLREDUCE_ALGORITHMS",
    "ARCHITECTURES",
    "COMPRESSIONS",
    "DATASETS",
    "OPTIMIZERS",
    "P2P_SCHEDULES",
    "PS_SHARDINGS",
    "TrainConfig",
    "TrainSettings",
    "add_train_arguments",
    "config_from_args",
    "settings_view",
]

_PY_TYPES = {"int": int, "float": float, "bool": bool, "shape": tuple, "choice": str, "str": str}


def _as_record(self, world_size: int, num_workers: int) -> dict:
    """The `config` object of the run record."""
    record = record_config(self.arch, dataclasses.asdict(self))
    record["global_batch_size"] = self.batch_size * num_workers
    record.update(self.extra)
    return record


def _compression_spec(self) -> CompressionSpec:
    """`--compression` and its parameters as one typed value, read at its first use and kept:
    what the trainers ask of the method (archbench.compression.CompressionSpec)."""
    return CompressionSpec.from_config(self)


# One field per train setting of the registry (archbench.runtime.settings), with its default; `extra`
# holds anything else a backend wants to record. `compression_spec` is derived, not a field:
# the record keeps the settings as given.
TrainConfig = dataclasses.make_dataclass(
    "TrainConfig",
    [(row.name, _PY_TYPES[row.kind] | None, field(default=row.default)) for row in TRAIN_SETTINGS]
    + [("extra", dict, field(default_factory=dict))],
    namespace={
        "as_record": _as_record,
        "compression_spec": cached_property(_compression_spec),
        "__module__": __name__,
    },
)


class TrainSettings:
    """A frozen view of some of a TrainConfig's settings, under the same names: what a trainer
    reads (its `SETTINGS_READ`). Reading any other name raises AttributeError, so a trainer's
    declaration cannot fall behind its code."""

    __slots__ = ()

    def __getattr__(self, name: str):
        # only reached when `name` is not one of the view's fields
        held = ", ".join(f.name for f in dataclasses.fields(self))
        raise AttributeError(
            f"{type(self).__name__} holds only the settings it declares ({held}), not {name!r}"
        )


def settings_view(
    config: TrainConfig, names: Iterable[str], name: str = "TrainSettings"
) -> TrainSettings:
    """The settings `names` of `config` (any of TrainConfig's fields, or `compression_spec`) as
    a frozen TrainSettings holding those alone."""
    names = tuple(dict.fromkeys(names))
    return _view_class(name, names)(**{n: getattr(config, n) for n in names})


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
_FIELD_TYPES["compression_spec"] = CompressionSpec


@cache
def _view_class(name: str, names: tuple[str, ...]) -> type[TrainSettings]:
    """One frozen, slotted dataclass per set of names (built once, then reused)."""
    unknown = [n for n in names if n not in _FIELD_TYPES]
    if unknown:
        raise ValueError(f"not a setting of TrainConfig: {', '.join(unknown)}")
    fields = [(n, _FIELD_TYPES[n]) for n in names]
    return dataclasses.make_dataclass(
        name,
        fields,
        bases=(TrainSettings,),
        frozen=True,
        slots=True,
        namespace={"__module__": __name__},
    )


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    add_train_flags(parser)
    # None tells a warm-up that was asked for (checked against --steps) from the default one.
    parser.set_defaults(warmup_steps=None)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Builds and validates a TrainConfig; raises UsageError naming the first problem."""
    # deferred: archbench.workloads.models loads numpy
    from archbench.workloads.models import check_model_name

    values = {row.name: getattr(args, row.name) for row in TRAIN_SETTINGS}
    values["sync"] = values["sync"] is not False
    values["synthetic_shape"] = tuple(values["synthetic_shape"])
    asked_warmup = values["warmup_steps"]
    if asked_warmup is None:
        values["warmup_steps"] = SETTINGS["warmup_steps"].default
    config = TrainConfig(**values)
    if config.epochs is None and config.steps is None:
        config.epochs = 1
    check_levels(config.arch, values)
    dataset = SETTINGS["dataset"]
    try:
        dataset.check(config.dataset)
    except ValueError as exc:
        raise UsageError(f"{dataset.train_flag} {exc}") from None
    problem = combination_problem({**values, "warmup_steps": asked_warmup})
    if problem:
        raise UsageError(problem)
    check_model_name(config.model, config.dataset)
    for row in TRAIN_SETTINGS:  # the sweep's own flags: checked as the registry says
        value = values.get(row.name)
        if row.reserved and row.check is not None and value is not None:
            try:
                row.check(value)
            except ValueError as exc:
                raise UsageError(f"{row.train_flag} {exc}") from None
    check_output_path(config.out)
    check_timeline(config)
    return config


def check_output_path(path: str | None) -> None:
    """The record must be appendable: fail now rather than after training."""
    if path is None:
        return

    problem = check_appendable(path)
    if problem:
        raise UsageError(f"--out {path}: {problem}")


def check_timeline(config: TrainConfig) -> None:
    """--timeline: a trace file that can be written now, and (with --steps) a run long enough
    to trace (with --epochs the run's length is known once the data is: archbench.timeline)."""
    if config.timeline is None:
        return

    problem = check_appendable(config.timeline, "a trace goes to a plain JSON file")
    if problem:
        raise UsageError(f"--timeline {config.timeline}: {problem}")
    if config.steps is not None:
        problem = too_short(
            config.steps, config.warmup_steps, config.probe_every, config.timeline_steps
        )
        if problem:
            raise UsageError(problem)
