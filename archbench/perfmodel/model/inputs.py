"""What a cost function is given: one configuration (`StepConfig`), the parameters fitted for
its architecture (`ArchParams`, and which set applies: `fit_key`), and what follows from the two
(the network the messages cross, the servers' shards, whether local steps are priced).

The cost functions (`costs`) and the prediction that calls them (`predictor`) both read these;
neither owns them, so they live here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from archbench.common.archs import arch as architecture
from archbench.common.errors import UsageError
from archbench.compression import CompressionSpec
from archbench.perfmodel.measure.calibration import Calibration
from archbench.perfmodel.model import formulas as F
from archbench.runtime.settings import applies


@dataclass
class ArchParams:
    """Free parameters of one architecture, fitted on measurements (`archbench model fit`)."""

    alpha_s: float = 0.0  # software overhead per message on top of the network's alpha
    efficiency: float = 1.0  # bandwidth term multiplier: achieved rate = link rate / efficiency
    gamma_s_per_byte: float = 0.0  # host cost per byte (copies, serialisation, reduction)
    overlap: float = 0.0  # fraction of communication hidden behind compute
    overhead_s: float = 0.0  # a fixed cost per step beyond every other term
    # PS: how far the servers send the pulls one worker after another (1) rather than to all
    # at once (0), so early workers push while the others still pull (formulas.ps_placed)
    pull_stagger: float = 0.0


@dataclass(frozen=True)
class StepConfig:
    """Everything the model needs to know about one configuration."""

    arch: str
    model: str
    batch_size: int  # per worker
    param_bytes: float
    placement: F.Placement
    bandwidth_bits: float | None = None  # shaped link between hosts; None = unshaped
    sync: bool = True
    ps_sharding: str = "round-robin"
    variable_bytes: tuple[float, ...] | None = None  # of each trainable variable
    # The shard plan priced: the PS trainer's own ShardPlan (archbench.ps.sharding), or
    # (bytes, variables) per PS as a run record lists the plan it ran
    ps_plan: Any = None
    fusion_threshold_mb: float | None = None
    compression: str = "none"
    compression_ratio: float = 0.01  # topk
    powersgd_rank: int = 2
    # shape of each trainable variable (PowerSGD's factors follow them); None: unknown
    variable_shapes: tuple[tuple[int, ...], ...] | None = None
    p2p_schedule: str = "staggered"
    cpu_sharing_ranks: int = 1  # processes sharing this worker's cores (itself included)
    link_burst_bytes: float = 0.0  # the emulated links' token bucket (0 on real links)
    sync_every: int = 1  # --sync-every H: parameters averaged every H steps, local steps between
    # --sparse-exchange sparse: only the embedding rows a batch touches travel (with indices)
    sparse_exchange: str = "dense"
    touched_rows: float | None = None  # unique embedding rows one worker's batch touches a step
    embedding_shape: tuple[int, int] | None = None  # (rows, width) of the row-sparse table
    # rows one worker's batch looks up, duplicates included (what ring's allgather sends)
    rows_looked_up: float | None = None
    # ps with sparse rows, as a run measured it: each worker's row bytes to and from each server
    # (pushes and pulls together); None: the rows spread evenly over the servers
    row_bytes_per_worker_per_server: tuple[tuple[float, ...], ...] | None = None
    # GPU servers (ring): the workers are devices, G to a host in rank order, each on an
    # intra-host link of its own; the allreduce is a ring through them all or hierarchical
    # (formulas.allreduce_on_hosts_parts). 1: one worker per host, as the placement says.
    devices_per_host: int = 1
    allreduce_algorithm: str = "ring"
    call_s: float = 0.0  # a fixed cost per allreduce call beyond the per-hop latencies (G > 1)
    # fused buffers: each call's latency while the previous call's bytes move
    pipelined_buffers: bool = False
    # how the exchange overlaps compute: "fraction" (ArchParams.overlap of it hides) or
    # "backward" (the ring's allreduces follow the gradients as the backward pass makes them:
    # formulas.backward_schedule, from each variable's multiply-adds)
    overlap_schedule: str = "fraction"
    variable_flops: tuple[float, ...] | None = None
    backward_share: float = 2.0 / 3.0  # of the compute: the backward pass (about 2x forward)

    @cached_property
    def compression_spec(self) -> CompressionSpec:
        """The compression this configuration prices, read once (a cost function asks it what
        travels)."""
        return CompressionSpec(
            self.compression or "none", self.compression_ratio, self.powersgd_rank
        )

    @property
    def num_workers(self) -> int:
        return self.placement.num_workers

    @property
    def num_ps(self) -> int:
        return len(self.placement.ps_hosts)

    @property
    def key(self) -> str:
        """Which set of fitted parameters applies."""
        return fit_key(self)


def fit_key(config: StepConfig) -> str:
    """Which set of fitted parameters applies: the architecture, or its variant."""
    variant = _VARIANTS.get(config.arch)
    return variant(config) if variant else config.arch


# A fit key is the architecture, or `<architecture>-<variant>`: the schedule of p2p, whether
# a PS's updates wait for every worker.
_ASYNCHRONOUS = "async"
_VARIANTS = {
    "p2p": lambda c: f"p2p-{c.p2p_schedule}",
    "ps": lambda c: f"ps-{'sync' if c.sync else _ASYNCHRONOUS}",
}


def key_family(key: str) -> str:
    """The architecture a fit key ('p2p-staggered', 'ps-sync', 'ring') is a variant of."""
    return key.split("-")[0]


def is_asynchronous_key(key: str) -> bool:
    """Whether a fit key names an asynchronous variant (a PS whose updates wait for no one)."""
    return key.split("-")[1:] == [_ASYNCHRONOUS]


def network_for(
    config: StepConfig, arch: ArchParams, calib: Calibration, overhead_per_message: bool = True
) -> F.Network:
    """The calibrated paths, with this architecture's software overhead added to every
    message (unless it is charged elsewhere) and its bandwidth efficiency applied."""
    inter = calib.inter_for(config.bandwidth_bits)
    extra = arch.alpha_s if overhead_per_message else 0.0
    return F.Network(
        inter=F.LinkCost(inter.alpha_s + extra, inter.beta_s_per_byte * arch.efficiency),
        intra=F.LinkCost(
            calib.intra.alpha_s + extra, calib.intra.beta_s_per_byte * arch.efficiency
        ),
        burst_bytes=config.link_burst_bytes if config.bandwidth_bits else 0.0,
    )


def ps_shards(config: StepConfig) -> tuple[list[float], list[int]]:
    """Bytes and variable count held by each PS under the priced plan (an even split of one
    tensor each when the plan is unknown)."""
    k = config.num_ps
    if k < 1:
        raise UsageError("a PS configuration needs at least one PS")
    plan = config.ps_plan
    if hasattr(plan, "bytes_per_server") and plan.num_ps == k:
        return [float(b) for b in plan.bytes_per_server()], plan.variables_per_server()
    if isinstance(plan, tuple) and len(plan[0]) == k:
        return list(plan[0]), list(plan[1])
    return [config.param_bytes / k] * k, [1] * k


def local_steps(config: StepConfig) -> bool:
    """Whether --sync-every prices this configuration: H > 1 on an architecture it applies to
    (asynchronous PS refuses it)."""
    return (
        config.sync_every > 1
        and applies("sync_every", config.arch)
        and (config.sync or not architecture(config.arch).has_servers)
    )
