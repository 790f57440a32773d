"""The settings a study may fix or vary: their types, accepted levels and which runs they apply to.

Two kinds: train settings become `python -m archbench.train` flags; launch settings shape how the
run is started (how many workers, where ranks go, which launcher, the emulated link bandwidth).
A setting that does not apply to a run's architecture (e.g. `num_ps` for `ring`) is dropped from
that run's configuration, so a factorial over mixed architectures measures each distinct
configuration once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archbench.config import (
    ALLREDUCE_ALGORITHMS,
    ARCHITECTURES,
    COMPRESSIONS,
    DATASETS,
    P2P_SCHEDULES,
    PS_SHARDINGS,
)

MULTI_PROCESS = frozenset({"ring", "p2p", "ps"})
ALL_ARCHS = frozenset(ARCHITECTURES)

# Placements the sweep turns into hostfiles itself; any other level names a hostfile.
PLACEMENT_POLICIES = ("packed", "spread", "dedicated", "colocated")
PS_ONLY_PLACEMENTS = frozenset({"dedicated", "colocated"})
LAUNCHERS = ("mpirun", "horovodrun")
CONTROLLERS = ("mpi", "gloo")

# as tc reads a rate, and as `archbench cluster up --bandwidth` accepts it
_BANDWIDTH = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_SHAPE = re.compile(r"^\d+(x\d+)*$")


class LevelError(ValueError):
    """A level the setting does not accept; the message says what it accepts."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # int | float | choice | str | bool | args
    applies_to: frozenset[str]
    train_flag: str | None  # None: a launch setting, not passed to train
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    check: Callable[[Any], None] | None = None
    numeric: bool = False
    help: str = ""

    def coerce(self, value: Any) -> Any:
        """The level as the value the run uses; raises LevelError when no backend accepts it."""
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
                raise LevelError(f"must be an integer, got {value!r}")
            value = int(value)
        elif self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LevelError(f"must be a number, got {value!r}")
            value = float(value)
        elif self.kind == "choice":
            if value not in self.choices:
                raise LevelError(
                    f"must be one of {', '.join(map(str, self.choices))}, got {value!r}"
                )
        elif self.kind == "bool":
            value = _coerce_sync(value) if self.name == "sync" else value
            if not isinstance(value, bool):
                raise LevelError(f"must be true or false, got {value!r}")
        elif self.kind == "str":
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
        if self.minimum is not None and isinstance(value, int | float):
            too_small = value <= self.minimum if self.exclusive_minimum else value < self.minimum
            if too_small:
                bound = ">" if self.exclusive_minimum else ">="
                raise LevelError(f"must be {bound} {self.minimum:g}, got {value!r}")
        if self.maximum is not None and isinstance(value, int | float) and value > self.maximum:
            raise LevelError(f"must be <= {self.maximum:g}, got {value!r}")
        if self.check is not None:
            self.check(value)
        return value


