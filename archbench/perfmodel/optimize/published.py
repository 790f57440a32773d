"""`archbench model published`: the model against the scaling two public studies measured.

Each cluster is described by hardware facts and one device's published compute rate, never by
the efficiencies it is compared with; each fact names its source. The model is then run with
its terms added one at a time (the ablation), the last row of each system being what that system
did; the rows after it are what-ifs.

Sources:

[H1] Horovod, docs/benchmarks.md (2017): "32 servers with 4 Pascal GPUs each connected by
     RoCE-capable 25 Gbit/s network. Horovod achieves 90% scaling efficiency for both Inception
     V3 and ResNet-101, and 79% scaling efficiency for VGG-16"; tf_cnn_benchmarks,
     `--batch_size 64 --variable_update horovod`, synthetic data.
[H2] Horovod, docs/benchmarks.rst and README (2018): "128 servers with 4 Pascal GPUs each
     connected by a RoCE-capable 25 Gbit/s network. Horovod achieves 90% scaling efficiency for
     both Inception V3 and ResNet-101, and 68% scaling efficiency for VGG-16"; the same
     benchmark. (A. Sergeev, M. Del Balso, arXiv:1802.05799, draw the counts in between and the
     TCP runs only as charts: they are not used.)
[T1] TensorFlow, tensorflow/docs_src/performance/benchmarks.md (May 2017), "Details for NVIDIA
     DGX-1 (NVIDIA Tesla P100)", training synthetic data, batch 64 per GPU, 1 GPU: InceptionV3
     142, ResNet-50 219, ResNet-152 91.8, VGG16 154 images/s.
[T2] The same page, "Details for Amazon EC2 Distributed (NVIDIA Tesla K80)": p2.8xlarge
     instances (8 K80 GPUs), variable_update distributed_replicated, parameter servers on the
     worker instances ("Equal numbers of parameter servers and worker servers", InceptionV3 at 8
     instances 6 parameter servers, ResNet-152 at 8 instances 4), batch 64 (InceptionV3,
     ResNet-50) and 32 (ResNet-152); training synthetic data, images/s at 1, 8, 16, 32 and 64
     GPUs: InceptionV3 29.7, 229, 459, 902, 1783; ResNet-50 52.4, 378, 751, 1388, 2744;
     ResNet-152 19.4, 146, 291, 565, 981. The efficiency is the rate at W over W x the 1-GPU
     rate.
[T3] tensorflow/benchmarks, scripts/tf_cnn_benchmarks/variable_mgr.py,
     VariableMgrDistributedReplicated.append_apply_gradients_ops: for each variable on its own,
     the summed gradient applied on its server, a barrier of sync queues across the workers, then
     the updated value read and assigned to every GPU's copy: no step-wide phase between them.
[A1] Amazon EC2 instance table: p2.8xlarge, 8 GPUs, "10 Gbps" network.
[N1] NCCL's cost model (NVIDIA/nccl, src/graph/tuning.cc): a ring allreduce of the Simple
     protocol costs a base 8.4 us, 9.6 us per step through the network and 5.7 us per step over
     PCIe ((nsteps - nInterSteps) x intra + nInterSteps x inter). That file also multiplies
     the latency of a large multi-node ring allreduce by 1.9 ("plateau effect"), a measured
     correction of another generation of hardware; it is not applied here.
[P1] PCI Express 3.0: 8 GT/s per lane, 128b/130b coding: 15.75 GB/s (126 Gbit/s) each way
     for x16. A Tesla K80 board holds two GPUs behind one x16 connector: 63 Gbit/s each.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.modelinfo import ps_plan, variable_bytes, variable_flops
from archbench.perfmodel.model.predictor import ModelParams, StepConfig, predict_step

HOROVOD = "horovod"
PARAMETER_SERVER = "ps"
PCIE3_X16_GBIT = 126.0  # [P1]
IMAGENET_CLASSES = 1000


@dataclass(frozen=True)
class Workload:
    """One model as a study ran it: one device's published rate and the efficiencies."""

    model: str
    shape: tuple[int, int, int]
    batch: int  # per device
    images_per_s: float  # one device alone
    rate_source: str
    published: dict[int, float]  # devices -> scaling efficiency
    published_source: str
    num_ps: dict[int, int] = field(default_factory=dict)  # PS study: servers at W, if not H


@dataclass(frozen=True)
class Cluster:
    name: str
    system: str  # HOROVOD (ring allreduce) or PARAMETER_SERVER
    devices_per_host: int
    nic_gbit: float
    intra_gbit: float  # each device's link inside a host
    inter_alpha_s: float  # a hop between hosts (NCCL's model; the PS keeps the calibration's)
    intra_alpha_s: float
    call_s: float  # fixed cost of one allreduce call
    facts: str
    workloads: tuple[Workload, ...]
    fusion_mb: float = 64.0  # Horovod's default tensor fusion threshold


