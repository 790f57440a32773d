"""A warm group, rank side: one launch whose ranks run several runs of one process layout in turn.

`python -m archbench.train --runs-file FILE` reads FILE (written by the sweep):

    {"group": "g-…", "launched_at": <epoch seconds>, "runs": [{"run_id": …, "argv": [train flags…]}, …]}

and runs each run exactly as `python -m archbench.train <argv>` would (its own --out, --run-id and
record), one after another. Between two runs everything a run could inherit is rebuilt: Keras's
session and the default graph (layer names, the seed's op counter), the thread caps (each run
starts uncapped, as a cold one does), and the parameter servers' resource containers (variables,
queues, accumulators: `tf.compat.v1.Session.reset`); the model, optimizer and data order are made
from each run's own seed, as cold. What stays is what a run cannot observe: the interpreter with
its imports, MPI (initialised once, finalized at the end), the PS gRPC servers with their ports,
and Horovod, initialised once per launch (Horovod 0.28 crashes when initialised again after
`hvd.shutdown()`): the sweep puts runs in one launch only when every setting Horovod reads at
init is the same (archbench.sweep.groups).

The first run that does not end with exit status 0 ends the launch with its status; the sweep
runs the rest of the group in a fresh launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archbench.common.errors import UsageError
from archbench.runtime.emulation import disarm_caps

RUNS_FILE_FLAG = "--runs-file"


@dataclass
class GroupRun:
    run_id: str
    argv: list[str]


@dataclass
class WarmGroup:
    """The group this process is running, and what its runs share."""

    group: str
    launched_at: float | None
    runs: list[GroupRun]
    position: int = 0  # 1-based position of the run now running
    first_step_at: float | None = None  # the group's first training step (time.time())
    # kept across runs: the PS cluster (layout and this rank's gRPC server)
    shared: dict[str, Any] = field(default_factory=dict)

    def launch_record(self) -> dict[str, Any]:
        """The record's `launch` section for the run now running."""
        startup = None
        if self.launched_at is not None and self.first_step_at is not None:
            startup = max(0.0, self.first_step_at - self.launched_at)
        return {
            "warm": True,
            "group": self.group,
            "position": self.position,
            "group_size": len(self.runs),
            "group_startup_s": startup,
        }


_CURRENT: WarmGroup | None = None


def current() -> WarmGroup | None:
    """The warm group this process runs, or None for a cold run (one launch, one run)."""
    return _CURRENT


def cold_launch_record(launched_at: float | None, first_step_at: float | None) -> dict[str, Any]:
    """The `launch` section of a run that had a launch of its own."""
    startup = None
    if launched_at is not None and first_step_at is not None:
        startup = max(0.0, first_step_at - launched_at)
    return {
        "warm": False,
        "group": None,
        "position": 1,
        "group_size": 1,
        "group_startup_s": startup,
    }


def read_runs_file(path: str) -> WarmGroup:
    """The group a runs file describes; UsageError naming what is wrong with it."""
    # deferred: archbench.common.jsonl loads nothing heavy, but keeps this module's imports to errors
    from archbench.common.jsonl import JsonProblem, read_json
    from archbench.common.safe_text import shown

    where = f"{RUNS_FILE_FLAG} {shown(path)}"
    expected = '{"group": …, "runs": [{"run_id": …, "argv": […]}, …]}'
    try:
        data = read_json(path, max_bytes=MAX_RUNS_FILE_BYTES)
        runs = [
            GroupRun(_label(item["run_id"]), [_word(word) for word in item["argv"]])
            for item in data["runs"]
        ]
        launched_at = data.get("launched_at")
        group = WarmGroup(_label(data["group"]), _launched_at(launched_at), runs)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    except JsonProblem as exc:
        raise UsageError(f"{where}: not a runs file ({exc})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"{where}: not a runs file ({type(exc).__name__}: {shown(str(exc))[:200]}); "
            f"expected {expected}"
        ) from None
    if not runs:
        raise UsageError(f"{where}: the group has no runs")
    return group


# The sweep writes a few KiB per run; a group holds at most a study's runs.
MAX_RUNS_FILE_BYTES = 64 << 20


def _label(value: object) -> str:
    """A group's or run's name: a non-empty string on one line (it reaches records and logs)."""
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise ValueError(f"{value!r} is not a name (a non-empty string on one line)")
    return value


def _word(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"argv word {value!r} is not a string")
    return value


def _launched_at(value: object) -> float | None:
    """When the launcher started (epoch seconds), or None; a finite time after 1970 only."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e11:
        raise ValueError(f"launched_at {value!r} is not a time (epoch seconds)")
    return float(value)


def enter(group: WarmGroup) -> None:
    """Marks `group` as the one this process runs (`current`), before its first run starts."""
    global _CURRENT
    _CURRENT = group


def between_runs(group: WarmGroup) -> None:
    """Forgets what the last run built, so the next starts from what a fresh process has."""
    import tensorflow as tf  # deferred: the sweep driver imports this module without TensorFlow

    disarm_caps()  # start-up runs uncapped, as a cold run's does
    tf.keras.backend.clear_session()  # layer name counters, Keras's graph and its seed state
    tf.compat.v1.reset_default_graph()
    reset = group.shared.pop("reset_servers", None)
    if reset is not None:
        reset()


def finish_group() -> None:
    """MPI outlives the group's runs: finalized here, once (its ranks wait for each other).
    Horovod goes first where a run started it: its background thread calls MPI until
    `hvd.shutdown()`, and MPI finalized under it crashes the process."""
    import sys

    if "mpi4py.MPI" not in sys.modules:
        return
    horovod = sys.modules.get("horovod.tensorflow")
    if horovod is not None and horovod.is_initialized():
        horovod.shutdown()
    from mpi4py import MPI  # deferred: imported only where the runs loaded it (checked above)

    if MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.Finalize()


def started_training(when: float) -> None:
    """Called at a run's first step: the group's start-up ends at its first run's."""
    if _CURRENT is not None and _CURRENT.first_step_at is None:
        _CURRENT.first_step_at = when
