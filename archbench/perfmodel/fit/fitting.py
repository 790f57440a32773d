"""Fitting what the calibration leaves open on part of a study, and scoring on the rest.

What a microbenchmark can measure is measured (`archbench.perfmodel.measure`), and each
model's compute and update come from the study's own `single` runs; a fit only adds the few
terms no microbenchmark measures (a per-step overhead, the share of communication hidden
behind compute, ...), and only those the fitted configurations identify: a term no fitted
configuration depends on, or one the configurations cannot tell apart from a term already
fitted (too few of them, or the same effect on each), keeps its calibrated value and is named
as kept, with the reason; so is a term the fit puts back on the bound it started from, and the
terms it hid are tried again without it. Terms whose physics is shared (the links' efficiency)
are one value for every architecture.

The split is by configuration (repetitions of one configuration never straddle it): by worker
count (the default: fit on W <= cut, score every W above it), by link rate, by a record field,
or at random per architecture variant; the scored set is checked to share no configuration and
no run with the fitted set.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import mean, median
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from archbench.common.archs import has_servers
from archbench.common.bandwidth import parse_bandwidth
from archbench.common.errors import UsageError
from archbench.perfmodel.fit.records import Observation
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine, fit_compute_line
from archbench.perfmodel.model.inputs import is_asynchronous_key, key_family
from archbench.perfmodel.model.predictor import ArchParams, ModelParams, predict_step
from archbench.record.schema import placement_of

SINGLE = "single"
# Architectures whose exchange can start during the backward pass: Horovod allreduces each
# gradient as the tape produces it, and a PS graph pushes each as it is computed; p2p exchanges
# the flattened gradient after the backward pass, so nothing of it can hide.
OVERLAPPING = ("ring", "ps")


@dataclass(frozen=True)
class Split:
    train: list[Observation]
    test: list[Observation]
    rule: str

    def check_disjoint(self) -> None:
        """No configuration and no run may be both fitted and scored."""
        train_keys = {o.config_key for o in self.train}
        train_runs = {o.run_id for o in self.train}
        for obs in self.test:
            if obs.config_key in train_keys or obs.run_id in train_runs:
                raise AssertionError(f"run {obs.run_id} is both fitted and scored")


def _by_config(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        groups[obs.config_key].append(obs)
    return groups


def _split(observations: Sequence[Observation], fitted, rule: str) -> Split:
    """Fit the configurations any of whose runs `fitted` picks, score the rest."""
    train_keys = {o.config_key for o in observations if fitted(o)}
    train = [o for o in observations if o.config_key in train_keys]
    test = [o for o in observations if o.config_key not in train_keys]
    split = Split(train, test, rule)
    split.check_disjoint()
    return split


def split_workers(observations: Sequence[Observation], cut: int = 2) -> Split:
    """Fit on every configuration with at most `cut` workers (`single` counts one), score every
    configuration above it: what a user who has `cut` workers wants to know of more."""
    if cut < 1:
        raise UsageError(f"--cut must be at least 1 worker, got {cut}")
    return _split(
        observations,
        lambda o: o.config.num_workers <= cut,
        f"workers: fit W <= {cut}, score W > {cut}",
    )


def split_link(observations: Sequence[Observation], train_link: str | None = None) -> Split:
    """Fit on the runs at one link rate (default: the fastest in the study; `single`, which
    uses no link, goes with it), score those at every other rate."""

    rates = sorted({o.config.bandwidth_bits for o in observations if o.config.bandwidth_bits})
    if not rates:
        raise UsageError("no run of the study names its link rate (cluster.link)")
    bits = parse_bandwidth(train_link) if train_link else rates[-1]
    if bits not in rates:
        have = ", ".join(f"{r / 1e6:g}Mbit" for r in rates)
        raise UsageError(f"no run has link {train_link} (the study has {have})")
    return _split(
        observations,
        lambda o: o.config.bandwidth_bits in (bits, None) or o.config.arch == SINGLE,
        f"link: fit at {bits / 1e6:g} Mbit/s, score the other rates",
    )


def split_random(observations: Sequence[Observation], train_fraction: float, seed: int) -> Split:
    """Per architecture variant, a seeded random `train_fraction` of its configurations is
    fitted and the rest scored (at least one of each side when the variant has two)."""
    if not 0.0 < train_fraction < 1.0:
        raise UsageError(f"--train-fraction must be between 0 and 1, got {train_fraction}")
    rng = random.Random(seed)
    by_variant: dict[str, list[str]] = defaultdict(list)
    groups = _by_config(observations)
    for key, members in sorted(groups.items()):
        by_variant[members[0].arch_key].append(key)
    train_keys: set[str] = set()
    for _variant, keys in sorted(by_variant.items()):
        rng.shuffle(keys)
        count = round(len(keys) * train_fraction)
        if len(keys) >= 2:
            count = min(max(count, 1), len(keys) - 1)
        else:
            count = len(keys)  # a lone configuration can only teach, not be scored
        train_keys.update(keys[:count])
    return _split(
        observations,
        lambda o: o.config_key in train_keys,
        f"random {train_fraction:g} of configurations per variant, seed {seed}",
    )


def split_where(observations: Sequence[Observation], field_name: str, value: str) -> Split:
    """Fit on the runs whose record field (dotted, e.g. cluster.link) equals `value`; score
    on the others (e.g. fit at one bandwidth, predict another)."""

    def matches(obs: Observation) -> bool:
        current: object = obs.record
        for part in field_name.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        return str(current) == value

    if not any(matches(o) for o in observations):
        raise UsageError(f"no run has {field_name} == {value!r}")
    return _split(observations, matches, f"fit where {field_name} == {value}")


# --------------------------------------------------------------------------- measured from the study


def study_compute(
    train: Sequence[Observation], calib: Calibration
) -> tuple[dict[str, ComputeLine], dict[str, str]]:
    """Each model's compute line and update, measured by the fitted runs themselves: the
    `single` baseline's (compute = forward and backward, update = the rest of its step), and
    for each architecture the compute its own fitted runs measured (`ARCH:MODEL`: a PS worker
    computes in a TensorFlow graph session, ring and p2p in Keras as `single` does, and each
    measures its own probe); the source of each in words. A model without a `single` run takes
    its update from the calibration (or none)."""
    lines: dict[str, ComputeLine] = {}
    sources: dict[str, str] = {}
    measured = [o for o in train if o.compute_s]
    for model in sorted({o.config.model for o in measured}):
        mine = [o for o in measured if o.config.model == model]
        singles = [o for o in mine if o.config.arch == SINGLE]
        known = calib.compute.get(model)
        if singles:
            update = median(max(o.step_s - o.compute_s, 0.0) for o in singles)
            update_source = "update from single"
        else:
            update = known.update_s if known else 0.0
            update_source = "update " + ("from the calibration" if known else "not measured (0)")
        for arch in sorted({o.config.arch for o in mine}):
            runs = [o for o in mine if o.config.arch == arch]
            line = fit_compute_line(
                [o.config.batch_size for o in runs], [o.compute_s for o in runs]
            )
            key = model if arch == SINGLE else f"{arch}:{model}"
            lines[key] = replace(line, update_s=update)
            sources[key] = f"{len(runs)} {arch} run(s); {update_source}"
        if model not in lines:  # no single baseline: the distributed runs' compute, pooled
            line = fit_compute_line(
                [o.config.batch_size for o in mine], [o.compute_s for o in mine]
            )
            lines[model] = replace(line, update_s=update)
            sources[model] = f"{len(mine)} run(s) of every architecture; {update_source}"
    return lines, sources


# --------------------------------------------------------------------------- the terms


@dataclass(frozen=True)
class Term:
    """A free parameter (an ArchParams field) of one or more architecture variants (shared
    when several: one value for all)."""

    field: str
    keys: tuple[str, ...]
    scale: float  # a natural unit: the optimiser works on value / scale
    lower: float
    upper: float
    start: float  # the value it keeps when not fitted
    words: str | None = None  # its name, where the field's usual words do not say what it is
    # the name (in Calibration.measured) of the measurement that gives its value: not fitted
    # again when the calibration has it
    calibrated_by: str | None = None

    @property
    def name(self) -> str:
        return f"{self.words or TERM_WORDS[self.field]} [{', '.join(self.keys)}]"


def _unit(term: Term) -> str:
    units = {"overhead_s": ("ms", 1e3), "gamma_s_per_byte": ("ns/B", 1e9), "alpha_s": ("us", 1e6)}
    word, factor = units.get(term.field, ("", 1.0))
    return f"{term.scale * factor:g}{(' ' + word) if word else ''}"


TERM_WORDS = {
    "overhead_s": "per-step overhead",
    "efficiency": "link efficiency",
    "overlap": "overlap with compute",
    "gamma_s_per_byte": "host per-byte work",
    "alpha_s": "extra per-message latency",
    "pull_stagger": "pulls served in turn",
}
# Fit terms a calibration can measure (ArchParams field -> the name in Calibration.measured):
# the links' efficiency is the between-host ping-pong's rate over the shaped link's.
CALIBRATED = {"link_efficiency": "the between-host ping-pong's rate on the shaped link"}
# A term whose largest effect on any fitted configuration's step, over one unit of its scale, is
# below this share is not identified by the data.
SENSITIVITY = 0.01
# Two terms are told apart only if their effects on the fitted configurations are this far
# from parallel: the smallest singular value of their unit-normed columns (0: the same effect,
# 1: independent).
SEPARATION = 0.25
# A fitted term within this share of its scale of the bound it started from is on the bound.
PINNED = 1e-3


def candidate_terms(keys: Sequence[str]) -> list[Term]:
    """The terms a fit may add, in the order it tries them: a fixed overhead per step of each
    architecture variant (physics the microbenchmarks do not time: the framework's own step),
    the links' efficiency (shared: every architecture's bytes cross the same links), how far a
    synchronous PS's pulls are served in turn, the share of communication each that can
    (OVERLAPPING) hides behind compute, the host's per-byte work (shared: the copies and sums
    of ring and p2p run on the same cores), and an extra per-message latency."""
    distributed = sorted(k for k in keys if k != SINGLE)
    terms = [Term("overhead_s", (k,), 1e-3, 0.0, 10.0, 0.0) for k in distributed]
    if distributed:
        terms.append(
            Term("efficiency", tuple(distributed), 1.0, 0.5, 20.0, 1.0, None, "link_efficiency")
        )
    # How far a synchronous PS's servers send the pulls one worker after another: a worker
    # whose pull ended computes and pushes while the others still pull. It needs several
    # workers on one server's link, and no microbenchmark of one worker measures it.
    terms += [
        Term("pull_stagger", (k,), 1.0, 0.0, 1.0, 0.0)
        for k in distributed
        if has_servers(key_family(k)) and not is_asynchronous_key(k)
    ]
    terms += [
        Term("overlap", (k,), 1.0, 0.0, 1.0, 0.0)
        for k in distributed
        if key_family(k) in OVERLAPPING
    ]
    reducing = tuple(k for k in distributed if not has_servers(key_family(k)))
    if reducing:
        terms.append(Term("gamma_s_per_byte", reducing, 1e-9, 0.0, 100.0, 0.0))
    terms += [Term("alpha_s", (k,), 1e-4, 0.0, 100.0, 0.0) for k in distributed]
    return terms


def _params_with(base: ModelParams, terms: Sequence[Term], values: Sequence[float]) -> ModelParams:
    arch = {key: replace(value) for key, value in base.arch.items()}
    for term, value in zip(terms, values, strict=True):
        for key in term.keys:
            arch[key] = replace(arch.get(key, ArchParams()), **{term.field: value})
    return ModelParams(arch=arch, cpu_contention=base.cpu_contention, compute=base.compute)


@dataclass
class TermFit:
    term: Term
    value: float
    fitted: bool
    configurations: int  # fitted configurations whose step depends on the term
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "term": self.term.name, "field": self.term.field, "keys": list(self.term.keys),
            "value": self.value, "fitted": self.fitted, "configurations": self.configurations,
            "reason": self.reason,
        }  # fmt: skip


@dataclass
class FitResult:
    params: ModelParams
    terms: list[TermFit] = field(default_factory=list)
    compute_sources: dict[str, str] = field(default_factory=dict)
    configurations: int = 0


def _medians(observations: Sequence[Observation]) -> list[tuple[Observation, float]]:
    return [
        (members[0], float(median(o.step_s for o in members)))
        for _key, members in sorted(_by_config(observations).items())
    ]


def identify(
    configs: Sequence[tuple[Observation, float]],
    candidates: Sequence[Term],
    base: ModelParams,
    calib: Calibration,
) -> list[TermFit]:
    """Which candidate terms the configurations identify, in order: each term's effect on every
    configuration's predicted step (relative, over one unit of its scale) must reach SENSITIVITY
    somewhere, and must not be (nearly) parallel to the effects of the terms already chosen."""

    def log_steps(params: ModelParams) -> np.ndarray:
        return np.log([predict_step(obs.config, params, calib).step_s for obs, _ in configs])

    starts = [t.start for t in candidates]
    at_start = log_steps(_params_with(base, candidates, starts))
    columns = []
    for index, term in enumerate(candidates):
        moved = list(starts)
        step = (
            0.1 * term.scale if term.upper - term.start >= 0.1 * term.scale else -0.1 * term.scale
        )
        moved[index] += step
        columns.append((log_steps(_params_with(base, candidates, moved)) - at_start) * 10.0)
    chosen: list[int] = []
    out = []
    for index, term in enumerate(candidates):
        column = columns[index]
        affected = int(np.sum(np.abs(column) > 1e-9))
        if np.max(np.abs(column)) < SENSITIVITY:
            moves = f"{SENSITIVITY:.0%} over {_unit(term)}"
            out.append(TermFit(term, term.start, False, affected,
                               f"no fitted configuration's step moves by {moves}"))  # fmt: skip
            continue
        trial = [columns[i] / np.linalg.norm(columns[i]) for i in [*chosen, index]]
        values = np.linalg.svd(np.stack(trial, axis=1), compute_uv=False)
        # more terms than configurations: as many singular values as configurations only
        smallest = values[-1] if len(values) == len(trial) else 0.0
        if smallest < SEPARATION:
            rivals = [
                candidates[i].name
                for i in chosen
                if np.any((np.abs(columns[i]) > 1e-9) & (np.abs(column) > 1e-9))
            ]
            spent = len(rivals) + 1 > affected
            reason = (
                f"{affected} fitted configuration(s) depend on it, fewer than the "
                f"{len(rivals) + 1} terms that would share them ({', '.join(rivals)})"
                if spent
                else f"the {affected} fitted configuration(s) cannot tell it from "
                f"{', '.join(rivals) or 'the terms already fitted'}"
            )
            out.append(TermFit(term, term.start, False, affected, reason))
            continue
        chosen.append(index)
        out.append(TermFit(term, term.start, True, affected))
    return out


def _solve(
    chosen: Sequence[TermFit],
    configs: Sequence[tuple[Observation, float]],
    base: ModelParams,
    calib: Calibration,
) -> None:
    """Fit the chosen terms all at once on the relative error of each configuration's median
    step, robust to a configuration the formulas miss (soft L1); sets each row's value."""
    if not chosen:
        return
    terms = [r.term for r in chosen]

    def residuals(x: np.ndarray) -> np.ndarray:
        params = _params_with(base, terms, [v * t.scale for v, t in zip(x, terms)])
        return np.asarray(
            [
                (predict_step(obs.config, params, calib).step_s - measured) / measured
                for obs, measured in configs
            ]
        )

    lower = [t.lower / t.scale for t in terms]
    upper = [t.upper / t.scale for t in terms]
    x0 = np.clip([t.start / t.scale for t in terms], lower, upper)
    # strictly inside the bounds, so the solver can move a term that starts on one (a
    # hundredth of a unit of its scale in, at most a thousandth of its range)
    inset = [min(0.01, 1e-3 * (hi - lo)) for lo, hi in zip(lower, upper)]
    x0 = [min(max(v, lo + d), hi - d) for v, lo, hi, d in zip(x0, lower, upper, inset)]
    solution = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.1).x
    for row, value in zip(chosen, solution, strict=True):
        row.value = float(value * row.term.scale)