# ResNet-101 is not in [T1]: its time per image is taken halfway between ResNet-50's and
# ResNet-152's (101 layers lie halfway between 50 and 152, and so do their multiply-adds,
# 3.9, 7.6 and 11.3 G): (1/219 + 1/91.8) / 2 = 7.73 ms, 129 images/s.
RESNET101_P100 = 2.0 / (1 / 219 + 1 / 91.8)

HOROVOD_CLUSTER = Cluster(
    name="Horovod, 4 Pascal GPUs per server, 25 Gbit/s RoCE",
    system=HOROVOD,
    devices_per_host=4,  # [H1], [H2]
    nic_gbit=25.0,  # [H1], [H2]
    intra_gbit=PCIE3_X16_GBIT,  # [P1]: the servers' GPU links are not stated; PCIe taken
    inter_alpha_s=9.6e-6,  # [N1]
    intra_alpha_s=5.7e-6,  # [N1]
    call_s=8.4e-6,  # [N1]
    facts="[H1] [H2] 4 GPUs/server, 25 Gbit/s; [N1] 9.6/5.7/8.4 us; [P1] PCIe 3.0 x16; "
    "compute [T1] (P100, batch 64)",
    workloads=(
        Workload(
            "inceptionv3",
            (299, 299, 3),
            64,
            142.0,
            "[T1] P100 142 img/s",
            {128: 0.90, 512: 0.90},
            "[H1] [H2]",
        ),
        Workload(
            "resnet101",
            (224, 224, 3),
            64,
            RESNET101_P100,
            "[T1] halfway between ResNet-50 and -152 per image",
            {128: 0.90, 512: 0.90},
            "[H1] [H2]",
        ),
        Workload(
            "vgg16",
            (224, 224, 3),
            64,
            154.0,
            "[T1] P100 154 img/s",
            {128: 0.79, 512: 0.68},
            "[H1] [H2]",
        ),
    ),  # fmt: skip
)


def _efficiencies(one: float, rates: dict[int, float]) -> dict[int, float]:
    return {w: rate / (w * one) for w, rate in rates.items()}


PS_CLUSTER = Cluster(
    name="TensorFlow PS, p2.8xlarge (8 K80), 10 Gbit/s",
    system=PARAMETER_SERVER,
    devices_per_host=8,  # [T2], [A1]
    nic_gbit=10.0,  # [A1]
    intra_gbit=PCIE3_X16_GBIT / 2,  # [P1]: two K80 GPUs share a board's x16
    inter_alpha_s=0.0,  # the calibration's (gRPC over TCP: its 60 us default)
    intra_alpha_s=0.0,
    call_s=0.0,
    facts="[T2] distributed_replicated, servers on the worker instances; [T3] its graph per "
    "variable; [A1] 10 Gbit/s; "
    "[P1] a K80 GPU's half of an x16; server costs: the calibration's defaults",
    workloads=(
        Workload(
            "inceptionv3",
            (299, 299, 3),
            64,
            29.7,
            "[T2] K80 29.7 img/s",
            _efficiencies(29.7, {8: 229, 16: 459, 32: 902, 64: 1783}),
            "[T2]",
            num_ps={64: 6},
        ),
        Workload(
            "resnet50",
            (224, 224, 3),
            64,
            52.4,
            "[T2] K80 52.4 img/s",
            _efficiencies(52.4, {8: 378, 16: 751, 32: 1388, 64: 2744}),
            "[T2]",
        ),
        Workload(
            "resnet152",
            (224, 224, 3),
            32,
            19.4,
            "[T2] K80 19.4 img/s",
            _efficiencies(19.4, {8: 146, 16: 291, 32: 565, 64: 981}),
            "[T2]",
            num_ps={64: 4},
        ),
    ),  # fmt: skip
)

CLUSTERS = (HOROVOD_CLUSTER, PS_CLUSTER)


@dataclass(frozen=True)
class ModelShape:
    """What the model prices of a network: each variable's bytes and multiply-adds."""

    sizes: tuple[float, ...]
    flops: tuple[float, ...]


def model_shape(model: str, shape: tuple[int, int, int]) -> ModelShape:
    """The network archbench builds for this model (tf.keras.applications, 1000 classes)."""
    return ModelShape(
        variable_bytes(model, shape, IMAGENET_CLASSES),
        variable_flops(model, shape, IMAGENET_CLASSES),
    )


@dataclass(frozen=True)
class Term:
    """One row of the ablation: the model with the terms up to here."""

    label: str
    as_run: bool  # what the system did (the last such row is the prediction compared)


