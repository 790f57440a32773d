"""One cost function per architecture: the communication of one step and the step it makes,
given the compute time and the architecture's fitted parameters. The architecture's descriptor
(`archbench.common.archs`) names its function here; `predictor.predict_step` calls it."""

from __future__ import annotations

from dataclasses import dataclass, field

from archbench.common.archs import gathers_rows, has_servers, owns_shards
from archbench.common.errors import UsageError
from archbench.compression import (
    INDEX_BYTES,
    PS_INDEX_BYTES,
    VALUE_BYTES,
    powersgd_payload,
)
from archbench.perfmodel.measure.calibration import Calibration
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.inputs import (
    ArchParams,
    StepConfig,
    local_steps,
    network_for,
    ps_shards,
)
from archbench.runtime.sparse_rows import INDEX_BYTES_P2P, INDEX_BYTES_PS


@dataclass
class StepCost:
    comm_s: float  # total communication of one step
    exposed_s: float  # the part of it on the critical path
    step_s: float
    terms: dict[str, float] = field(default_factory=dict)
    # the exposed communication split into its named terms (formulas.LATENCY, ...): they add
    # up to exposed_s (each term hidden behind compute in proportion, when some is)
    parts: dict[str, float] = field(default_factory=dict)


def single_cost(
    config: StepConfig, arch: ArchParams, calib: Calibration, compute: float
) -> StepCost:
    """Nothing travels; what remains is applying the update (gamma per byte)."""
    comm = float(config.param_bytes) * arch.gamma_s_per_byte
    return StepCost(comm, comm, compute + comm, parts={F.HOST: comm})


def _overlapped(parts: dict[str, float], compute: float, arch: ArchParams, terms=None) -> StepCost:
    comm = sum(parts.values())
    exposed = F.exposed_comm_s(comm, compute, arch.overlap)
    share = exposed / comm if comm > 0 else 0.0
    exposed_parts = {name: value * share for name, value in parts.items()}
    return StepCost(comm, exposed, compute + exposed, terms or {}, exposed_parts)


def update_share(config: StepConfig) -> float:
    """The share of the optimizer's update (a `single` step less its compute) a worker of this
    configuration runs itself: all of it for single and ring (and in local steps), its own
    shard for p2p (an owner updates 1/W, then receives the rest), none for ps (the servers
    update: SERVER_UPDATE)."""
    if owns_shards(config.arch) and not local_steps(config):
        return 1.0 / max(config.num_workers, 1)
    if has_servers(config.arch) and not local_steps(config):
        return 0.0
    return 1.0


def ring_cost(config: StepConfig, arch: ArchParams, calib: Calibration, compute: float) -> StepCost:
    workers = config.placement.worker_hosts
    if len(workers) <= 1:
        return single_cost(config, arch, calib, compute)
    across = len(set(workers)) > 1
    network = network_for(config, arch, calib)
    wire = ring_wire_bytes(config)
    threshold = (config.fusion_threshold_mb or 64.0) * 1024 * 1024
    buffers = F.fusion_buffers(wire, threshold)
    if config.compression_spec.low_rank:
        buffers = max(buffers, 2)  # P, then Q: two rounds of allreduce
    if config.devices_per_host > 1:
        one_call = F.allreduce_on_hosts_parts(
            wire, len(workers), config.devices_per_host, network.inter, network.intra,
            config.allreduce_algorithm, arch.gamma_s_per_byte, config.call_s,
        )  # fmt: skip
        parts = {**one_call, F.LATENCY: one_call[F.LATENCY] * buffers}
    else:
        parts = F.ring_allreduce_placed_parts(
            wire, workers, network, arch.gamma_s_per_byte, buffers
        )
        # where microbench timed Horovod's allreduce over this many hosts, a call's fixed cost
        # is that measurement (negotiation, the cycle, the 2(W-1) messages), plus any fitted
        # extra
        call = calib.ring_call_for(len(workers)) if across else None
        if call is not None:
            parts[F.LATENCY] = buffers * (call + 2 * (len(workers) - 1) * arch.alpha_s)
    terms = {"fusion_buffers": buffers}
    if config.overlap_schedule == "backward":
        return _scheduled(config, parts, buffers, wire, threshold, compute, terms)
    if config.pipelined_buffers and buffers > 1:
        latency = parts[F.LATENCY] / buffers
        moving = parts[F.LINK] + parts[F.HOST]
        transfers = [moving * b / wire for b in F.fused_buffer_bytes(wire, threshold)]
        parts[F.LATENCY] = F.buffer_chain_s(latency, transfers, pipelined=True) - moving
    return _overlapped(parts, compute, arch, terms)