def _pinned(row: TermFit) -> bool:
    """A fitted term the data put back on the bound it started from (no overhead, no
    overlap, ...): the data move it no further, so it spends none of their information."""
    term = row.term
    on_bound = term.start in (term.lower, term.upper)
    return row.fitted and on_bound and abs(row.value - term.start) < PINNED * term.scale


def fit_model(train: Sequence[Observation], calib: Calibration) -> FitResult:
    """Compute and update from the study's runs, then the identified terms, all at once, on the
    relative error of each fitted configuration's median step.

    Identification looks at each term's effect at its starting value, where every term is
    free; a term the fit then puts back on its starting bound was not free after all, and
    a later term kept for looking like it may be told apart without it. So such a term is
    kept at its start, by name, and identification and the fit run again without it (until
    no fitted term lands on its bound)."""
    compute, sources = study_compute(train, calib)
    base = ModelParams(compute=compute)
    configs = _medians(train)
    candidates = candidate_terms(sorted({obs.arch_key for obs, _ in configs}))
    # a term the calibration measured is not fitted again: a fit would only move it to absorb
    # whatever the formulas miss elsewhere (one architecture's error spilling into the others')
    measured = [t for t in candidates if t.calibrated_by in calib.measured]
    candidates = [t for t in candidates if t not in measured]
    on_bound: list[TermFit] = []
    while True:
        settled = {r.term for r in on_bound}
        free = [t for t in candidates if t not in settled]
        report = identify(configs, free, base, calib)
        chosen = [r for r in report if r.fitted]
        _solve(chosen, configs, base, calib)
        pinned = [r for r in chosen if _pinned(r)]
        if not pinned:
            break
        on_bound += [
            TermFit(r.term, r.term.start, False, r.configurations,
                    f"the fit put it on its bound ({r.term.start:g}): fitted without it")
            for r in pinned
        ]  # fmt: skip
    report += on_bound
    report += [
        TermFit(
            t, t.start, False, 0, f"measured by the calibration ({CALIBRATED[t.calibrated_by]})"
        )
        for t in measured
    ]
    # in the order the terms are tried, whatever the pass that settled them
    order = {t: i for i, t in enumerate([*candidates, *measured])}
    report.sort(key=lambda r: order[r.term])
    params = _params_with(base, [r.term for r in report], [r.value for r in report])
    # a variant the fitted part never ran takes its family's parameters when only one of the
    # family's variants was fitted
    families: dict[str, set[str]] = defaultdict(set)
    for key in params.arch:
        families[key_family(key)].add(key)
    for family, keys in families.items():
        if family not in params.arch and len(keys) == 1:
            params.arch[family] = params.arch[next(iter(keys))]
    return FitResult(params, report, sources, len(configs))


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Scored:
    """A held-out configuration: its median measured step and the prediction."""

    config_key: str
    arch_key: str
    arch: str
    model: str
    label: str
    measured_s: float
    predicted_s: float
    predicted_compute_s: float
    predicted_comm_s: float
    runs: int
    # how far a repetition is from the mean of the others, on average (None: one run)
    noise: float | None = None

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s