HOROVOD_TERMS = (
    Term("the model as before: one GPU per host, alpha 60 us, no overlap", False),
    Term("+ 4 GPUs per host, one NCCL ring through them (PCIe inside)", False),
    Term("+ NCCL's latencies (9.6 us a network hop, 5.7 us a PCIe hop, 8.4 us a call)", False),
    Term("+ overlap with the backward pass (layer order, fused while the last call runs)", True),
    Term("what-if: + pipelined fused buffers", False),
    Term("what-if: hierarchical allreduce instead of the ring", False),
)
PS_TERMS = (
    Term("8 GPUs per host, each pushing and pulling its own gradient", False),
    Term("+ the host's GPUs summed first, one push and pull per host", True),
    Term(
        "what-if: each variable's exchange behind the backward pass, as its dataflow allows",
        False,
    ),
)


def _horovod_config(
    cluster: Cluster, work: Workload, facts: ModelShape, workers: int, step: int
) -> tuple[StepConfig, Calibration]:
    """The ring configuration and calibration of ablation row `step`."""
    calib = Calibration()
    g = 1 if step == 0 else cluster.devices_per_host
    hosts = [f"node{i // g + 1}" for i in range(workers)]
    config = StepConfig(
        arch="ring", model=work.model, batch_size=work.batch,
        param_bytes=float(sum(facts.sizes)),
        placement=F.Placement(tuple(hosts), tuple([F.WORKER] * workers)),
        bandwidth_bits=cluster.nic_gbit * 1e9, variable_bytes=facts.sizes,
        fusion_threshold_mb=cluster.fusion_mb, devices_per_host=g,
    )  # fmt: skip
    if step >= 1:
        intra_alpha = cluster.intra_alpha_s if step >= 2 else calib.intra.alpha_s
        calib = replace(
            calib, intra=F.LinkCost(intra_alpha, F.beta_from_bandwidth(cluster.intra_gbit * 1e9))
        )
    if step >= 2:
        calib = replace(calib, inter=F.LinkCost(cluster.inter_alpha_s, 0.0))
        config = replace(config, call_s=cluster.call_s)
    if step >= 3:
        config = replace(config, overlap_schedule="backward", variable_flops=facts.flops)
    if step == 4:
        config = replace(config, pipelined_buffers=True)
    if step == 5:
        config = replace(config, allreduce_algorithm=F.HIERARCHICAL)
    return config, calib


def _params(work: Workload) -> ModelParams:
    return ModelParams(
        compute={work.model: ComputeLine(fixed_s=work.batch / work.images_per_s, per_sample_s=0.0)}
    )


def horovod_efficiency(
    cluster: Cluster, work: Workload, facts: ModelShape, workers: int, step: int
) -> float:
    """Predicted scaling efficiency of the ring at W devices under ablation row `step`."""
    config, calib = _horovod_config(cluster, work, facts, workers, step)
    params = _params(work)
    step_s = predict_step(config, params, calib).step_s
    alone = work.batch / work.images_per_s
    return alone / step_s


def ps_efficiency(
    cluster: Cluster, work: Workload, facts: ModelShape, workers: int, step: int
) -> float:
    """Predicted scaling efficiency of distributed_replicated at W devices: the servers on the
    first K instances (K = the instances, or as [T2] lists), their shards balanced; row 0 has
    every GPU push and pull on its own, row 1 sums a host's GPUs first (a reduce-scatter and an
    allgather over their PCIe links) and exchanges once per host, row 2 (a what-if) also lets
    each variable's exchange start as soon as the backward pass made its gradient ([T3])."""
    g = cluster.devices_per_host
    hosts = F.hosts_of(workers, g)
    servers = work.num_ps.get(workers, hosts)
    calib = replace(
        Calibration(),
        intra=F.LinkCost(Calibration().intra.alpha_s,
                         F.beta_from_bandwidth(cluster.intra_gbit * 1e9)),
    )  # fmt: skip
    ranks = workers if step == 0 else hosts
    worker_hosts = [f"node{(i // g if step == 0 else i) + 1}" for i in range(ranks)]
    server_hosts = [f"node{k + 1}" for k in range(servers)]
    plan = ps_plan(work.model, work.shape, IMAGENET_CLASSES, servers, "balanced")
    config = StepConfig(
        arch="ps", model=work.model, batch_size=work.batch,
        param_bytes=float(sum(facts.sizes)),
        placement=F.Placement(
            tuple(server_hosts + worker_hosts),
            tuple([F.PS] * servers + [F.WORKER] * ranks),
        ),
        bandwidth_bits=cluster.nic_gbit * 1e9, variable_bytes=facts.sizes,
        ps_sharding="balanced", ps_plan=plan,
    )  # fmt: skip
    compute = work.batch / work.images_per_s
    step_s = predict_step(config, _params(work), calib).step_s
    if step >= 1:
        step_s += F.local_aggregation_s(float(sum(facts.sizes)), min(g, workers), calib.intra)
    if step >= 2:
        # [T3]: the graph sums, applies, waits at a barrier and copies back each variable on its
        # own, so each can start once the backward pass has made its gradient: the whole
        # exchange, at its own pace per byte, queued behind the layers in reverse order
        exchange_s = step_s - compute
        ready = F.gradient_ready_s(facts.flops, compute, config.backward_share)
        chain = F.backward_schedule(
            ready, facts.sizes, float("inf"), 0.0, exchange_s / float(sum(facts.sizes))
        )
        step_s = compute + max(chain.end_s - compute, 0.0)
    return compute / step_s