def _scheduled(
    config: StepConfig,
    parts: dict[str, float],
    buffers: int,
    wire: float,
    threshold: float,
    compute: float,
    terms: dict[str, float],
) -> StepCost:
    """The ring's allreduces under a layer-order schedule: each gradient ready when the
    backward pass has gone through its layer, fused with those ready beside it while the
    previous call runs (formulas.backward_schedule); what outlasts the compute is exposed,
    split over the terms in proportion to the time each takes in the calls."""
    sizes = [float(b) for b in (config.variable_bytes or ())]
    flops = list(config.variable_flops or ())
    if not sizes or len(flops) != len(sizes):
        raise UsageError(
            "--overlap backward needs the model's variables and their multiply-adds (a model "
            "archbench can build)"
        )
    scale = wire / sum(sizes)  # what travels per byte of gradient (fp16 halves it)
    ready = F.gradient_ready_s(flops, compute, config.backward_share)
    moving = parts[F.LINK] + parts[F.HOST]
    schedule = F.backward_schedule(
        ready, [b * scale for b in sizes], threshold, parts[F.LATENCY] / buffers,
        moving / wire, config.pipelined_buffers,
    )  # fmt: skip
    exposed = max(schedule.end_s - compute, 0.0)
    latency = schedule.calls * parts[F.LATENCY] / buffers
    comm = latency + moving
    shares = {F.LATENCY: latency, F.LINK: parts[F.LINK], F.HOST: parts[F.HOST]}
    exposed_parts = {k: exposed * v / comm if comm > 0 else 0.0 for k, v in shares.items()}
    terms = {**terms, "fusion_buffers": schedule.calls, "allreduce_end_s": schedule.end_s}
    return StepCost(comm, exposed, compute + exposed, terms, exposed_parts)


def p2p_cost(config: StepConfig, arch: ArchParams, calib: Calibration, compute: float) -> StepCost:
    workers = config.placement.worker_hosts
    if len(workers) <= 1:
        return single_cost(config, arch, calib, compute)
    network = network_for(config, arch, calib)
    message = float(config.param_bytes)
    parts = F.p2p_exchange_placed_parts(
        message, workers, network, 1.0, arch.gamma_s_per_byte, sparse_push_bytes(config),
        sparse_return_bytes(config),
    )  # fmt: skip
    return _overlapped(parts, compute, arch)