def describe(obs: Observation) -> str:
    c = obs.config
    bits = c.bandwidth_bits
    link = "lo" if bits is None else f"{bits / 1e6:g}Mbit"
    extra = ""
    if c.placement.ps_hosts:
        hosts, roles = list(c.placement.hosts), list(c.placement.roles)
        # every process on one host crosses no link: a configuration of its own
        where = "one-host" if len(set(hosts)) == 1 else placement_of(hosts, roles)
        extra = f" ps={c.num_ps} {where} {'sync' if c.sync else 'async'} {c.ps_sharding}"
    elif c.key != c.arch:  # a variant of its architecture (the p2p schedule)
        extra = f" {c.key.split('-', 1)[1]}"
    return f"{c.arch} {c.model} W={c.num_workers} b={c.batch_size} {link}{extra}"


def score(
    observations: Sequence[Observation], params: ModelParams, calib: Calibration
) -> list[Scored]:
    """Predictions for each configuration among `observations` against its median step."""
    rows = []
    for key, members in sorted(_by_config(observations).items()):
        first = members[0]
        pred = predict_step(first.config, params, calib)
        rows.append(
            Scored(
                config_key=key,
                arch_key=first.arch_key,
                arch=first.config.arch,
                model=first.config.model,
                label=describe(first),
                measured_s=float(median(o.step_s for o in members)),
                predicted_s=pred.step_s,
                predicted_compute_s=pred.compute_s,
                predicted_comm_s=pred.exposed_comm_s,
                runs=len(members),
                noise=noise_floor([o.step_s for o in members]),
            )
        )
    return rows