def _coerce_sync(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("sync", "async"):
        return value.lower() == "sync"
    return value


def _check_model(value: str) -> None:
    from archbench.models import IMAGE_MODELS, KERAS_APPLICATIONS, TEXT_MODELS

    known = IMAGE_MODELS + TEXT_MODELS + tuple(KERAS_APPLICATIONS)
    if value not in known:
        raise LevelError(f"must be one of {', '.join(known)}, got {value!r}")


def _check_bandwidth(value: str) -> None:
    match = _BANDWIDTH.match(value)
    if not match:
        raise LevelError(
            f"must be a rate like 100mbit or 1gbit (bit, kbit, mbit, gbit), got {value!r}"
        )
    if not 1e6 <= float(match.group(1)) * _BITS[match.group(2)] <= 100e9:
        raise LevelError(f"must be between 1mbit and 100gbit, got {value!r}")


def _check_shape(value: str) -> None:
    if not _SHAPE.match(value) or any(int(d) <= 0 for d in value.split("x")):
        raise LevelError(f"must be a shape like 32x32x3, got {value!r}")


def _check_placement(value: str) -> None:
    # A hostfile path is checked against the cluster when the plan is built.
    if value not in PLACEMENT_POLICIES and not ("/" in value or value.endswith(".txt")):
        raise LevelError(
            f"must be one of {', '.join(PLACEMENT_POLICIES)} or a hostfile path, got {value!r}"
        )


def _s(name: str, kind: str, applies: frozenset[str], flag: str | None, **kw: Any) -> Setting:
    return Setting(name=name, kind=kind, applies_to=applies, train_flag=flag, **kw)


_ONLY_PS = frozenset({"ps"})
_ONLY_RING = frozenset({"ring"})

SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        # --- train settings (flags of python -m archbench.train) ---
        _s("arch", "choice", ALL_ARCHS, "--arch", choices=ARCHITECTURES),
        _s("model", "str", ALL_ARCHS, "--model", check=_check_model),
        _s("dataset", "choice", ALL_ARCHS, "--dataset", choices=DATASETS),
        _s("data_dir", "str", ALL_ARCHS, "--data-dir"),
        _s("text_file", "str", ALL_ARCHS, "--text-file"),
        _s("synthetic_shape", "str", ALL_ARCHS, "--synthetic-shape", check=_check_shape),
        _s("synthetic_classes", "int", ALL_ARCHS, "--synthetic-classes", minimum=1),
        _s("synthetic_samples", "int", ALL_ARCHS, "--synthetic-samples", minimum=1),
        _s("seq_len", "int", ALL_ARCHS, "--seq-len", minimum=1, numeric=True),
        _s("batch_size", "int", ALL_ARCHS, "--batch-size", minimum=1, numeric=True),
        _s("epochs", "int", ALL_ARCHS, "--epochs", minimum=1, numeric=True),
        _s("steps", "int", ALL_ARCHS, "--steps", minimum=1, numeric=True),
        _s("lr", "float", ALL_ARCHS, "--lr", minimum=0, exclusive_minimum=True, numeric=True),
        _s("momentum", "float", ALL_ARCHS, "--momentum", minimum=0, maximum=0.999999, numeric=True),
        _s("seed", "int", ALL_ARCHS, "--seed", minimum=0),
        _s("eval_every", "int", ALL_ARCHS, "--eval-every", minimum=0),
        _s("eval_samples", "int", ALL_ARCHS, "--eval-samples", minimum=0),
        _s(
            "target_accuracy",
            "float",
            ALL_ARCHS,
            "--target-accuracy",
            minimum=0,
            exclusive_minimum=True,
            maximum=1,
        ),
        _s("warmup_steps", "int", ALL_ARCHS, "--warmup-steps", minimum=0),
        _s("probe_every", "int", ALL_ARCHS, "--probe-every", minimum=0),
        _s("threads", "int", ALL_ARCHS, "--threads", minimum=0),
        _s(
            "fusion_threshold_mb",
            "float",
            _ONLY_RING,
            "--fusion-threshold-mb",
            minimum=0,
            numeric=True,
        ),
        _s(
            "cycle_time_ms",
            "float",
            _ONLY_RING,
            "--cycle-time-ms",
            minimum=0,
            exclusive_minimum=True,
            numeric=True,
        ),
        _s("compression", "choice", _ONLY_RING, "--compression", choices=COMPRESSIONS),
        _s(
            "allreduce_algorithm",
            "choice",
            _ONLY_RING,
            "--allreduce-algorithm",
            choices=ALLREDUCE_ALGORITHMS,
        ),  # fmt: skip
        _s("num_ps", "int", _ONLY_PS, "--num-ps", minimum=1, numeric=True),
        _s("sync", "bool", _ONLY_PS, "--sync"),
        _s("ps_sharding", "choice", _ONLY_PS, "--ps-sharding", choices=PS_SHARDINGS),
        _s("ps_timeout_s", "float", _ONLY_PS, "--ps-timeout", minimum=0, exclusive_minimum=True),
        _s("p2p_schedule", "choice", frozenset({"p2p"}), "--p2p-schedule", choices=P2P_SCHEDULES),
        # extra words appended to the train command, for flags this catalogue does not know yet
        _s("extra_args", "args", ALL_ARCHS, ""),
        # --- launch settings (how the run is started) ---
        _s("workers", "int", MULTI_PROCESS, None, minimum=1, numeric=True),
        _s("placement", "str", MULTI_PROCESS, None, check=_check_placement),
        _s("launcher", "choice", MULTI_PROCESS, None, choices=LAUNCHERS),
        _s("controller", "choice", _ONLY_RING, None, choices=CONTROLLERS),
        _s("bandwidth", "str", MULTI_PROCESS, None, check=_check_bandwidth),
    )
}

# Settings the sweep owns: a study may not set them (each run gets its own).
RESERVED = {"out": "--out", "run_id": "--run-id", "study": "--study"}


def setting(name: str) -> Setting:
    """The named setting; raises LevelError listing the known names."""
    if name in SETTINGS:
        return SETTINGS[name]
    if name in RESERVED:
        raise LevelError(
            f"{name!r} is set by the sweep for every run ({RESERVED[name]}); remove it"
        )
    hint = _closest(name)
    raise LevelError(
        f"unknown setting {name!r}{f' (did you mean {hint!r}?)' if hint else ''}; "
        f"known: {', '.join(sorted(SETTINGS))}"
    )


def _closest(name: str) -> str | None:
    import difflib

    matches = difflib.get_close_matches(name.replace("-", "_"), list(SETTINGS), n=1, cutoff=0.7)
    return matches[0] if matches else None


def applies(name: str, arch: str, value: Any = None) -> bool:
    """Whether setting `name` (at level `value`) means anything for a run of `arch`."""
    if arch not in SETTINGS[name].applies_to:
        return False
    if name == "placement" and value in PS_ONLY_PLACEMENTS:
        return arch == "ps"
    return True