@dataclass(frozen=True)
class Row:
    cluster: str
    model: str
    workers: int
    published: float
    ablation: tuple[float, ...]  # one per term
    predicted: float  # the last row that is what the system did


def published_rows(
    clusters: Sequence[Cluster] = CLUSTERS,
    shape_of: Callable[[str, tuple[int, int, int]], ModelShape] | None = None,
) -> list[Row]:
    """Every published point with the model's efficiency under each ablation row (each
    model's variables from `shape_of`, by default the network archbench builds)."""
    shape_of = shape_of or model_shape
    rows = []
    for cluster in clusters:
        terms = HOROVOD_TERMS if cluster.system == HOROVOD else PS_TERMS
        price = horovod_efficiency if cluster.system == HOROVOD else ps_efficiency
        last = max(i for i, t in enumerate(terms) if t.as_run)
        for work in cluster.workloads:
            facts = shape_of(work.model, work.shape)
            for w, published in sorted(work.published.items()):
                ablation = tuple(price(cluster, work, facts, w, i) for i in range(len(terms)))
                rows.append(Row(cluster.name, work.model, w, published, ablation, ablation[last]))
    return rows


WHATIF_COMMAND = (
    "archbench model whatif --models {model} --dataset synthetic --synthetic-shape {shape} "
    "--synthetic-classes 1000 --batch-size 64 --compute-ms {ms:.1f} --bandwidths 25gbit "
    "--workers 128,512 --devices-per-host 4 --intra-host-bandwidth 126gbit "
    "--intra-host-latency 5.7us --latency 9.6us --call-cost 8.4us --overlap backward"
)


def published_text(rows: Sequence[Row], clusters: Sequence[Cluster] = CLUSTERS) -> str:
    """The table of published against predicted efficiency, the ablation, and the sources."""
    lines = [
        "Scaling efficiency: published against predicted (the model with the terms of what "
        "each system did; nothing fitted to the published figures)",
        "",
        "| cluster | model | devices | published | predicted | predicted - published |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.cluster} | {row.model} | {row.workers} | {row.published:.0%} | "
            f"{row.predicted:.0%} | {(row.predicted - row.published) * 100:+.0f} |"
        )
    for cluster in clusters:
        terms = HOROVOD_TERMS if cluster.system == HOROVOD else PS_TERMS
        mine = [r for r in rows if r.cluster == cluster.name]
        if not mine:
            continue
        lines += ["", f"Ablation, {cluster.name} ({cluster.facts}):", ""]
        header = " | ".join(f"{r.model} {r.workers} ({r.published:.0%})" for r in mine)
        lines.append(f"| term | {header} |")
        lines.append("| --- |" + " ---: |" * len(mine))
        for i, term in enumerate(terms):
            marker = " (as run)" if term.as_run else ""
            cells = " | ".join(f"{r.ablation[i]:.0%}" for r in mine)
            lines.append(f"| {term.label}{marker} | {cells} |")
    horovod = [c for c in clusters if c.system == HOROVOD]
    if horovod:
        lines += ["", "The same Horovod rows with model whatif (efficiency per W):"]
        for work in horovod[0].workloads:
            shape = "x".join(str(d) for d in work.shape)
            ms = work.batch / work.images_per_s * 1e3
            lines.append("  " + WHATIF_COMMAND.format(model=work.model, shape=shape, ms=ms))
    lines += ["", "Sources: the docstring of archbench/perfmodel/optimize/published.py."]
    return "\n".join(lines) + "\n"


def rows_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [
        {
            "cluster": r.cluster, "model": r.model, "devices": r.workers,
            "published": r.published, "predicted": r.predicted, "ablation": list(r.ablation),
        }
        for r in rows
    ]  # fmt: skip


def run_published(args) -> int:
    rows = published_rows()
    if getattr(args, "json", False):
        print(json.dumps(rows_json(rows), indent=2))
    else:
        print(published_text(rows), end="")
    return 0
