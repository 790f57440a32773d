"""The analytical cost model: pure functions of sizes, counts, latencies and bandwidths.

Units everywhere: bytes, seconds, seconds per byte (beta = 1 / bandwidth in bytes/s).

Every term names its source; the README in this folder derives them in prose.

- alpha-beta (Hockney) model of one message of n bytes: alpha + n*beta.
  R. Hockney, "The communication challenge for MPP: Intel Paragon and Meiko CS-2",
  Parallel Computing 20(3), 1994.
- Ring allreduce = reduce-scatter + allgather, each W-1 steps of M/W bytes:
  2(W-1)*alpha + 2(W-1)/W*M*beta + (W-1)/W*M*gamma (gamma: per-byte reduction cost).
  R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication Operations in
  MPICH", IJHPCA 19(1), 2005, section 4; P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce
  algorithms for clusters of workstations", JPDC 69(2), 2009 (the bandwidth term is optimal).
- Bus bandwidth of an allreduce: busbw = algbw * 2(n-1)/n (NVIDIA nccl-tests, doc/PERFORMANCE.md),
  so that busbw is comparable with the link bandwidth whatever n is.
- Parameter server: every worker pushes its M-byte gradient and pulls M bytes of fresh
  parameters per step, so one server's link carries W*M in and W*M out; with K servers the
  server holding the largest shard is the bottleneck (M. Li et al., "Scaling Distributed Machine
  Learning with the Parameter Server", OSDI 2014; the 2*W*M link load is the analysis of
  A. Sergeev, M. Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
  arXiv:1802.05799, 2018, section 2). A worker placed on the server's host talks over loopback
  and adds nothing to the server's link.
- Asynchronous training is bounded by its busiest resource: throughput <= 1 / D_max where D_max is
  the service demand per step at the bottleneck (utilisation law; E. Lazowska et al.,
  "Quantitative System Performance", Prentice-Hall 1984, ch. 5).
- Overlap of communication with the backward pass (wait-free backpropagation): only the part of
  communication not hidden behind compute adds to the step (H. Zhang et al., "Poseidon", USENIX
  ATC 2017; Sergeev & Del Balso 2018 on tensor fusion).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

WORKER = "worker"
PS = "ps"

# Names of the terms a step is made of (what `archbench predict` and the what-if report say
# dominates): compute, the per-message latency terms, the link's bandwidth term (for a PS: the
# link of a server holding an even share), the extra time of the busiest shard over an even
# share, the servers' per-request cost, and per-byte host work (reduction, applying updates).
COMPUTE = "compute"
LATENCY = "latency terms"
LINK = "link bandwidth"
SERVER_LINK = "server link"
IMBALANCE = "busiest shard"
REQUESTS = "per-request cost"
HOST = "host per-byte work"
SERVER_UPDATE = "server update"
UPDATE = "worker update"  # the optimizer's step on the worker (ring: all, p2p: its shard)
OVERHEAD = "per-step overhead"  # fitted: what the architecture's step costs beyond the terms


@dataclass(frozen=True)
class LinkCost:
    """Latency and inverse bandwidth of one path (a link between hosts, or loopback)."""

    alpha_s: float
    beta_s_per_byte: float

    def message_s(self, nbytes: float) -> float:
        """Hockney: one message of nbytes costs alpha + n * beta."""
        return self.alpha_s + nbytes * self.beta_s_per_byte


@dataclass(frozen=True)
class Network:
    """Costs between hosts (the shaped link) and within a host (loopback / shared memory)."""

    inter: LinkCost
    intra: LinkCost
    # bytes a link direction lets through at once after being idle (the tc tbf bucket of the
    # emulated cluster; 0 on real links)
    burst_bytes: float = 0.0

    def beta_between(self, host_a: str, host_b: str) -> float:
        return self.intra.beta_s_per_byte if host_a == host_b else self.inter.beta_s_per_byte


def beta_from_bandwidth(bits_per_s: float) -> float:
    """Seconds per byte of a link of the given bit rate."""
    if bits_per_s <= 0:
        raise ValueError(f"bandwidth must be positive, got {bits_per_s}")
    return 8.0 / bits_per_s


# ---------------------------------------------------------------------------------------------
# Closed forms (one rank per host): the textbook expressions, also used to check the
# placement-aware versions below.


def ring_allreduce_s(
    message_bytes: float,
    workers: int,
    alpha_s: float,
    beta_s_per_byte: float,
    gamma_s_per_byte: float = 0.0,
    buffers: int = 1,
) -> float:
    """Ring allreduce time, Thakur et al. 2005: 2(W-1)a*buffers + 2(W-1)/W*M*b + (W-1)/W*M*g.

    `buffers` is the number of separate allreduce calls (Horovod tensor fusion packs the
    gradients into ceil(M / fusion threshold) buffers); each pays the latency term.
    """
    if workers <= 1:
        return 0.0
    w = workers
    return (
        2 * (w - 1) * alpha_s * buffers
        + 2 * (w - 1) / w * message_bytes * beta_s_per_byte
        + (w - 1) / w * message_bytes * gamma_s_per_byte
    )


def p2p_exchange_s(
    message_bytes: float,
    workers: int,
    alpha_s: float,
    beta_s_per_byte: float,
    contention: float = 1.0,
    gamma_s_per_byte: float = 0.0,
) -> float:
    """Sharded exchange: gradient shards to their owners, fresh shards back to every peer.

    Each node sends and receives 2(W-1)/W*M bytes in 2(W-1) messages; the owner sums W-1
    incoming shards of M/W bytes. `contention` >= 1 stretches the bandwidth term when several
    senders hit one receiver at once (incast under a naive schedule).
    """
    if workers <= 1:
        return 0.0
    w = workers
    return (
        2 * (w - 1) * alpha_s
        + contention * 2 * (w - 1) / w * message_bytes * beta_s_per_byte
        + (w - 1) / w * message_bytes * gamma_s_per_byte
    )


def ps_single_server_s(
    message_bytes: float,
    remote_workers: int,
    alpha_s: float,
    beta_s_per_byte: float,
    gamma_s_per_byte: float = 0.0,
    workers: int | None = None,
) -> float:
    """One synchronous PS: push W*M into the server, then pull W*M out: 2*W*M*beta.

    Only `remote_workers` (those not on the server's host) load its link; the server applies
    all `workers` gradients (gamma per byte). One push and one pull round trip: 2*alpha.
    """
    applied = remote_workers if workers is None else workers
    return (
        2 * alpha_s
        + 2 * remote_workers * message_bytes * beta_s_per_byte
        + applied * message_bytes * gamma_s_per_byte
    )


def allreduce_bus_bandwidth(algbw_bytes_per_s: float, ranks: int) -> float:
    """nccl-tests bus bandwidth: algbw * 2(n-1)/n (the per-link load of a ring allreduce)."""
    if ranks <= 1:
        return algbw_bytes_per_s
    return algbw_bytes_per_s * 2 * (ranks - 1) / ranks


def exposed_comm_s(comm_s: float, compute_s: float, overlap: float) -> float:
    """Communication left on the critical path when a fraction `overlap` of it can hide
    behind compute (never more than the compute itself)."""
    overlap = min(max(overlap, 0.0), 1.0)
    return comm_s - overlap * min(comm_s, compute_s)


def async_step_s(compute_s: float, own_comm_s: float, bottleneck_s: float) -> float:
    """Asynchronous worker: its own compute + round trip, unless the shared bottleneck (the
    busiest server link carrying every worker's traffic for one step each) is slower."""
    return max(compute_s + own_comm_s, bottleneck_s)


def fusion_buffers(message_bytes: float, fusion_threshold_bytes: float | None) -> int:
    """Number of fused allreduce buffers Horovod issues for M bytes of gradients."""
    if not fusion_threshold_bytes or fusion_threshold_bytes <= 0:
        return 1
    return max(1, math.ceil(message_bytes / fusion_threshold_bytes))


# ---------------------------------------------------------------------------------------------
# Placement-aware traffic: which host runs which rank decides which link carries the bytes.
# With one rank per host these reduce to the closed forms above (checked in the tests).


@dataclass(frozen=True)
class Placement:
    """Host and role of every rank."""

    hosts: tuple[str, ...]
    roles: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.hosts) != len(self.roles):
            raise ValueError("hosts and roles must have one entry per rank")

    @property
    def worker_hosts(self) -> list[str]:
        return [h for h, r in zip(self.hosts, self.roles, strict=True) if r != PS]

    @property
    def ps_hosts(self) -> list[str]:
        return [h for h, r in zip(self.hosts, self.roles, strict=True) if r == PS]

    @property
    def num_workers(self) -> int:
        return len(self.worker_hosts)

    def ranks_per_host(self, role: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for host, rank_role in zip(self.hosts, self.roles, strict=True):
            if role is None or (rank_role == PS) == (role == PS):
                counts[host] += 1
        return dict(counts)


def phase_s(
    flows: Sequence[tuple[str, str, float]],
    network: Network,
    repeats: int = 1,
    burst: bool = True,
) -> float:
    """Time of one communication phase in which all `flows` (src host, dst host, bytes) run
    at once: every host link is full duplex, so the phase lasts as long as the busiest
    direction of the busiest link; flows within a host go over loopback concurrently.

    `repeats` back-to-back copies of the phase share one token-bucket burst: a shaped link
    direction idle since the last step lets `network.burst_bytes` through unthrottled. A phase
    right behind another on the same link directions finds the bucket drained (`burst` False).
    """
    egress: dict[str, float] = defaultdict(float)
    ingress: dict[str, float] = defaultdict(float)
    loopback: dict[str, float] = defaultdict(float)
    for src, dst, nbytes in flows:
        if src == dst:
            loopback[src] += nbytes
        else:
            egress[src] += nbytes
            ingress[dst] += nbytes
    busiest = max([*egress.values(), *ingress.values(), 0.0]) * repeats
    inter = max(busiest - (network.burst_bytes if burst else 0.0), 0.0)
    inter *= network.inter.beta_s_per_byte
    intra = max([*loopback.values(), 0.0]) * repeats * network.intra.beta_s_per_byte
    return max(inter, intra)


def _crosses_hosts(hosts: Sequence[str]) -> bool:
    return len(set(hosts)) > 1


def ring_allreduce_placed_s(
    message_bytes: float,
    worker_hosts: Sequence[str],
    network: Network,
    gamma_s_per_byte: float = 0.0,
    buffers: int = 1,
) -> float:
    """Ring allreduce over workers in rank order: 2(W-1) lock-step transfers of M/W bytes on
    every ring edge, each lasting as long as the most loaded link (a host with several
    ring edges leaving it shares its link between them)."""
    parts = ring_allreduce_placed_parts(
        message_bytes, worker_hosts, network, gamma_s_per_byte, buffers
    )
    return sum(parts.values())


def ring_allreduce_placed_parts(
    message_bytes: float,
    worker_hosts: Sequence[str],
    network: Network,
    gamma_s_per_byte: float = 0.0,
    buffers: int = 1,
) -> dict[str, float]:
    """The ring's time split into its terms: LATENCY (2(W-1) alpha per fused buffer), LINK
    (the transfers over the busiest link) and HOST (the reduction, gamma per byte)."""
    w = len(worker_hosts)
    if w <= 1:
        return {LATENCY: 0.0, LINK: 0.0, HOST: 0.0}
    chunk = message_bytes / w
    ring_edges = [(worker_hosts[i], worker_hosts[(i + 1) % w], chunk) for i in range(w)]
    transfers_s = phase_s(ring_edges, network, repeats=2 * (w - 1))
    alpha = network.inter.alpha_s if _crosses_hosts(worker_hosts) else network.intra.alpha_s
    return {
        LATENCY: 2 * (w - 1) * alpha * buffers,
        LINK: transfers_s,
        HOST: (w - 1) / w * message_bytes * gamma_s_per_byte,
    }


def p2p_exchange_placed_s(
    message_bytes: float,
    worker_hosts: Sequence[str],
    network: Network,
    contention: float = 1.0,
    gamma_s_per_byte: float = 0.0,
    gradient_bytes: float | None = None,
    return_bytes: float | None = None,
) -> float:
    """Sharded exchange with placement: phase 1 every worker sends M/W to each owner, phase 2
    every owner sends its M/W shard to each peer; each phase is bounded by the busiest link.
    `gradient_bytes`: what phase 1 sends in all per worker when it is not the shards (top-k),
    spread evenly over the other owners; `return_bytes`: what phase 2 sends each peer when it is
    not the shard (the averaged gradient at the selected entries)."""
    parts = p2p_exchange_placed_parts(
        message_bytes, worker_hosts, network, contention, gamma_s_per_byte, gradient_bytes,
        return_bytes,
    )  # fmt: skip
    return sum(parts.values())


def p2p_exchange_placed_parts(
    message_bytes: float,
    worker_hosts: Sequence[str],
    network: Network,
    contention: float = 1.0,
    gamma_s_per_byte: float = 0.0,
    gradient_bytes: float | None = None,
    return_bytes: float | None = None,
) -> dict[str, float]:
    """The sharded exchange's time split into LATENCY, LINK and HOST (as the ring's)."""
    w = len(worker_hosts)
    if w <= 1:
        return {LATENCY: 0.0, LINK: 0.0, HOST: 0.0}

    def flows(each: float) -> list[tuple[str, str, float]]:
        return [
            (worker_hosts[i], worker_hosts[j], each) for i in range(w) for j in range(w) if i != j
        ]

    gradient_each = message_bytes / w if gradient_bytes is None else gradient_bytes / (w - 1)
    returned_each = message_bytes / w if return_bytes is None else return_bytes
    # the return phase follows the gradient phase on the same link directions: one burst
    both_phases = phase_s(flows(gradient_each), network) + phase_s(
        flows(returned_each), network, burst=False
    )
    alpha = network.inter.alpha_s if _crosses_hosts(worker_hosts) else network.intra.alpha_s
    return {
        LATENCY: 2 * (w - 1) * alpha,
        LINK: contention * both_phases,
        HOST: (w - 1) / w * message_bytes * gamma_s_per_byte,
    }


@dataclass(frozen=True)
class PsComm:
    """Communication of one PS training step."""

    sync_comm_s: float  # every worker pushes then pulls, all at once (the synchronous step)
    own_comm_s: float  # one worker alone: its push and pull, nobody else on the links
    bottleneck_s: float  # busiest link (or server) carrying one step of every worker
    # sync_comm_s split into its terms (they add up to it): LATENCY, SERVER_LINK (the links'
    # time had every server held an even share), IMBALANCE (what the plan's busiest server
    # adds to that), SERVER_UPDATE (absorbing the gradients, updating the shard) and REQUESTS
    parts: dict[str, float] = field(default_factory=dict)
    busiest_server: int = 0  # the server whose own work (updates, requests) is the largest
    # a worker's own chain of tensor requests, and the busiest server's answering of everyone's
    # (REQUESTS is the larger of the first and what the second leaves beyond the link time)
    own_requests_s: float = 0.0
    server_requests_s: float = 0.0


def _per_worker(
    given: Sequence[float] | Sequence[Sequence[float]] | None,
    shards: Sequence[float],
    workers: int,
) -> list[list[float]]:
    """Bytes per server for each worker: one list for all, one per worker, or the shards."""
    if given is None:
        return [list(shards)] * workers
    if given and isinstance(given[0], list | tuple):
        if len(given) != workers:
            raise ValueError("one list of bytes per server is needed for every worker")
        return [list(row) for row in given]  # type: ignore[arg-type]
    return [list(given)] * workers  # type: ignore[arg-type]


def _worker_flows(
    sent: Sequence[Sequence[float]], placement: Placement, to_server: bool
) -> list[list[tuple[str, str, float]]]:
    """Each worker's flows to (push) or from (pull) every server, in worker order."""
    return [
        [
            (w, p, s) if to_server else (p, w, s)
            for p, s in zip(placement.ps_hosts, row, strict=True)
        ]
        for w, row in zip(placement.worker_hosts, sent, strict=True)
    ]


def _own_phases(
    pushes: Sequence[Sequence[tuple[str, str, float]]],
    pulls: Sequence[Sequence[tuple[str, str, float]]],
    network: Network,
) -> list[tuple[float, float]]:
    """Each worker's push and pull time with nobody else on the links, in worker order."""
    return [
        (phase_s(mine, network), phase_s(back, network))
        for mine, back in zip(pushes, pulls, strict=True)
    ]


def _exchange_s(
    pushes: Sequence[Sequence[tuple[str, str, float]]],
    pulls: Sequence[Sequence[tuple[str, str, float]]],
    network: Network,
    pull_stagger: float,
    own_phases: Sequence[tuple[float, float]] | None = None,
) -> float:
    """A synchronous PS exchange's link time, from each worker's push and pull flows: the push
    phase and the pull phase in turn, or, with the pulls served one worker after another, the
    pull phase and then one worker's push (ps_placed's `pull_stagger` weighs the two). Each
    worker's times alone (`_own_phases`) are worked out here unless given."""
    push_s = phase_s([f for mine in pushes for f in mine], network)
    pull_s = phase_s([f for mine in pulls for f in mine], network)
    in_turn = push_s + pull_s
    if pull_stagger <= 0.0:
        return in_turn
    if own_phases is None:
        own_phases = _own_phases(pushes, pulls, network)
    own_push_s = max(push for push, _pull in own_phases)
    own_pull_s = max(pull for _push, pull in own_phases)
    one_after_another = min(max(pull_s + own_push_s, own_pull_s + push_s), in_turn)
    return (1.0 - pull_stagger) * in_turn + pull_stagger * one_after_another


def ps_placed(
    message_bytes_per_ps: Sequence[float],
    placement: Placement,
    network: Network,
    gamma_s_per_byte: float = 0.0,
    per_request_s: float = 0.0,
    variables_per_ps: Sequence[int] | None = None,
    push_bytes_per_ps: Sequence[float] | None = None,
    pull_bytes_per_ps: Sequence[float] | None = None,
    update_s_per_byte: float = 0.0,
    pull_stagger: float = 0.0,
) -> PsComm:
    """Push phase: worker w sends shard k to PS k; pull phase: PS k sends shard k back.

    PS tasks are matched to the PS ranks in rank order; the plan gives the bytes on each.
    gamma charges the server for absorbing each worker's gradient (W * S_k bytes on PS k) and
    `update_s_per_byte` for updating its shard once (S_k bytes): the busiest server's work is
    S_k * (W * gamma + update) (SERVER_UPDATE).
    per_request_s is the time per tensor request (TensorFlow moves each variable, or each
    shard of one, in its own RecvTensor call): each worker issues 2 * sum_k n_k, one after
    another in the worst case, on its own path; PS k answers 2 * W * n_k per step on its CPU
    while its link moves other workers' bytes, so what of that exceeds the exchange's link
    time is exposed too: the larger of the two adds to the step (REQUESTS).
    `pull_stagger` (0..1, a fitted term): how far the pulls are served one worker after another
    rather than all at once. With every pull sharing the server's link to the end, each worker
    computes and pushes only after the whole pull phase (push + pull phases in turn); served
    one after another, a worker whose pull ended computes and pushes while the server still
    sends the others theirs, and the exchange ends one worker's push after the pull phase
    (or one worker's pull before the end of the push phase, if pushes are the longer); the
    exchange is priced between the two in that proportion. `push_bytes_per_ps`: what a worker
    pushes to each PS when it is not the shard (top-k's sparse pushes, sparse rows);
    `pull_bytes_per_ps`: what a worker pulls from each when it is not the shard (sparse rows:
    the rows its next batch reads); pulls are the shards otherwise. Either may also be one list
    per worker (in worker order), where workers push and pull different bytes to each server
    (rows placed by use).
    """
    ps_hosts = placement.ps_hosts
    worker_hosts = placement.worker_hosts
    if len(ps_hosts) != len(message_bytes_per_ps):
        raise ValueError("one shard size per PS rank is needed")
    if not worker_hosts:
        raise ValueError("a PS placement needs at least one worker")
    counts = list(variables_per_ps) if variables_per_ps else [1] * len(ps_hosts)
    workers = len(worker_hosts)
    pushes = _worker_flows(_per_worker(push_bytes_per_ps, message_bytes_per_ps, workers),
                           placement, to_server=True)  # fmt: skip
    pulls = _worker_flows(_per_worker(pull_bytes_per_ps, message_bytes_per_ps, workers),
                          placement, to_server=False)  # fmt: skip
    remote_alpha = (
        network.inter.alpha_s
        if any(w != p for w in worker_hosts for p in ps_hosts)
        else network.intra.alpha_s
    )
    # the busiest server by its own work: absorbing W gradients and updating its shard, and
    # answering W * n_k requests each way
    work = [
        size * (workers * gamma_s_per_byte + update_s_per_byte) + 2 * workers * n * per_request_s
        for size, n in zip(message_bytes_per_ps, counts, strict=True)
    ]
    busiest = max(range(len(work)), key=lambda k: (work[k], message_bytes_per_ps[k], -k))
    apply_s = message_bytes_per_ps[busiest] * (workers * gamma_s_per_byte + update_s_per_byte)
    own_phases = _own_phases(pushes, pulls, network)
    links_s = _exchange_s(pushes, pulls, network, pull_stagger, own_phases)
    # a worker's own requests, sum_k n_k each way, are on its path; the busiest server's
    # W * n_k each way run on its CPU while its link is busy, and only what outlasts that adds
    own_requests_s = 2 * sum(counts) * per_request_s
    server_requests_s = 2 * workers * counts[busiest] * per_request_s
    serve_s = max(own_requests_s, server_requests_s - links_s)
    sync_comm = 2 * remote_alpha + links_s + apply_s + serve_s
    even = [sum(message_bytes_per_ps) / len(ps_hosts)] * len(ps_hosts)
    even_push = _worker_flows([even] * workers, placement, to_server=True)
    even_pull = _worker_flows([even] * workers, placement, to_server=False)
    even_links_s = min(_exchange_s(even_push, even_pull, network, pull_stagger), links_s)
    parts = {
        LATENCY: 2 * remote_alpha,
        SERVER_LINK: even_links_s,
        IMBALANCE: links_s - even_links_s,
        SERVER_UPDATE: apply_s,
        REQUESTS: serve_s,
    }
    # One worker alone: the slowest worker's own traffic with nobody else on the links.
    own = max(push + pull for push, pull in own_phases)
    own += 2 * remote_alpha + max(message_bytes_per_ps) * (gamma_s_per_byte + update_s_per_byte)
    own += own_requests_s
    # Demand of one step of every worker on the busiest resource, latency aside. Without a
    # barrier one worker's push overlaps another's pull, and links are full duplex, so the
    # pushes and pulls of a round share one phase (the server's ingress and egress at once).
    # The server answers different workers' requests on concurrent threads, so only applying
    # the gradients (gamma) occupies it; per-request overhead stays on each worker's own cycle.
    everything = [f for flows in (*pushes, *pulls) for f in flows]
    bottleneck = max(phase_s(everything, network), apply_s)
    return PsComm(
        sync_comm_s=sync_comm, own_comm_s=own, bottleneck_s=bottleneck, parts=parts,
        busiest_server=busiest, own_requests_s=own_requests_s,
        server_requests_s=server_requests_s,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# GPU servers: G devices per host, each on a link of its own inside the host (NVLink, or its
# PCIe lanes), the host's NIC between hosts. What a collective library does there, not what
# one process per host does.

RING = "ring"
HIERARCHICAL = "hierarchical"
ALLREDUCE_ALGORITHMS = (RING, HIERARCHICAL)


def hosts_of(workers: int, devices_per_host: int) -> int:
    """Hosts holding `workers` ranks, `devices_per_host` to a host (the last may hold fewer)."""
    return max(1, math.ceil(workers / max(devices_per_host, 1)))


def allreduce_on_hosts_parts(
    message_bytes: float,
    workers: int,
    devices_per_host: int,
    inter: LinkCost,
    intra: LinkCost,
    algorithm: str = RING,
    gamma_s_per_byte: float = 0.0,
    call_s: float = 0.0,
) -> dict[str, float]:
    """One allreduce of M bytes over W ranks on H = W/G hosts, split into LATENCY, LINK, HOST.

    ring: one ring through every device, the ranks of a host next to each other (NCCL builds
    its rings so: N. Jeaugey, "NCCL 2.0", GTC 2017). Of its 2(W-1) steps, 2(H-1) cross a NIC;
    pipelined in chunks, a byte's path pays each hop's latency once (NCCL's own cost model,
    src/graph/tuning.cc: (nsteps - nInterSteps) x intra + nInterSteps x inter), and every
    edge carries 2(W-1)/W M, so the slower of the two kinds of link sets the rate; each NIC
    carries one ring edge each way.
    hierarchical: reduce-scatter among the G devices of a host, G rings of M/G between the
    hosts (all G sharing the host's NIC: 2(H-1)/H M on it each way), allgather inside the host:
    2(G-1) alpha_intra + 2(H-1) alpha_inter + 2(G-1)/G M beta_intra + 2(H-1)/H M beta_inter.
    With G = 1 both are the flat ring (ring_allreduce_s); `call_s` is a fixed cost per call.
    """
    w = workers
    if w <= 1:
        return {LATENCY: 0.0, LINK: 0.0, HOST: 0.0}
    g = max(1, min(devices_per_host, w))
    h = hosts_of(w, g)
    if algorithm == HIERARCHICAL:
        latency = 2 * (g - 1) * intra.alpha_s + 2 * (h - 1) * inter.alpha_s
        link = (
            2 * (g - 1) / g * message_bytes * intra.beta_s_per_byte
            + 2 * (h - 1) / h * message_bytes * inter.beta_s_per_byte
        )
    elif algorithm == RING:
        inter_steps = 2 * (h - 1)
        latency = inter_steps * inter.alpha_s + (2 * (w - 1) - inter_steps) * intra.alpha_s
        slowest = max(
            inter.beta_s_per_byte if h > 1 else 0.0, intra.beta_s_per_byte if g > 1 else 0.0
        )
        link = 2 * (w - 1) / w * message_bytes * slowest
    else:
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}")
    return {
        LATENCY: call_s + latency,
        LINK: link,
        HOST: (w - 1) / w * message_bytes * gamma_s_per_byte,
    }


def inter_host_bytes_per_host(
    message_bytes: float, workers: int, devices_per_host: int, algorithm: str = RING
) -> float:
    """Bytes one host's NIC sends (and receives) per allreduce of M bytes: a ring edge each
    way for the ring, 2(H-1)/H M for the hierarchical's G rings of M/G."""
    h = hosts_of(workers, devices_per_host)
    if h <= 1:
        return 0.0
    if algorithm == HIERARCHICAL:
        return 2 * (h - 1) / h * message_bytes
    return 2 * (workers - 1) / workers * message_bytes


def local_aggregation_s(message_bytes: float, devices_per_host: int, intra: LinkCost) -> float:
    """Summing the gradients of a host's G devices and handing the result back to each (a
    reduce-scatter and an allgather among them): 2(G-1) alpha + 2(G-1)/G M beta, intra-host."""
    g = max(devices_per_host, 1)
    if g <= 1:
        return 0.0
    return 2 * (g - 1) * intra.alpha_s + 2 * (g - 1) / g * message_bytes * intra.beta_s_per_byte


def buffer_chain_s(latency_s: float, transfers_s: Sequence[float], pipelined: bool) -> float:
    """Fused buffers reduced one after another, each a latency then a transfer. In turn: the
    sum of both for every buffer. Pipelined: a buffer's latency runs while the previous one's
    bytes move (a two-stage pipeline: L + sum over all but the last of max(B_j, L) + B_last)."""
    if not transfers_s:
        return 0.0
    if not pipelined:
        return len(transfers_s) * latency_s + sum(transfers_s)
    *head, last = transfers_s
    return latency_s + sum(max(b, latency_s) for b in head) + last


def fused_buffer_bytes(message_bytes: float, threshold_bytes: float) -> list[float]:
    """The buffers tensor fusion packs M bytes into: full ones, then the rest."""
    count = fusion_buffers(message_bytes, threshold_bytes)
    if count <= 1:
        return [message_bytes]
    full = [float(threshold_bytes)] * (count - 1)
    return [*full, message_bytes - sum(full)]


def gradient_ready_s(
    variable_flops: Sequence[float], compute_s: float, backward_share: float
) -> list[float]:
    """When each variable's gradient is ready, from the start of the step: the forward pass
    takes (1 - b) of the compute, the backward pass b, and runs through the variables in the
    reverse of their creation order, each taking its share of the backward time in proportion
    to its layer's multiply-adds (`variable_flops`, in creation order)."""
    total = float(sum(variable_flops))
    forward = (1.0 - backward_share) * compute_s
    backward = backward_share * compute_s
    ready = [0.0] * len(variable_flops)
    done = 0.0
    for i in range(len(variable_flops) - 1, -1, -1):
        done += variable_flops[i]
        ready[i] = forward + backward * (done / total if total > 0 else 1.0)
    return ready


@dataclass(frozen=True)
class Schedule:
    """The allreduces of one step under a layer-order schedule."""

    end_s: float  # when the last allreduce ends, from the start of the step
    calls: int
    busy_s: float  # the time the allreduces themselves take (latency and transfer)


def backward_schedule(
    ready_s: Sequence[float],
    sizes: Sequence[float],
    threshold_bytes: float,
    latency_s: float,
    seconds_per_byte: float,
    pipelined: bool = False,
) -> Schedule:
    """Horovod's background loop over one step: whenever the previous allreduce is done, every
    gradient ready by then is fused (up to the fusion threshold, at least one) into the next
    allreduce (A. Sergeev, M. Del Balso, arXiv:1802.05799, section 4: tensor fusion). Each call
    costs `latency_s` then its bytes x `seconds_per_byte`; pipelined, a call's latency may run
    while the previous call's bytes move (it starts when its gradients are ready and the
    previous call's latency is over)."""
    order = sorted(range(len(sizes)), key=lambda i: (ready_s[i], i))
    latency_free = 0.0  # when the previous call's latency stage is over
    transfer_free = 0.0  # when the previous call's bytes are through
    calls = 0
    busy = 0.0
    i = 0
    while i < len(order):
        start = max(transfer_free if not pipelined else latency_free, ready_s[order[i]])
        fused = 0.0
        while i < len(order) and (fused == 0.0 or (
            ready_s[order[i]] <= start and fused + sizes[order[i]] <= threshold_bytes
        )):  # fmt: skip
            fused += sizes[order[i]]
            i += 1
        transfer = fused * seconds_per_byte
        latency_free = start + latency_s
        transfer_free = max(latency_free, transfer_free) + transfer
        busy += latency_s + transfer
        calls += 1
    return Schedule(end_s=transfer_free, calls=calls, busy_s=busy)
