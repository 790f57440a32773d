"""Which architecture the model predicts fastest over a plane of two axes, and where that changes.

A crossover map prices every candidate of one workload (an architecture as the study ran it: a
PS placement and server count, a p2p schedule, a compression are candidates of their own) at
every cell of a grid over two of four axes (workers, link bandwidth, link latency, gradient
bytes), the other two held, and keeps per cell the candidates ordered by predicted time per
sample at the study's per-worker batch. A crossover is a pair of neighbouring cells whose
winners differ; the term of the step that moved most between them says why.

Pure functions of the study's observations, the fitted parameters and the calibration: loading
a study and writing files is `crossover_report`'s, drawing `crossover_figure`'s.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any

from archbench.analysis.labels import model_label
from archbench.common.archs import has_servers, owns_shards, sort_key
from archbench.common.bandwidth import format_bits, parse_bandwidth
from archbench.common.errors import UsageError
from archbench.perfmodel.fit.fitting import noise_floor
from archbench.perfmodel.fit.ranking import RIGHT, TOO_CLOSE, WRONG, call_gap, verdict_of
from archbench.perfmodel.fit.records import Observation, cpu_sharing_ranks
from archbench.perfmodel.measure.calibration import DEFAULT_INTER_ALPHA_S, Calibration
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.inputs import ps_shards
from archbench.perfmodel.model.predictor import (
    ModelParams,
    StepConfig,
    default_placement,
    predict_step,
)
from archbench.perfmodel.model.units import emulated_burst_bytes
from archbench.record.schema import placement_of
from archbench.runtime.settings import MAX_WORKERS

WORKERS = "workers"
BANDWIDTH = "bandwidth"
LATENCY = "latency"
MODEL_SIZE = "model-size"
AXES = (WORKERS, BANDWIDTH, LATENCY, MODEL_SIZE)
# ranges wide enough to show the crossovers of the usual models, narrow enough to stay in the
# regimes the model prices (a 100 Gbit link, 64 workers, a 1 GB gradient)
DEFAULT_RANGES = {
    WORKERS: "2:64",
    BANDWIDTH: "100mbit:100gbit",
    LATENCY: "10us:10ms",
    MODEL_SIZE: "100kB:1GB",
}
# beyond these no cluster this model prices exists (and 1e999 reads as inf)
_MAXIMA = {WORKERS: float(MAX_WORKERS), LATENCY: 10.0, MODEL_SIZE: 1e12}
_UNITS = {
    LATENCY: {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9},
    MODEL_SIZE: {
        "": 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
        "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30,
    },
}  # fmt: skip
_NUMBER_UNIT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµ]*)\s*")
MIN_POINTS, MAX_POINTS = 3, 100
# two axis values closer than this (relative) are the same setting
_SAME = 1e-6


# --------------------------------------------------------------------------- axes


def parse_value(axis: str, text: str) -> float:
    """One value of an axis as a flag gives it: workers an integer, bandwidth a rate (1gbit),
    latency a time (200us), model size bytes (40MB, 1GiB); UsageError unless above 0."""
    flag = f"--{axis}"
    if axis == BANDWIDTH:
        return parse_bandwidth(text)
    if axis == WORKERS:
        try:
            value = float(int(str(text).strip()))
        except ValueError:
            raise UsageError(f"{flag} must be a whole number of workers, got {text!r}") from None
    else:
        match = _NUMBER_UNIT.fullmatch(str(text).lower())
        units = _UNITS[axis]
        if not match or match.group(2) not in units:
            example = "200us, 1ms" if axis == LATENCY else "400kB, 40MB, 1GiB"
            raise UsageError(f"cannot read {flag} value {text!r} (examples: {example})")
        value = float(match.group(1)) * units[match.group(2)]
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} values must be above 0, got {text!r}")
    if value > _MAXIMA[axis]:
        raise UsageError(f"{flag} values must be at most {format_value(axis, _MAXIMA[axis])}")
    return value


def parse_range(axis: str, text: str) -> tuple[float, float]:
    """LO:HI of an axis, LO below HI."""
    low, sep, high = str(text).partition(":")
    if not sep:
        raise UsageError(f"--{axis} is an axis of the map: give a range LO:HI, got {text!r}")
    lo, hi = parse_value(axis, low), parse_value(axis, high)
    if not lo < hi:
        raise UsageError(f"--{axis} {text}: LO must be below HI")
    return lo, hi


def axis_values(
    axis: str, lo: float, hi: float, points: int, include: Sequence[float] = ()
) -> tuple[float, ...]:
    """`points` values from lo to hi evenly spaced on a log scale, with the values of
    `include` within [lo, hi] added (the study's own settings, so its runs sit on the grid);
    whole numbers for workers."""
    if not MIN_POINTS <= points <= MAX_POINTS:
        raise UsageError(f"--points must be {MIN_POINTS} to {MAX_POINTS}, got {points}")
    ratio = (hi / lo) ** (1.0 / (points - 1))
    spaced = [lo * ratio**i for i in range(points - 1)] + [hi]
    own = [v for v in include if v is not None and lo <= v <= hi]
    if axis == WORKERS:
        spaced, own = [float(round(v)) for v in spaced], [float(round(v)) for v in own]
    # a study's setting replaces a spaced value within a quarter of a step of it (so 1 Gbit/s
    # reads 1 Gbit/s, not 999.9 Mbit/s)
    near = ratio**0.25
    kept = [v for v in spaced if not any(v / near < o < v * near for o in own)]
    unique: list[float] = []
    for value in sorted(kept + own):
        if not unique or not same(unique[-1], value):
            unique.append(value)
    return tuple(unique)


def format_range(axis: str, lo: float, hi: float) -> str:
    """'2 .. 64 workers', '100 Mbit/s .. 100 Gbit/s'."""
    if axis == WORKERS:
        return f"{lo:g} .. {hi:g} workers"
    return f"{format_value(axis, lo)} .. {format_value(axis, hi)}"


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= _SAME * max(abs(a), abs(b))


def format_value(axis: str, value: float | None) -> str:
    """An axis value as a reader writes it: 3 workers, 1 Gbit/s, 200 µs, 40 MB (three
    significant digits, rounded before the unit is chosen: 1 ms, not 1e+03 µs)."""
    if value is None:
        return format_bits(None) if axis == BANDWIDTH else "the study's own"
    if axis == WORKERS:
        return f"{value:g} workers"
    value = float(f"{value:.3g}")
    for unit, scale in _DISPLAY_UNITS[axis]:
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    unit, scale = _DISPLAY_UNITS[axis][-1]
    return f"{value / scale:.3g} {unit}"


_DISPLAY_UNITS = {
    BANDWIDTH: (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3), ("bit/s", 1.0)),
    LATENCY: (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)),
    MODEL_SIZE: (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0)),
}


@dataclass(frozen=True)
class Point:
    """Where a configuration is priced: None for latency and model size is the study's own
    (the calibration's link latency, the model's gradient bytes); None for bandwidth is an
    unshaped link."""

    workers: int
    bandwidth_bits: float | None
    latency_s: float | None = None
    model_bytes: float | None = None


_FIELD = {
    WORKERS: "workers",
    BANDWIDTH: "bandwidth_bits",
    LATENCY: "latency_s",
    MODEL_SIZE: "model_bytes",
}


def coordinate(point: Point, axis: str) -> float | None:
    value = getattr(point, _FIELD[axis])
    return float(value) if value is not None else None


def moved(point: Point, axis: str, value: float) -> Point:
    """The point with `axis` set to `value`."""
    return replace(point, **{_FIELD[axis]: int(value) if axis == WORKERS else value})


@dataclass(frozen=True)
class Plane:
    """The grid: x and y values, and the point the other two axes are held at."""

    x: str
    y: str
    x_values: tuple[float, ...]
    y_values: tuple[float, ...]
    base: Point

    def point(self, ix: int, iy: int) -> Point:
        return moved(moved(self.base, self.x, self.x_values[ix]), self.y, self.y_values[iy])


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True, eq=False)
class Candidate:
    """One architecture as the study ran it, priced at any point: its workers laid out as in
    the study's runs (one per host; servers on hosts of their own, beside workers, or every
    process on one host; several ranks a host), with its other settings kept."""

    label: str
    arch: str
    layout: str  # spread, dedicated, colocated, one-host, or packed
    template: StepConfig
    record: dict[str, Any]  # a run of it: whose cluster says which ranks share cores
    ranks_per_host: int = 1

    def config_at(self, point: Point) -> StepConfig | None:
        """The configuration at `point`; None where its layout cannot take that many workers
        (servers beside workers need as many workers as servers; one host holds no more
        processes than its cores)."""
        workers = point.workers
        servers = self.template.num_ps
        kind = "colocated" if self.layout == "colocated" else "dedicated"
        hosts = None
        if self.layout == "one-host":
            if workers + servers > self.host_cores:
                return None  # one host holds no more processes than its cores
            hosts = 1
        elif self.layout == "packed":
            hosts = math.ceil((workers + servers) / self.ranks_per_host)
        if kind == "colocated" and servers > workers:
            return None
        placement = default_placement(self.arch, workers, servers, kind, hosts)
        config = replace(
            self.template,
            placement=placement,
            bandwidth_bits=point.bandwidth_bits,
            cpu_sharing_ranks=cpu_sharing_ranks(self.record, placement),
            link_burst_bytes=self._burst(point.bandwidth_bits),
        )
        if point.model_bytes is not None:
            config = _scaled(config, point.model_bytes / self.template.param_bytes)
        return config

    @property
    def host_cores(self) -> int:
        """The cores of one host of the study's cluster (its nodes' virtual cores where it was
        emulated), never fewer than the processes the study itself ran on one host."""
        cluster = self.record.get("cluster") or {}
        cores = cluster.get("vcpus_per_node") or (self.record.get("env") or {}).get("cores")
        measured = self.ranks_per_host if self.layout in ("one-host", "packed") else 1
        return max(int(cores) if isinstance(cores, int | float) and cores > 0 else 0, measured)

    def _burst(self, bits: float | None) -> float:
        # the emulated links' token bucket follows the rate (0 on real links and unshaped ones)
        if not self.template.link_burst_bytes or bits is None:
            return 0.0
        dilation = (self.record.get("cluster") or {}).get("dilation")
        return emulated_burst_bytes(f"{bits:.0f}bit", dilation)


def _scaled(config: StepConfig, factor: float) -> StepConfig:
    """The configuration with every variable `factor` times as large (the same compute: the
    axis asks what more bytes per step cost, not what a larger network computes)."""
    plan = config.ps_plan
    if has_servers(config.arch):
        shards, counts = ps_shards(config)
        plan = (tuple(s * factor for s in shards), tuple(counts))
    sizes = config.variable_bytes
    return replace(
        config,
        param_bytes=config.param_bytes * factor,
        variable_bytes=None if sizes is None else tuple(b * factor for b in sizes),
        ps_plan=plan,
    )


def layout_of(config: StepConfig) -> tuple[str, int]:
    """How a run laid its processes on hosts, and its ranks per host when packed."""
    hosts, roles = list(config.placement.hosts), list(config.placement.roles)
    if len(hosts) > 1 and len(set(hosts)) == 1:
        return "one-host", len(hosts)
    if config.num_ps:
        return placement_of(hosts, roles) or "dedicated", 1
    per_host = max(Counter(hosts).values())
    return ("spread", 1) if per_host == 1 else ("packed", per_host)


def candidate_label(config: StepConfig) -> str:
    """A candidate's name: its architecture and whatever the study varied besides the workers,
    the link and the batch ('ps (dedicated, 2 PS)', 'ring fp16', 'p2p naive')."""
    layout, per_host = layout_of(config)
    parts = [config.arch]
    if not config.sync:
        parts.append("async")
    if owns_shards(config.arch) and config.p2p_schedule != "staggered":  # the shard exchange
        parts.append(config.p2p_schedule)
    if config.compression and config.compression != "none":
        parts.append(config.compression)
    if config.sync_every > 1:
        parts.append(f"H={config.sync_every}")
    if config.sparse_exchange == "sparse":
        parts.append("sparse rows")
    where = []
    if layout == "packed":
        where.append(f"{per_host}/host")
    elif layout == "one-host" or config.num_ps:
        where.append(layout)
    if config.num_ps:
        where.append(f"{config.num_ps} PS")
        if config.ps_sharding != "round-robin":
            where.append(config.ps_sharding)
    return " ".join(parts) + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True)
class Workload:
    """What the map compares the candidates on: one model at one per-worker batch."""

    model: str
    batch: int

    @property
    def name(self) -> str:
        # a user's model by its label, as the report names it, never by its file's path
        return f"{model_label(self.model)}, batch {self.batch}/worker"

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model_label(self.model)}_b{self.batch}")


def workloads_of(
    observations: Sequence[Observation],
) -> dict[Workload, dict[str, list[Observation]]]:
    """The study's multi-worker observations by workload and candidate label (one worker
    alone is not a candidate: at W workers the map compares ways of running W)."""
    found: dict[Workload, dict[str, list[Observation]]] = {}
    for obs in observations:
        if obs.config.num_workers < 2:
            continue
        workload = Workload(obs.config.model, obs.config.batch_size)
        found.setdefault(workload, {}).setdefault(candidate_label(obs.config), []).append(obs)
    return dict(sorted(found.items(), key=lambda item: (item[0].model, item[0].batch)))


def candidates_of(by_label: dict[str, list[Observation]]) -> list[Candidate]:
    """One candidate per label, its template the label's most common configuration; in the
    architectures' order, each one's plainest form first (it gets the architecture's colour)."""
    out = []
    for label, members in by_label.items():
        keys = Counter(o.config_key for o in members)
        first = next(o for o in members if o.config_key == keys.most_common(1)[0][0])
        layout, per_host = layout_of(first.config)
        out.append(
            Candidate(label, first.config.arch, layout, first.config, first.record, per_host)
        )
    return sorted(out, key=_plainest_first)


_LAYOUT_ORDER = {"spread": 0, "dedicated": 0, "colocated": 1, "packed": 2, "one-host": 3}


def _plainest_first(candidate: Candidate) -> tuple:
    config = candidate.template
    return (
        sort_key(candidate.arch), not config.sync, _LAYOUT_ORDER.get(candidate.layout, 4),
        config.num_ps, len(candidate.label), candidate.label,
    )  # fmt: skip


# --------------------------------------------------------------------------- pricing


def link_latency(calib: Calibration) -> float:
    """The calibration's time per message between hosts (its α)."""
    return calib.inter.alpha_s if calib.inter else DEFAULT_INTER_ALPHA_S


def calibration_at(calib: Calibration, latency_s: float | None) -> Calibration:
    """The calibration with the links' α set to `latency_s`; Horovod's measured fixed cost per
    call over n hosts moves with it by its 2(n-1) messages."""
    if latency_s is None:
        return calib
    base = calib.inter or F.LinkCost(DEFAULT_INTER_ALPHA_S, calib.intra.beta_s_per_byte)
    shift = latency_s - base.alpha_s
    calls = {n: max(t + 2 * (n - 1) * shift, 0.0) for n, t in calib.ring_call_s.items()}
    return replace(calib, inter=F.LinkCost(latency_s, base.beta_s_per_byte), ring_call_s=calls)


@dataclass(frozen=True)
class Priced:
    """One candidate's predicted step at one point."""

    label: str
    step_s: float
    per_sample_s: float  # the step over the samples of every worker
    parts: dict[str, float] = field(default_factory=dict)  # the step's terms (formulas names)


@dataclass(frozen=True)
class Cell:
    """The candidates at one point, fastest first."""

    point: Point
    priced: tuple[Priced, ...]

    @property
    def winner(self) -> Priced | None:
        return self.priced[0] if self.priced else None

    @property
    def runner_up(self) -> Priced | None:
        return self.priced[1] if len(self.priced) > 1 else None

    @property
    def margin(self) -> float:
        """How much longer the runner-up takes per sample than the winner (0.1 = 10%);
        infinite where only one candidate can run."""
        if self.winner is None or self.runner_up is None:
            return math.inf
        return self.runner_up.per_sample_s / self.winner.per_sample_s - 1.0

    def of(self, label: str) -> Priced | None:
        return next((p for p in self.priced if p.label == label), None)


def price_point(
    candidates: Sequence[Candidate],
    point: Point,
    batch: int,
    params: ModelParams,
    calib: Calibration,
) -> Cell:
    """Every candidate that can run at `point`, fastest per sample first (ties by label)."""
    at = calibration_at(calib, point.latency_s)
    priced = []
    for candidate in candidates:
        config = candidate.config_at(point)
        if config is None:
            continue
        config = replace(config, batch_size=batch)
        prediction = predict_step(config, params, at)
        samples = config.num_workers * batch
        priced.append(
            Priced(candidate.label, prediction.step_s, prediction.step_s / samples,
                   dict(prediction.parts))
        )  # fmt: skip
    priced.sort(key=lambda p: (p.per_sample_s, p.label))
    return Cell(point, tuple(priced))


@dataclass(frozen=True)
class CrossoverMap:
    """The priced grid of one workload: cells[iy][ix]."""

    workload: Workload
    plane: Plane
    labels: tuple[str, ...]  # every candidate, in the study's order
    cells: tuple[tuple[Cell, ...], ...]

    def cell(self, ix: int, iy: int) -> Cell:
        return self.cells[iy][ix]

    def winners(self) -> Counter[str]:
        return Counter(c.winner.label for row in self.cells for c in row if c.winner)


def evaluate(
    workload: Workload,
    candidates: Sequence[Candidate],
    plane: Plane,
    params: ModelParams,
    calib: Calibration,
) -> CrossoverMap:
    """Every cell of the plane priced."""
    cells = tuple(
        tuple(
            price_point(candidates, plane.point(ix, iy), workload.batch, params, calib)
            for ix in range(len(plane.x_values))
        )
        for iy in range(len(plane.y_values))
    )
    return CrossoverMap(workload, plane, tuple(c.label for c in candidates), cells)


# --------------------------------------------------------------------------- crossovers


@dataclass(frozen=True)
class Crossover:
    """Along `along`, between `before` and `at` (neighbouring values; the other axis at
    `other_value`), the winner changes from `loser` to `winner`; `term` is the term of the
    step that moved the balance most, with each side's value of it (ms per step) at both."""

    along: str
    other: str
    other_value: float
    before: float
    at: float
    loser: str
    winner: str
    term: str
    loser_term_s: tuple[float, float]
    winner_term_s: tuple[float, float]
    margin: float  # the new winner's margin at `at`


def deciding_term(
    old: Cell, new: Cell, loser: str, winner: str
) -> tuple[str, tuple[float, float], tuple[float, float]]:
    """The term whose gap (loser's less winner's, per step) grew most from `old` to `new`:
    the cost that grows fastest for the loser, or falls fastest for the winner. Per step, not
    per sample: at each point both run the same workers, so the two order them alike, and a
    fixed cost then stays fixed instead of shrinking with the workers it is shared by."""
    a0, a1, b0, b1 = old.of(loser), new.of(loser), old.of(winner), new.of(winner)
    if not (a0 and a1 and b0 and b1):  # one side cannot run on one side of the line
        return "availability", (0.0, 0.0), (0.0, 0.0)
    terms = sorted(set(a0.parts) | set(a1.parts) | set(b0.parts) | set(b1.parts))
    growth = {
        t: (a1.parts.get(t, 0.0) - b1.parts.get(t, 0.0))
        - (a0.parts.get(t, 0.0) - b0.parts.get(t, 0.0))
        for t in terms
    }
    term = max(terms, key=lambda t: (growth[t], t))
    return (
        term,
        (a0.parts.get(term, 0.0), a1.parts.get(term, 0.0)),
        (b0.parts.get(term, 0.0), b1.parts.get(term, 0.0)),
    )


def _along(result: CrossoverMap, along: str) -> list[Crossover]:
    plane = result.plane
    if along == plane.x:
        lines = len(plane.y_values)
        steps = len(plane.x_values)
        other, other_values, values = plane.y, plane.y_values, plane.x_values

        def cell(line: int, i: int) -> Cell:
            return result.cell(i, line)
    else:
        lines = len(plane.x_values)
        steps = len(plane.y_values)
        other, other_values, values = plane.x, plane.x_values, plane.y_values

        def cell(line: int, i: int) -> Cell:
            return result.cell(line, i)

    found = []
    for line in range(lines):
        for i in range(1, steps):
            old, new = cell(line, i - 1), cell(line, i)
            if not (old.winner and new.winner) or old.winner.label == new.winner.label:
                continue
            loser, winner = old.winner.label, new.winner.label
            term, lost, won = deciding_term(old, new, loser, winner)
            found.append(
                Crossover(along, other, other_values[line], values[i - 1], values[i], loser,
                          winner, term, lost, won, new.margin)
            )  # fmt: skip
    return found


def crossovers(result: CrossoverMap) -> list[Crossover]:
    """Every change of winner between neighbouring cells: along x on each row, then along y
    on each column."""
    return _along(result, result.plane.x) + _along(result, result.plane.y)


def describe(crossover: Crossover) -> str:
    """'p2p overtakes ps (dedicated, 1 PS) at 3 workers (2 before) at 1 Gbit/s; deciding
    term: server link, ps (dedicated, 1 PS) 0.79 -> 1.18 ms/step, p2p has none'."""
    c = crossover
    why = (
        "one of the two cannot run on one side (its layout cannot take that many workers: one host holds no more processes than its cores, servers beside workers need as many workers)"
        if c.term == "availability"
        else f"deciding term: {c.term}, {c.loser} {_ms(c.loser_term_s)}, {c.winner} "
        f"{_ms(c.winner_term_s)}"
    )
    before = f"{c.before:g}" if c.along == WORKERS else format_value(c.along, c.before)
    return (
        f"{c.winner} overtakes {c.loser} at {format_value(c.along, c.at)} ({before} before) "
        f"at {format_value(c.other, c.other_value)}; {why}"
    )


def _ms(pair: tuple[float, float]) -> str:
    """The term on each side of the crossover; 'none' where the architecture has no such term
    (p2p has no server link; a nanosecond or less is rounding, not a term)."""
    if max(abs(pair[0]), abs(pair[1])) < 1e-9:
        return "has none"
    before, after = ("0" if abs(v) < 1e-9 else f"{v * 1e3:.3g}" for v in pair)
    return f"{before} -> {after} ms/step"


# --------------------------------------------------------------------------- the study's runs


def observed_point(obs: Observation, calib: Calibration) -> Point:
    """Where a run sits: its workers and link, the calibration's latency, its model's bytes."""
    c = obs.config
    return Point(c.num_workers, c.bandwidth_bits, link_latency(calib), c.param_bytes)


def on_plane(point: Point, plane: Plane) -> bool:
    """Whether a run's point lies in the plane: on the axes it can be anywhere, the held
    values must be its own (None: the study's own, which every run is at)."""
    for axis in AXES:
        if axis in (plane.x, plane.y):
            continue
        held = coordinate(plane.base, axis)
        if axis in (LATENCY, MODEL_SIZE) and held is None:
            continue
        if not same(held, coordinate(point, axis)):
            return False
    return True


@dataclass(frozen=True)
class Marker:
    """The study's runs at one setting of the plane: the measured fastest candidate (median
    step) against the predicted fastest among the same candidates there, called as the
    ranking of `model validate` calls a setting (`ranking.verdict_of`): where the measured gap
    the call rests on is within the runs' noise floor, the runs cannot order the two."""

    x: float
    y: float
    measured_s: dict[str, float]  # label -> median measured step
    predicted_s: dict[str, float]  # label -> predicted step, the same candidates
    map_winner: str | None  # the predicted fastest of every candidate at that point
    noise: dict[str, float] = field(default_factory=dict)  # label -> its runs' noise floor

    @property
    def measured_fastest(self) -> str:
        return min(self.measured_s, key=lambda k: (self.measured_s[k], k))

    @property
    def predicted_fastest(self) -> str:
        return min(self.predicted_s, key=lambda k: (self.predicted_s[k], k))

    @property
    def compared(self) -> bool:
        """Two candidates or more were measured here: there is an order to agree with."""
        return len(self.measured_s) > 1

    @property
    def agrees(self) -> bool:
        return self.verdict == RIGHT

    @property
    def too_close(self) -> bool:
        return self.verdict == TOO_CLOSE

    @property
    def verdict(self) -> str:
        """right, wrong or too close to call (`ranking.verdict_of`)."""
        fastest, picked = self.measured_fastest, self.predicted_fastest
        ordered = sorted(self.measured_s, key=lambda k: (self.measured_s[k], k))
        runner_up = ordered[1] if len(ordered) > 1 else fastest
        rival = runner_up if picked == fastest else picked
        measured = self.measured_s
        gap = call_gap(measured[picked], measured[fastest], measured[runner_up], picked == fastest)
        noise = max(self.noise.get(fastest, 0.0), self.noise.get(rival, 0.0))
        return verdict_of(gap, noise, picked == fastest)

    @property
    def disagrees(self) -> bool:
        return self.verdict == WRONG


def markers(
    result: CrossoverMap,
    by_label: dict[str, list[Observation]],
    candidates: Sequence[Candidate],
    params: ModelParams,
    calib: Calibration,
) -> list[Marker]:
    """One marker per setting of the plane the study measured (candidates at the same workers,
    link and batch compared by their median steps, as the map compares them), each candidate
    with the noise floor of its runs (run once: the mean floor of the others, as the ranking
    takes it)."""
    plane = result.plane
    settings: dict[tuple[float, float], dict[str, list[float]]] = {}
    for label, members in by_label.items():
        for obs in members:
            point = observed_point(obs, calib)
            x, y = coordinate(point, plane.x), coordinate(point, plane.y)
            if x is None or y is None or not on_plane(point, plane):
                continue
            key = _setting_key(settings, x, y)
            settings.setdefault(key, {}).setdefault(label, []).append(obs.step_s)
    floors = [f for measured in settings.values() for v in measured.values()
              if (f := noise_floor(v)) is not None]  # fmt: skip
    run_once = sum(floors) / len(floors) if floors else 0.0
    found = []
    for (x, y), measured in sorted(settings.items()):
        point = moved(moved(plane.base, plane.x, x), plane.y, y)
        cell = price_point(candidates, point, result.workload.batch, params, calib)
        predicted = {label: p.step_s for label in measured if (p := cell.of(label))}
        kept = {label: float(median(v)) for label, v in measured.items() if label in predicted}
        noise = {label: _floor_or(measured[label], run_once) for label in kept}
        if kept:
            winner = cell.winner.label if cell.winner else None
            found.append(Marker(x, y, kept, predicted, winner, noise))
    return found


def _floor_or(values: Sequence[float], default: float) -> float:
    floor = noise_floor(values)
    return default if floor is None else floor


def _setting_key(
    settings: dict[tuple[float, float], Any], x: float, y: float
) -> tuple[float, float]:
    for key in settings:
        if same(key[0], x) and same(key[1], y):
            return key
    return (x, y)


def measured_range(
    observations: Sequence[Observation], axis: str, calib: Calibration
) -> tuple[float, float] | None:
    """The smallest and largest value of `axis` among the runs (None: no run has one)."""
    values = [coordinate(observed_point(o, calib), axis) for o in observations]
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else None


def fitted_span(
    values: Sequence[float], seen: tuple[float, float] | None
) -> tuple[int, int] | None:
    """The first and last grid index within the range `seen` (None: nothing of it on the
    grid)."""
    if seen is None:
        return None
    lo, hi = seen
    inside = [i for i, v in enumerate(values) if lo * (1 - _SAME) <= v <= hi * (1 + _SAME)]
    return (inside[0], inside[-1]) if inside else None