def noise_floor(values: Sequence[float]) -> float | None:
    """How far a repetition is from the mean of the others, relative to that mean, averaged
    over the repetitions: the error a perfect model would still show against one run."""
    if len(values) < 2:
        return None
    deviations = []
    for index, value in enumerate(values):
        others = mean(v for i, v in enumerate(values) if i != index)
        deviations.append(abs(value - others) / others)
    return float(mean(deviations))


def error_summary(rows: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    """MAPE, worst absolute percentage error and noise floor per architecture, per architecture
    and model ("ps / mlp"), and over all."""
    groups: dict[str, list[Scored]] = defaultdict(list)
    for row in rows:
        groups[row.arch].append(row)
        groups[f"{row.arch} / {row.model}"].append(row)
        groups["all"].append(row)
    summary = {}
    for name, members in sorted(groups.items()):
        errors = [abs(r.error) * 100 for r in members]
        worst = max(members, key=lambda r: abs(r.error))
        noises = [r.noise * 100 for r in members if r.noise is not None]
        summary[name] = {
            "configurations": len(members),
            "mape_pct": float(np.mean(errors)),
            "worst_pct": float(max(errors)),
            "worst_config": worst.label,
            # how far one repetition is from the mean of the others: the floor under any model
            "noise_floor_pct": float(np.mean(noises)) if noises else None,
        }
    return summary
