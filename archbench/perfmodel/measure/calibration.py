"""Machine constants of the model: alpha and beta within a host and between hosts, and the
compute time of each model per batch, read from `archbench microbench` records."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, loads, read_json
from archbench.perfmodel.model.formulas import LinkCost

# Used only when nothing was measured: a loopback TCP path of a few GB/s and tens of
# microseconds per message, and a switched Ethernet hop of ~50 us. The README says so and
# `archbench microbench` replaces them.
DEFAULT_INTRA = LinkCost(alpha_s=30e-6, beta_s_per_byte=1 / 2e9)
DEFAULT_INTER_ALPHA_S = 60e-6
HEAVY_COMPUTE_S = 0.01  # compute steps at least this long measure core sharing
# A TensorFlow gRPC parameter server's own costs, priced whenever nothing else was measured:
# the time per tensor request (each variable, or shard of one, pushed or pulled is a RecvTensor
# call of its own) and the server's work per byte of gradient it absorbs into a shard's
# accumulator and per byte of shard it updates (the momentum step), in virtual time on one
# virtual core. Measured on the emulated cluster, dilated by 2, at 1 Gbit/s (the mean of two
# runs of `archbench microbench`: 69 and 78 us, 0.18 and 0.19 ns/B, 0.40 and 0.36 ns/B; the
# README of this package gives the commands).
DEFAULT_PS_REQUEST_S = 74e-6
DEFAULT_PS_ACCUMULATE_S_PER_BYTE = 0.18e-9
DEFAULT_PS_APPLY_S_PER_BYTE = 0.38e-9


@dataclass(frozen=True)
class ComputeLine:
    """Forward+backward time of one worker alone: seconds = fixed_s + per_sample_s * batch;
    `update_s`: the rest of that worker's step (the optimizer's update of every parameter and
    the loop around it: a `single` step less its compute)."""

    fixed_s: float
    per_sample_s: float
    update_s: float = 0.0

    def seconds(self, batch_size: int) -> float:
        return self.fixed_s + self.per_sample_s * batch_size


@dataclass
class Calibration:
    intra: LinkCost = DEFAULT_INTRA
    inter: LinkCost | None = None  # measured between hosts; None: alpha default, beta from link
    compute: dict[str, ComputeLine] = field(default_factory=dict)
    # compute slow-down per extra process on the same cores (measured with several at once)
    cpu_contention: float = 0.0
    # shaped rate / rate the between-host ping-pong achieved (>= 1), when it ran on shaped links
    link_efficiency: float = 1.0
    # fixed cost of one Horovod allreduce call over n hosts (the intercept of microbench's
    # ladder: per-call negotiation, the cycle, 2(n-1) message latencies)
    ring_call_s: dict[int, float] = field(default_factory=dict)
    # a parameter server's costs (see DEFAULT_PS_REQUEST_S)
    ps_request_s: float = DEFAULT_PS_REQUEST_S
    ps_accumulate_s_per_byte: float = DEFAULT_PS_ACCUMULATE_S_PER_BYTE
    ps_apply_s_per_byte: float = DEFAULT_PS_APPLY_S_PER_BYTE
    # which of the above were measured (the others are the defaults): names of MEASURABLE
    measured: tuple[str, ...] = ()
    # what the cluster was (fingerprint()); None: unknown (defaults, or older records)
    fingerprint: dict[str, Any] | None = None
    source: str = "defaults"

    def ring_call_for(self, ranks: int) -> float | None:
        """The fixed cost of an allreduce call over `ranks` hosts: measured at that size, or
        beyond the largest measured size that one's plus 2 message latencies per extra rank
        (Thakur et al.'s 2(n-1) alpha); None when no size was measured."""
        if not self.ring_call_s:
            return None
        if ranks in self.ring_call_s:
            return self.ring_call_s[ranks]
        sizes = sorted(self.ring_call_s)
        below = [n for n in sizes if n <= ranks]
        nearest = below[-1] if below else sizes[0]
        alpha = self.inter.alpha_s if self.inter else DEFAULT_INTER_ALPHA_S
        return max(self.ring_call_s[nearest] + 2 * (ranks - nearest) * alpha, 0.0)

    def describe_server_costs(self) -> list[str]:
        """The parameter-server costs in one line each, saying which were measured."""

        def origin(name: str) -> str:
            return "measured" if name in self.measured else "default"

        return [
            f"a parameter server answers a tensor request in {self.ps_request_s * 1e6:.1f} us "
            f"({origin('ps_request_s')})",
            f"it absorbs a pushed gradient at {self.ps_accumulate_s_per_byte * 1e9:.3f} ns/B and "
            f"updates its shard at {self.ps_apply_s_per_byte * 1e9:.3f} ns/B "
            f"({origin('ps_accumulate_s_per_byte')}, {origin('ps_apply_s_per_byte')})",
        ]

    def inter_for(self, bandwidth_bits: float | None) -> LinkCost:
        """The between-host path at a given shaped bandwidth (None: unshaped, measured or
        loopback-like)."""
        alpha = self.inter.alpha_s if self.inter else DEFAULT_INTER_ALPHA_S
        if bandwidth_bits is None:
            beta = self.inter.beta_s_per_byte if self.inter else self.intra.beta_s_per_byte
        else:
            # the shaped rate, slowed by what the ping-pong achieved on a shaped link here
            beta = self.link_efficiency * 8.0 / bandwidth_bits
        return LinkCost(alpha_s=alpha, beta_s_per_byte=beta)

    def to_json(self) -> dict[str, Any]:
        return {
            "intra": asdict(self.intra),
            "inter": asdict(self.inter) if self.inter else None,
            "compute": {name: asdict(line) for name, line in self.compute.items()},
            "cpu_contention": self.cpu_contention,
            "link_efficiency": self.link_efficiency,
            "ring_call_s": {str(n): t for n, t in self.ring_call_s.items()},
            "ps_request_s": self.ps_request_s,
            "ps_accumulate_s_per_byte": self.ps_accumulate_s_per_byte,
            "ps_apply_s_per_byte": self.ps_apply_s_per_byte,
            "measured": list(self.measured),
            "fingerprint": self.fingerprint,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        return cls(
            intra=LinkCost(**data["intra"]),
            inter=LinkCost(**data["inter"]) if data.get("inter") else None,
            compute={k: ComputeLine(**v) for k, v in (data.get("compute") or {}).items()},
            cpu_contention=float(data.get("cpu_contention") or 0.0),
            link_efficiency=float(data.get("link_efficiency") or 1.0),
            ring_call_s={int(n): float(t) for n, t in (data.get("ring_call_s") or {}).items()},
            ps_request_s=float(data.get("ps_request_s", DEFAULT_PS_REQUEST_S)),
            ps_accumulate_s_per_byte=float(
                data.get("ps_accumulate_s_per_byte", DEFAULT_PS_ACCUMULATE_S_PER_BYTE)
            ),
            ps_apply_s_per_byte=float(data.get("ps_apply_s_per_byte", DEFAULT_PS_APPLY_S_PER_BYTE)),
            measured=tuple(data.get("measured") or ()),
            fingerprint=data.get("fingerprint"),
            source=data.get("source", "json"),
        )


def fit_alpha_beta(sizes_bytes: Sequence[float], seconds: Sequence[float]) -> LinkCost:
    """Least-squares line t = alpha + n * beta through one-way message times (Hockney).

    Weighted by 1/t so that small messages (which fix alpha) count as much as large ones
    (which fix beta); both kept non-negative.
    """
    n = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.size < 2 or np.unique(n).size < 2:
        raise ValueError("need at least two distinct message sizes to fit alpha and beta")
    weights = 1.0 / np.maximum(t, 1e-12)
    design = np.stack([np.ones_like(n), n], axis=1) * weights[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, t * weights, rcond=None)
    return LinkCost(alpha_s=max(float(alpha), 0.0), beta_s_per_byte=max(float(beta), 1e-15))


def fit_compute_line(batch_sizes: Sequence[int], seconds: Sequence[float]) -> ComputeLine:
    """Line through per-step compute times; with one batch size, all of it is per-sample."""
    b = np.asarray(batch_sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if b.size == 0:
        raise ValueError("no compute measurements")
    if np.unique(b).size < 2:
        return ComputeLine(fixed_s=0.0, per_sample_s=float(np.median(t / b)))
    slope, intercept = np.polyfit(b, t, 1)
    if intercept < 0:  # keep the line physical: no negative fixed cost
        return ComputeLine(fixed_s=0.0, per_sample_s=float(np.sum(b * t) / np.sum(b * b)))
    if slope < 0:
        return ComputeLine(fixed_s=float(np.mean(t)), per_sample_s=0.0)
    return ComputeLine(fixed_s=float(intercept), per_sample_s=float(slope))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON object in a .jsonl file, skipping blank and torn lines (and, in a file that is
    not JSON lines at all, every line: the caller then finds no record in it)."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                row = loads(line)
            except JsonProblem:
                continue  # a torn last line of an interrupted writer (or one nested past bounds)
            if isinstance(row, dict):
                rows.append(row)
    return rows


# What makes two clusters the same for the calibration: whether the hosts are emulated, their
# time dilation and virtual cores, and the machine's CPU. The link rate is not in it: it is an
# input of the model (a calibration made at 1 Gbit/s prices a run at 100 Mbit/s).
FINGERPRINT_KEYS = ("emulated", "dilation", "vcpus_per_node", "vcpus_per_process", "cpu")


def fingerprint(
    emulated: bool,
    dilation: float | None,
    vcpus_per_node: int | None,
    vcpus_per_process: int | None,
    cpu: str | None,
) -> dict[str, Any]:
    return {
        "emulated": bool(emulated),
        "dilation": float(dilation) if dilation else None,
        "vcpus_per_node": int(vcpus_per_node) if vcpus_per_node else None,
        "vcpus_per_process": int(vcpus_per_process) if vcpus_per_process else None,
        "cpu": cpu or None,
    }


def fingerprint_of_hosts(hosts: list[str]) -> dict[str, Any]:
    """The fingerprint of the cluster these hosts are (an emulated one that is up, else real
    hosts of this machine's kind)."""
    # deferred: the record's environment (subprocess, platform) loads only for a fingerprint
    from archbench.runtime.environment import cpu_model

    try:
        # deferred: inside the ImportError guard for a build without archbench.cluster
        from archbench.cluster.state import cluster_of

        state = cluster_of(hosts)
    except ImportError:
        state = None
    if state is None:
        return fingerprint(False, None, None, None, cpu_model())
    return fingerprint(
        True, state.dilation, state.vcpus_per_node, state.vcpus_per_process, cpu_model()
    )


def fingerprint_of_record(record: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint of the cluster a run record ran on."""
    # deferred: the record package (subprocess, platform) loads only for a fingerprint
    from archbench.record import RunRecord

    view = RunRecord(record)
    fidelity = record.get("fidelity") or {}
    return fingerprint(
        view.emulated,
        view.cluster.get("dilation") or fidelity.get("dilation"),
        view.cluster.get("vcpus_per_node") or fidelity.get("vcpus_per_node"),
        fidelity.get("vcpus_per_process"),
        (record.get("env") or {}).get("cpu"),
    )


def same_cluster(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two fingerprints name the same kind of cluster (a key either leaves unknown is
    not held against it)."""
    if not a or not b:
        return False
    return all(
        a.get(key) is None or b.get(key) is None or a.get(key) == b.get(key)
        for key in FINGERPRINT_KEYS
    )


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(intercept, slope) of the least-squares line; None with fewer than two distinct x."""
    if len(set(xs)) < 2:
        return None
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def calibration_from_records(
    records: Iterable[dict[str, Any]],
    source: str,
    allreduce_algorithm: str = "ring",
    cluster: dict[str, Any] | None = None,
) -> Calibration:
    """Build a Calibration from microbench records (kind == 'microbench'): those of the
    allreduce algorithm the study's ring runs use and, given a `cluster` fingerprint, only
    those measured on that kind of cluster. A measurement repeated keeps its latest record."""
    latest: dict[tuple, dict[str, Any]] = {}
    for rec in records:
        if rec.get("kind") != "microbench":
            continue
        if cluster is not None and not same_cluster(rec.get("fingerprint"), cluster):
            continue
        if rec.get("bench") == "allreduce_horovod" and rec.get("setting", allreduce_algorithm) != (
            allreduce_algorithm
        ):
            continue
        identity = (
            rec.get("bench"), rec.get("scope"), rec.get("ranks"), rec.get("size_bytes"),
            rec.get("requests"), rec.get("model"), rec.get("batch_size"), rec.get("sharing"),
        )  # fmt: skip
        latest[identity] = rec
    calib = _calibration_from(latest.values(), source)
    fingerprints = [r.get("fingerprint") for r in latest.values() if r.get("fingerprint")]
    calib.fingerprint = fingerprints[-1] if fingerprints else None
    return calib


def update_of(record: dict[str, Any]) -> float | None:
    """A microbench compute record's update: its step less its compute, both averaged over a
    window of passes (the probe's one timed apply, `apply_s_median`, is too short to meter on
    a dilated node, where a pass throttled once waits out a whole CFS period)."""
    if record.get("step_s_median") is None or record.get("compute_s_median") is None:
        return None
    return max(float(record["step_s_median"]) - float(record["compute_s_median"]), 0.0)


def _calibration_from(records: Iterable[dict[str, Any]], source: str) -> Calibration:
    pt2pt: dict[str, list[tuple[float, float]]] = defaultdict(list)
    shaped: list[tuple[float, float, float]] = []  # size, one-way s, link bits/s
    compute: dict[str, list[tuple[int, float]]] = defaultdict(list)
    applied: dict[str, list[float]] = defaultdict(list)  # the optimizer's update, alone
    shared: list[tuple[str, int, int, float]] = []  # model, batch, processes, seconds
    # allreduce ranks -> message size -> (seconds, link bits/s)
    rings: dict[int, dict[float, tuple[float, float]]] = defaultdict(dict)
    server: dict[str, list[tuple[float, float]]] = defaultdict(list)  # bench -> (x, seconds)
    for rec in records:
        bench = rec.get("bench")
        if bench == "ps_requests" and rec.get("time_s"):
            server[bench].append((float(rec["requests"]), float(rec["time_s"])))
        elif bench in ("ps_accumulate", "ps_update") and rec.get("time_s"):
            server[bench].append((float(rec["size_bytes"]), float(rec["time_s"])))
        if bench == "pt2pt" and rec.get("one_way_s"):
            pt2pt[rec.get("scope", "intra")].append((rec["size_bytes"], rec["one_way_s"]))
            if rec.get("scope") == "inter" and rec.get("link_bits"):
                shaped.append((rec["size_bytes"], rec["one_way_s"], float(rec["link_bits"])))
        elif bench == "allreduce_horovod" and rec.get("scope") == "inter" and rec.get("link_bits"):
            link = (float(rec["time_s"]), float(rec["link_bits"]))
            rings[int(rec["ranks"])][float(rec["size_bytes"])] = link
        elif bench == "compute" and rec.get("compute_s_median"):
            sharing = int(rec.get("sharing") or 1)
            if sharing == 1:
                compute[rec["model"]].append((int(rec["batch_size"]), rec["compute_s_median"]))
                if (update := update_of(rec)) is not None:
                    applied[rec["model"]].append(update)
            else:
                shared.append(
                    (rec["model"], int(rec["batch_size"]), sharing, rec["compute_s_median"])
                )
    calib = Calibration(source=source)
    if len(pt2pt.get("intra", [])) >= 2:
        sizes, times = zip(*pt2pt["intra"], strict=True)
        calib.intra = fit_alpha_beta(sizes, times)
    if len(pt2pt.get("inter", [])) >= 2:
        sizes, times = zip(*pt2pt["inter"], strict=True)
        calib.inter = fit_alpha_beta(sizes, times)
        calib.link_efficiency = link_efficiency(shaped)
    for model, rows in compute.items():
        batches, times = zip(*rows, strict=True)
        update = float(np.median(applied[model])) if applied.get(model) else 0.0
        calib.compute[model] = replace(fit_compute_line(batches, times), update_s=update)
    calib.cpu_contention = contention_from(compute, shared)
    measured = ["inter"] if calib.inter is not None else []
    if shaped:
        measured.append("link_efficiency")
    for ranks, by_size in rings.items():
        if len(by_size) >= 2:
            sizes = sorted(by_size)
            calib.ring_call_s[ranks] = fit_alpha_beta(sizes, [by_size[n][0] for n in sizes]).alpha_s
    requests = _line(*zip(*server["ps_requests"], strict=True)) if server["ps_requests"] else None
    if requests is not None:
        calib.ps_request_s = max(requests[1], 0.0)
        measured.append("ps_request_s")
    absorb = _line(*zip(*server["ps_accumulate"], strict=True)) if server["ps_accumulate"] else None
    update = _line(*zip(*server["ps_update"], strict=True)) if server["ps_update"] else None
    if absorb is not None:
        calib.ps_accumulate_s_per_byte = max(absorb[1], 0.0)
        measured.append("ps_accumulate_s_per_byte")
    if update is not None and absorb is not None:
        # the update runs one accumulate too: the rest is the momentum step
        calib.ps_apply_s_per_byte = max(update[1] - absorb[1], 0.0)
        measured.append("ps_apply_s_per_byte")
    if calib.ring_call_s:
        measured.append("ring_call_s")
    if calib.compute:
        measured.append("compute")
    calib.measured = tuple(measured)
    return calib


def link_efficiency(shaped: list[tuple[float, float, float]]) -> float:
    """Shaped rate over the rate the largest ping-pong message achieved (>= 1).

    Only the largest message counts: tc tbf lets a burst of about 2 ms at line rate through
    unshaped, so small messages cross faster than the link rate.
    """
    if not shaped:
        return 1.0
    size, one_way, bits = max(shaped)
    return max((one_way / size) / (8.0 / bits), 1.0)


def contention_from(
    alone: dict[str, list[tuple[int, float]]], shared: list[tuple[str, int, int, float]]
) -> float:
    """Median over measurements of (t_P / t_1 - 1) / (P - 1): the slow-down each extra process
    on the same cores adds."""
    ratios = []
    heavy = []
    for model, batch, processes, seconds in shared:
        solo = [t for b, t in alone.get(model, []) if b == batch]
        if solo and processes > 1:
            alone_s = float(np.median(solo))
            ratio = (seconds / alone_s - 1.0) / (processes - 1)
            ratios.append(ratio)
            if alone_s >= HEAVY_COMPUTE_S:
                heavy.append(ratio)
    # steps of a millisecond are dominated by dispatch, not by the cores: judge on heavy ones
    chosen = heavy or ratios
    return max(float(np.median(chosen)), 0.0) if chosen else 0.0


def load_calibration(
    path: str | Path | None,
    cluster: dict[str, Any] | None = None,
    allreduce_algorithm: str = "ring",
) -> Calibration:
    """Calibration from a microbench results.jsonl (or a saved calibration .json); defaults
    when path is None. With a `cluster` fingerprint only the records measured on that kind of
    cluster count (none: the defaults, with the file named as the source)."""
    if path is None:
        return Calibration()
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"calibration file {path} does not exist (run `archbench microbench`)")
    if path.suffix == ".json":
        try:
            data = read_json(path)
        except OSError as exc:
            raise UsageError(f"calibration file {path}: {exc.strerror or exc}") from None
        except JsonProblem as exc:
            raise UsageError(f"calibration file {path} is not a calibration: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"calibration file {path} is not a calibration (a JSON object)")
        return Calibration.from_json(data.get("calibration", data))
    records = read_jsonl(path)
    if not any(r.get("kind") == "microbench" for r in records):
        raise UsageError(f"{path} holds no microbench records")
    return calibration_from_records(records, str(path), allreduce_algorithm, cluster)


def is_finite_positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