def ps_cost(config: StepConfig, arch: ArchParams, calib: Calibration, compute: float) -> StepCost:
    # the software overhead is the server's time per tensor request, not link latency
    network = network_for(config, arch, calib, overhead_per_message=False)
    shards, counts = ps_shards(config)
    pushed = sparse_push_bytes(config) if config.sync else None
    push = None if pushed is None else [pushed * s / sum(shards) for s in shards]
    # sparse rows: the pull too is the rows a batch reads, spread over the servers as the
    # parameters are (an even placement of the rows)
    pulled = sparse_pull_bytes(config) if config.sync else None
    pull = None if pulled is None else [pulled * s / sum(shards) for s in shards]
    placed = _placed_rows(config, shards) if pulled is not None else None
    if placed is not None:
        push, pull = placed
    # the server's costs as calibrated (microbench, or the defaults measured on the emulated
    # cluster), plus what a fit added
    per_request = calib.ps_request_s + arch.alpha_s
    ps = F.ps_placed(
        shards, config.placement, network, calib.ps_accumulate_s_per_byte + arch.gamma_s_per_byte,
        per_request, counts, push, pull, calib.ps_apply_s_per_byte, arch.pull_stagger,
    )  # fmt: skip
    busiest = ps.busiest_server
    workers = config.num_workers
    terms = {
        "busiest_ps": busiest,
        "busiest_ps_bytes": shards[busiest],
        "busiest_ps_variables": counts[busiest],
        # tensor requests the busiest server answers per step: a push and a pull of each of
        # its variables (or shards of one) from every worker
        "busiest_ps_requests": 2 * workers * counts[busiest],
        "mean_ps_bytes": sum(shards) / len(shards),
        "worker_requests": 2 * sum(counts),
        "per_request_s": per_request,
        "server_update_s": ps.parts[F.SERVER_UPDATE],
        "requests_s": ps.parts[F.REQUESTS],
        "worker_requests_s": ps.own_requests_s,
        "server_requests_s": ps.server_requests_s,
        "ps_bottleneck_s": ps.bottleneck_s,
    }
    if config.sync:
        return _overlapped(ps.parts, compute, arch, terms)
    comm = ps.own_comm_s
    own_exposed = F.exposed_comm_s(comm, compute, arch.overlap)
    step = F.async_step_s(compute, own_exposed, ps.bottleneck_s)
    # the worker's own cycle, then what the shared server link adds beyond it where it sets the
    # pace: both terms stay continuous where the pace changes hands, so a crossover's deciding
    # term is a cost that grew, not one renamed
    parts = {F.LINK: own_exposed, F.SERVER_LINK: step - compute - own_exposed}
    return StepCost(comm, step - compute, step, terms, parts)


@dataclass(frozen=True)
class SparseRows:
    """What `--sparse-exchange sparse` moves of a model with a row-sparse embedding."""

    touched: float  # unique rows one worker's batch touches per step (at most the table's)
    row_bytes: float  # one row's float32 values
    dense_bytes: float  # every other variable, exchanged dense

    def payload(self, index_bytes: int) -> float:
        """The touched rows with one index each."""
        return self.touched * (self.row_bytes + index_bytes)


def sparse_rows(config: StepConfig) -> SparseRows | None:
    """The sparse rows of the configuration; None when its embedding travels dense (dense
    exchange, no embedding, or no row count to price it with). ring gathers every row its batch
    looked up, duplicates included (Horovod's allgather of the IndexedSlices); p2p and ps send
    the unique rows, summed."""
    gathered = gathers_rows(config.arch)
    sent = config.rows_looked_up if gathered else config.touched_rows
    if config.sparse_exchange != "sparse" or not sent or not config.embedding_shape:
        return None
    rows, width = config.embedding_shape
    row_bytes = 4.0 * width
    return SparseRows(
        touched=float(sent) if gathered else min(float(sent), float(rows)),
        row_bytes=row_bytes,
        dense_bytes=max(float(config.param_bytes) - rows * row_bytes, 0.0),
    )


