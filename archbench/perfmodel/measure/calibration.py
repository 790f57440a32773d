"""Machine constants of the model: alpha and beta within a host and between hosts, and the
compute time of each model per batch, read from `archbench microbench` records."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from archbench.errors import UsageError
from archbench.perfmodel.model.formulas import LinkCost

# Used only when nothing was measured: a loopback TCP path of a few GB/s and tens of
# microseconds per message, and a switched Ethernet hop of ~50 us. The README says so and
# `archbench microbench` replaces them.
DEFAULT_INTRA = LinkCost(alpha_s=30e-6, beta_s_per_byte=1 / 2e9)
DEFAULT_INTER_ALPHA_S = 60e-6
HEAVY_COMPUTE_S = 0.01  # compute steps at least this long measure core sharing


@dataclass(frozen=True)
class ComputeLine:
    """Forward+backward time of one worker alone: seconds = fixed_s + per_sample_s * batch."""

    fixed_s: float
    per_sample_s: float

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
    # ring allreduce (Horovod) over n hosts: time per bus byte over the shaped link's own
    # (>= 1), from the slope between microbench's two largest messages at each n. It stretches
    # the link term rather than adding a fixed host cost: the collective Open MPI picks for n
    # ranks, and ranks sharing cores, move more than 2(n-1)/n bytes per link, so the extra
    # time grows with the link's time per byte.
    ring_link_factor: dict[int, float] = field(default_factory=dict)

    def ring_link_factor_for(self, ranks_sharing: int) -> float:
        """The measured stretch at the nearest ring size not above `ranks_sharing` (the
        smallest measured when every rank has its own cores); 1 when none was measured."""
        if not self.ring_link_factor:
            return 1.0
        sizes = sorted(self.ring_link_factor)
        fitting = [n for n in sizes if n <= ranks_sharing]
        return self.ring_link_factor[fitting[-1] if fitting else sizes[0]]

    source: str = "defaults"

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
            "ring_link_factor": {str(n): f for n, f in self.ring_link_factor.items()},
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
            ring_link_factor={
                int(n): float(f) for n, f in (data.get("ring_link_factor") or {}).items()
            },
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
    """Every JSON object in a .jsonl file, skipping blank and torn lines."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line of an interrupted writer
    return rows


def calibration_from_records(records: Iterable[dict[str, Any]], source: str) -> Calibration:
    """Build a Calibration from microbench records (kind == 'microbench')."""
    pt2pt: dict[str, list[tuple[float, float]]] = defaultdict(list)
    shaped: list[tuple[float, float, float]] = []  # size, one-way s, link bits/s
    compute: dict[str, list[tuple[int, float]]] = defaultdict(list)
    shared: list[tuple[str, int, int, float]] = []  # model, batch, processes, seconds
    # allreduce ranks -> message size -> (seconds, link bits/s)
    rings: dict[int, dict[float, tuple[float, float]]] = defaultdict(dict)
    for rec in records:
        if rec.get("kind") != "microbench":
            continue
        bench = rec.get("bench")
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
        calib.compute[model] = fit_compute_line(batches, times)
    calib.cpu_contention = contention_from(compute, shared)
    for ranks, by_size in rings.items():
        factor = ring_link_factor(ranks, by_size, calib.link_efficiency)
        if factor is not None:
            calib.ring_link_factor[ranks] = factor
    return calib


def ring_link_factor(
    ranks: int, by_size: dict[float, tuple[float, float]], link_efficiency: float
) -> float | None:
    """Time per bus byte of an allreduce over n ranks, over the shaped link's, from the slope
    between the two largest messages (Hockney: the slope is free of the per-call overheads
    that dominate small messages; a single size gives the plain ratio). None with no data."""
    if ranks < 2 or not by_size:
        return None
    sizes = sorted(by_size)
    bus_share = 2 * (ranks - 1) / ranks  # bytes on each link per byte of message
    big_s, bits = by_size[sizes[-1]]
    link_beta = link_efficiency * 8.0 / bits
    if len(sizes) >= 2 and sizes[-1] > sizes[-2]:
        small_s, _ = by_size[sizes[-2]]
        per_byte = (big_s - small_s) / (sizes[-1] - sizes[-2])
    else:
        per_byte = big_s / sizes[-1]
    return max(per_byte / bus_share / link_beta, 1.0)


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


def load_calibration(path: str | Path | None) -> Calibration:
    """Calibration from a microbench results.jsonl (or a saved calibration .json); defaults
    when path is None."""
    if path is None:
        return Calibration()
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"calibration file {path} does not exist (run `archbench microbench`)")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UsageError(f"calibration file {path} is not valid JSON: {exc}") from None
        return Calibration.from_json(data.get("calibration", data))
    records = read_jsonl(path)
    if not any(r.get("kind") == "microbench" for r in records):
        raise UsageError(f"{path} holds no microbench records")
    return calibration_from_records(records, source=str(path))


def is_finite_positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
