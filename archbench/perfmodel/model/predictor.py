"""Predicted step time of one configuration: compute + the communication of its architecture
not hidden behind compute. Composes the terms of `formulas` with the machine constants of
`calibration` and the few fitted parameters of `ModelParams`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from archbench.common.archs import ARCHITECTURES as ARCHS
from archbench.common.archs import arch as architecture
from archbench.common.errors import UsageError
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.costs import StepCost, single_cost, update_share
from archbench.perfmodel.model.inputs import ArchParams, StepConfig, key_family, local_steps


@dataclass
class ModelParams:
    arch: dict[str, ArchParams] = field(default_factory=dict)
    # Slow-down of compute per extra process sharing the same cores: x (1 + k (P - 1));
    # None: the calibration's measured value.
    cpu_contention: float | None = None
    # Per-model compute lines fitted on a study; they override the calibration's.
    compute: dict[str, ComputeLine] = field(default_factory=dict)

    def for_key(self, key: str) -> ArchParams:
        """Parameters of an architecture variant ('p2p-naive'), else of its family ('p2p')."""
        if key in self.arch:
            return self.arch[key]
        return self.arch.get(key_family(key), ArchParams())

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": {k: asdict(v) for k, v in self.arch.items()},
            "cpu_contention": self.cpu_contention,
            "compute": {k: asdict(v) for k, v in self.compute.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelParams:
        return cls(
            arch={k: ArchParams(**v) for k, v in data.get("arch", {}).items()},
            cpu_contention=(
                None if data.get("cpu_contention") is None else float(data["cpu_contention"])
            ),
            compute={k: ComputeLine(**v) for k, v in data.get("compute", {}).items()},
        )


@dataclass(frozen=True)
class StepPrediction:
    compute_s: float
    comm_s: float  # total communication of one step
    exposed_comm_s: float  # the part of it on the critical path
    step_s: float
    samples_per_s: float  # all workers together
    terms: dict[str, float]
    # the step split into its named terms (formulas.COMPUTE, formulas.LATENCY, ...): they add
    # up to step_s
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def dominant(self) -> tuple[str, float]:
        """The largest term of the step and its share of it."""
        if not self.parts or self.step_s <= 0:
            return F.COMPUTE, 1.0
        name = max(self.parts, key=lambda k: self.parts[k])
        return name, self.parts[name] / self.step_s

    @property
    def dominant_overhead(self) -> tuple[str, float]:
        """The largest term besides compute (what the step spends beyond one worker's own
        work) and its share of the step; compute when nothing else costs time."""
        others = {k: v for k, v in self.parts.items() if k != F.COMPUTE and v > 0}
        if not others or self.step_s <= 0:
            return self.dominant
        name = max(others, key=lambda k: others[k])
        return name, others[name] / self.step_s

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cpu_slowdown(config: StepConfig, params: ModelParams, calib: Calibration) -> float:
    """How much slower host work runs when `cpu_sharing_ranks` processes share the cores."""
    sharing = max(config.cpu_sharing_ranks, 1)
    kappa = calib.cpu_contention if params.cpu_contention is None else params.cpu_contention
    return 1.0 + kappa * (sharing - 1)


def compute_seconds(config: StepConfig, params: ModelParams, calib: Calibration) -> float:
    line = compute_line(config, params, calib)
    return line.seconds(config.batch_size) * cpu_slowdown(config, params, calib)


def compute_line(config: StepConfig, params: ModelParams, calib: Calibration) -> ComputeLine:
    """The model's compute line: the study's own for this architecture (`ARCH:MODEL`), else
    the study's (measured or given), else the calibration's."""
    line = (
        params.compute.get(f"{config.arch}:{config.model}")
        or params.compute.get(config.model)
        or calib.compute.get(config.model)
    )
    if line is None:
        where = (
            "no calibration file here, runs/microbench/results.jsonl"
            if calib.source == "defaults"
            else f"{calib.source} did not measure it"
        )
        raise UsageError(
            f"no compute time known for model {config.model!r} ({where}); give --compute-ms "
            f"(one worker's step, measured elsewhere), or run `archbench microbench --models "
            f"{config.model}` and pass --calibration, or fit on a study that trained it"
        )
    return line


def predict_step(config: StepConfig, params: ModelParams, calib: Calibration) -> StepPrediction:
    """Predicted median step time of `config`."""
    if config.arch not in ARCHS:
        raise UsageError(f"unknown architecture {config.arch!r} (choose from {', '.join(ARCHS)})")

    compute = compute_seconds(config, params, calib)
    fitted = params.for_key(config.key)
    # software overhead and per-byte host work are CPU work too: they slow down with the
    # processes sharing the cores, like compute (the links do not)
    slowdown = cpu_slowdown(config, params, calib)
    arch = replace(
        fitted,
        alpha_s=fitted.alpha_s * slowdown,
        gamma_s_per_byte=fitted.gamma_s_per_byte * slowdown,
        overhead_s=fitted.overhead_s * slowdown,
    )
    cost_function = architecture(config.arch).cost_function()
    if local_steps(config):
        cost = _local_sgd_cost(cost_function, config, arch, calib, compute)
    else:
        cost = cost_function(config, arch, calib, compute)
    # the worker's own update and the step's fixed overhead follow the exchange: never hidden
    own = {
        F.UPDATE: compute_line(config, params, calib).update_s * update_share(config) * slowdown,
        F.OVERHEAD: arch.overhead_s,
    }
    step = cost.step_s + sum(own.values())
    workers = config.placement.worker_hosts
    samples = len(workers) * config.batch_size / step if step > 0 else float("inf")
    return StepPrediction(
        compute_s=compute,
        comm_s=cost.comm_s,
        exposed_comm_s=cost.exposed_s,
        step_s=step,
        samples_per_s=samples,
        terms=cost.terms,
        parts={F.COMPUTE: compute, **cost.parts, **{k: v for k, v in own.items() if v}},
    )


def _local_sgd_cost(cost_function, config: StepConfig, arch: ArchParams, calib, compute: float):
    """The steady state of --sync-every H, per step: every step applies its own update (what
    `single` pays, gamma per byte), and one step in H also runs the architecture's exchange, of
    the same bytes as a gradient exchange, after the update (nothing left to overlap with:
    phi = 0). Step = compute + gamma*M + T_exchange / H. The synchronous warm-up steps of
    --sync-every-warmup-steps are not priced (the model is of the steady state)."""
    own_update = single_cost(config, arch, calib, compute)
    unhidden = replace(arch, overlap=0.0)
    exchange = cost_function(config, unhidden, calib, compute)
    every = config.sync_every
    comm = own_update.comm_s + exchange.comm_s / every
    terms = {**exchange.terms, "sync_every": every, "exchange_s": exchange.comm_s}
    return StepCost(comm, comm, compute + comm, terms)


def default_placement(
    arch: str, workers: int, num_ps: int, placement: str, hosts: int | None
) -> F.Placement:
    """Hosts and roles as the standard hostfiles lay them out.

    dedicated: the PS tasks get hosts of their own, workers one host each after them.
    colocated: PS k shares host k with a worker. `hosts` caps the number of hosts (ranks are
    then dealt round-robin over them, the way mpirun maps by node).
    """
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    descriptor = architecture(arch)
    num_ps = descriptor.servers(num_ps)
    if descriptor.has_servers and num_ps < 1:
        raise UsageError(f"--arch {arch} needs --num-ps of at least 1")
    if placement not in ("dedicated", "colocated"):
        raise UsageError(f"unknown placement {placement!r} (choose dedicated or colocated)")
    if placement == "colocated":
        if num_ps > workers:
            raise UsageError(f"colocated placement needs num_ps ({num_ps}) <= workers ({workers})")
        limit = hosts or workers
        worker_hosts = [f"node{(i % limit) + 1}" for i in range(workers)]
        ps_hosts = [f"node{(k % limit) + 1}" for k in range(num_ps)]
    else:
        limit = hosts or (workers + num_ps)
        ps_hosts = [f"node{(k % limit) + 1}" for k in range(num_ps)]
        worker_hosts = [f"node{((num_ps + i) % limit) + 1}" for i in range(workers)]
    return F.Placement(
        hosts=tuple(ps_hosts + worker_hosts),
        roles=tuple([F.PS] * len(ps_hosts) + [F.WORKER] * len(worker_hosts)),
    )
