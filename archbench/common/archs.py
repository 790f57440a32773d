"""One descriptor per communication architecture: everything the rest of archbench asks about an
architecture instead of comparing its name with a literal.

A descriptor says how many processes a job of W workers and K servers runs, which rank does what
(servers first, then workers; the first worker is the chief that writes the record), which
controller it uses by default, which trainer runs it, which cost function prices its step in
the performance model, what its exchange does that callers ask about (Horovod, shard owners,
gathered rows), and its colour and marker in figures (tables and figures list the architectures
in `ARCHS`' order). Trainers and cost functions are named by import path and loaded only when
used, so this module stays free of TensorFlow, MPI and the model. Which settings mean something
for an architecture is the registry's to say (`archbench.runtime.settings.applies`): its rows name the
architectures they apply to, so the registry imports this module and not the other way round.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SERVER_ROLE = "ps"
WORKER_ROLE = "worker"
CHIEF_ROLE = "chief"
# A rank of a one-process architecture that trains the same model at the same time on a host of
# its own and records nothing: it loads the machine as the workers of a W-worker job do, so the
# baseline is measured under the same conditions (`--companions`).
COMPANION_ROLE = "companion"


@dataclass(frozen=True)
class Architecture:
    name: str
    summary: str
    multi_process: bool  # run under a launcher (mpirun / horovodrun); False: one plain process
    has_servers: bool  # ranks 0..K-1 are parameter servers, the rest workers
    default_controller: str | None  # what carries the messages when the run does not say
    trainer_path: str  # "module:class" of its trainer
    cost_path: str  # "module:function" pricing one step in the performance model
    color: str  # its colour in every figure
    marker: str  # its marker in every figure
    # Horovod carries the exchange: the settings Horovod reads at init, Horovod's own timeline
    uses_horovod: bool = False
    # each worker owns a shard of the parameters: it updates that shard and sends it back to its
    # peers (the other workers' updates are not its own)
    owns_shards: bool = False
    # a row-sparse gradient travels as an allgather of every row a batch looked up, duplicates
    # included; elsewhere the unique rows travel, summed
    gathers_rows: bool = False

    @property
    def is_baseline(self) -> bool:
        """The one-process architecture: the baseline of speed-up and scaling efficiency."""
        return not self.multi_process

    def servers(self, num_ps: int | None) -> int:
        """Server processes of a job asked for `num_ps` servers (0 where there are none)."""
        return int(num_ps if num_ps is not None else 1) if self.has_servers else 0

    def processes(self, workers: int, num_ps: int | None = None, companions: int = 0) -> int:
        """Processes a job of `workers` workers (and `num_ps` servers) runs; a one-process
        architecture's job runs its companions too."""
        if not self.multi_process:
            return 1 + companions
        return workers + self.servers(num_ps)

    def workers(self, world_size: int, num_ps: int | None = None) -> int:
        """Workers among `world_size` processes."""
        return world_size - self.servers(num_ps) if self.multi_process else 1

    def chief_rank(self, num_ps: int | None = None) -> int:
        """The first worker: it writes the record."""
        return self.servers(num_ps)

    def roles(self, world_size: int, num_ps: int | None = None) -> list[str]:
        """Role of every rank, in rank order, as the record's `cluster.roles` lists them."""
        if not self.multi_process:
            return [CHIEF_ROLE] + [COMPANION_ROLE] * (world_size - 1)
        servers = self.servers(num_ps)
        return [
            SERVER_ROLE if rank < servers else CHIEF_ROLE if rank == servers else WORKER_ROLE
            for rank in range(world_size)
        ]

    def trainer_class(self) -> type:
        return _load(self.trainer_path)

    def cost_function(self) -> Callable[..., Any]:
        return _load(self.cost_path)


def _load(path: str) -> Any:
    module_name, name = path.split(":")
    return getattr(importlib.import_module(module_name), name)


_COSTS = "archbench.perfmodel.model.costs"

ARCHS: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture(
            "single",
            "one process: the baseline for speed-up and scaling efficiency",
            multi_process=False,
            has_servers=False,
            default_controller=None,
            trainer_path="archbench.trainers.single:SingleTrainer",
            cost_path=f"{_COSTS}:single_cost",
            color="#6b6b6b",
            marker="s",
        ),
        Architecture(
            "ring",
            "ring-allreduce with Horovod",
            multi_process=True,
            has_servers=False,
            default_controller=None,  # Horovod's own choice (MPI under mpirun)
            trainer_path="archbench.trainers.ring:RingTrainer",
            cost_path=f"{_COSTS}:ring_cost",
            color="#1f77b4",
            marker="o",
            uses_horovod=True,
            gathers_rows=True,
        ),
        Architecture(
            "p2p",
            "peer to peer over mpi4py, each worker owning a shard",
            multi_process=True,
            has_servers=False,
            default_controller="mpi",
            trainer_path="archbench.trainers.p2p:P2PTrainer",
            cost_path=f"{_COSTS}:p2p_cost",
            color="#2ca02c",
            marker="^",
            owns_shards=True,
        ),
        Architecture(
            "ps",
            "TensorFlow parameter servers over gRPC",
            multi_process=True,
            has_servers=True,
            default_controller="grpc",
            trainer_path="archbench.trainers.ps:PSTrainer",
            cost_path=f"{_COSTS}:ps_cost",
            color="#d95f02",
            marker="D",
        ),
    )
}
# in this order in every table and figure
ARCHITECTURES: tuple[str, ...] = tuple(ARCHS)
MULTI_PROCESS: frozenset[str] = frozenset(n for n, a in ARCHS.items() if a.multi_process)
WITH_SERVERS: frozenset[str] = frozenset(n for n, a in ARCHS.items() if a.has_servers)
BASELINES: frozenset[str] = frozenset(n for n, a in ARCHS.items() if a.is_baseline)
WITH_HOROVOD: frozenset[str] = frozenset(n for n, a in ARCHS.items() if a.uses_horovod)


def sort_key(name: object) -> tuple[int, str]:
    """Orders architecture names as every table and figure lists them (unknown names last)."""
    text = str(name)
    return (ARCHITECTURES.index(text) if text in ARCHITECTURES else len(ARCHITECTURES), text)


def arch(name: str) -> Architecture:
    """The descriptor of `name`; KeyError names the known ones."""
    try:
        return ARCHS[name]
    except KeyError:
        raise KeyError(
            f"unknown architecture {name!r} (choose from {', '.join(ARCHITECTURES)})"
        ) from None


# Questions about an architecture by name, for names read from records, flags, study specs and
# tables: anything that is not a known name (None, NaN, a mistyped level) is none of these.


def _answer(name: object, question: str) -> bool:
    """The descriptor's answer to `question` (an attribute) for `name`; False for no known name."""
    descriptor = ARCHS.get(name) if isinstance(name, str) else None
    return descriptor is not None and bool(getattr(descriptor, question))


def is_baseline(name: object) -> bool:
    """Whether `name` is the one-process baseline."""
    return _answer(name, "is_baseline")


def has_servers(name: object) -> bool:
    """Whether `name` runs parameter servers beside its workers."""
    return _answer(name, "has_servers")


def uses_horovod(name: object) -> bool:
    """Whether Horovod carries `name`'s exchange."""
    return _answer(name, "uses_horovod")


def owns_shards(name: object) -> bool:
    """Whether each worker of `name` owns a shard of the parameters."""
    return _answer(name, "owns_shards")


def gathers_rows(name: object) -> bool:
    """Whether `name` gathers every looked-up embedding row, duplicates included."""
    return _answer(name, "gathers_rows")