def ring_wire_bytes(config: StepConfig) -> float:
    """The message the ring's allreduce formula is priced with: the gradient bytes, halved by
    fp16; PowerSGD's factors and dense vectors (the gradient where the shapes are unknown);
    for top-k the allreduce moving the same bytes per worker as the allgather of k values and
    indices from each of W workers, (W-1) x 8k = 2(W-1)/W x (W x 8k / 2); for sparse rows the
    same for the allgather of the rows each worker's batch looked up with int64 indices, plus
    the dense variables."""

    message = float(config.param_bytes)
    rows = sparse_rows(config)
    if rows is not None:
        workers = len(config.placement.worker_hosts)
        return rows.dense_bytes + workers * rows.payload(INDEX_BYTES_PS) / 2
    spec = config.compression_spec
    if spec.sparse:
        workers = len(config.placement.worker_hosts)
        kept = spec.kept(0, int(message // VALUE_BYTES))
        return workers * kept * (VALUE_BYTES + INDEX_BYTES) / 2
    if spec.low_rank and config.variable_shapes:
        payload = powersgd_payload(list(config.variable_shapes), spec.rank)
        return float(sum(payload.values()) * VALUE_BYTES)
    return message * spec.wire_value_bytes / VALUE_BYTES  # fp16 halves the dense gradient


def sparse_push_bytes(config: StepConfig) -> float | None:
    """Top-k's gradient bytes one worker sends per step in p2p (k values and int32 indices,
    less the share that falls in its own shard) and ps (k values and int64 indices); for sparse
    rows the touched rows with their indices and the dense variables (p2p: less its own shard's
    share); None for a dense push."""

    rows = sparse_rows(config)
    if rows is not None:
        if has_servers(config.arch):
            return rows.dense_bytes + rows.payload(INDEX_BYTES_PS)
        workers = len(config.placement.worker_hosts)
        return (rows.dense_bytes + rows.payload(INDEX_BYTES_P2P)) * (workers - 1) / workers
    spec = config.compression_spec
    if not spec.sparse:
        return None
    kept = spec.kept(0, int(float(config.param_bytes) // VALUE_BYTES))
    if has_servers(config.arch):
        return float(kept * (VALUE_BYTES + PS_INDEX_BYTES))
    workers = len(config.placement.worker_hosts)
    return kept * (VALUE_BYTES + INDEX_BYTES) * (workers - 1) / workers


def sparse_return_bytes(config: StepConfig) -> float | None:
    """What a p2p owner sends each peer per step after a sparse gradient phase: the averaged
    gradient at the entries any worker selected, or its dense shard where that is fewer bytes;
    None for a dense exchange. The selections are taken as spread evenly over the shards and
    disjoint: k entries a shard (top-k), W r rows in all (rows). That bounds the mean over the
    owners (their unions hold at most W k entries together), not the busiest owner, which holds
    more where the largest gradients gather in one shard; the record's
    `returned_entries_per_step_per_rank` has the measured unions."""

    if not owns_shards(config.arch):
        return None
    workers = len(config.placement.worker_hosts)
    shard = float(config.param_bytes) / workers
    rows = sparse_rows(config)
    if rows is not None:
        union = min(workers * rows.touched, float(config.embedding_shape[0]))
        return min(
            shard, (rows.dense_bytes + union * (rows.row_bytes + 2 * INDEX_BYTES_P2P)) / workers
        )
    spec = config.compression_spec
    if not spec.sparse:
        return None
    elements = int(float(config.param_bytes) // VALUE_BYTES)
    union = min(float(spec.kept(0, elements)), elements / workers)
    return min(shard, union * (VALUE_BYTES + INDEX_BYTES))


def sparse_pull_bytes(config: StepConfig) -> float | None:
    """What a ps worker pulls per step with sparse rows: the rows its next batch reads and the
    dense variables; None when it pulls every parameter."""
    rows = sparse_rows(config)
    if rows is None or not has_servers(config.arch):
        return None
    return rows.dense_bytes + rows.touched * rows.row_bytes


def _placed_rows(
    config: StepConfig, shards: list[float]
) -> tuple[list[list[float]], list[list[float]]] | None:
    """Per worker and server, push and pull bytes where the run measured where each worker's
    rows went (its placement of rows, by use or otherwise): the measured row bytes split into
    the push (rows with int64 indices) and the pull (rows alone), beside the dense variables
    spread as the shards are. None where the measurement does not fit the configuration."""

    rows = sparse_rows(config)
    measured = config.row_bytes_per_worker_per_server
    workers = len(config.placement.worker_hosts)
    if rows is None or not measured or len(measured) != workers:
        return None
    if any(len(per_server) != len(shards) for per_server in measured):
        return None
    push_share = (rows.row_bytes + INDEX_BYTES_PS) / (2 * rows.row_bytes + INDEX_BYTES_PS)
    dense = [rows.dense_bytes * s / sum(shards) for s in shards]
    push = [[d + b * push_share for d, b in zip(dense, row)] for row in measured]
    pull = [[d + b * (1 - push_share) for d, b in zip(dense, row)] for row in measured]
    return push, pull
