"""Fitting the few free parameters on part of a study, and scoring on the rest.

The split is by configuration (repetitions of one configuration never straddle it), stratified
by architecture variant, and the scored set is checked to share no configuration and no run
with the fitted set.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np
from scipy.optimize import least_squares

from archbench.errors import UsageError
from archbench.perfmodel.fit.records import Observation
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine
from archbench.perfmodel.model.predictor import ArchParams, ModelParams, predict_step

# Free parameters per architecture variant: (name, scale, lower, upper, prior). The optimiser
# works on value / scale so that every unknown is of order one.
ARCH_PARAMETERS = (
    ("alpha_s", 1e-3, 0.0, 200.0, 0.0),
    # a link cannot be beaten by much (tc tbf only lets a short burst through faster)
    ("efficiency", 1.0, 0.9, 20.0, 1.0),
    ("gamma_s_per_byte", 1e-9, 0.0, 100.0, 0.0),
    ("overlap", 1.0, 0.0, 1.0, 0.0),
)
# Weight of the pull toward the prior of each parameter: small, it only settles what the data
# cannot tell apart (e.g. efficiency vs gamma when a study has a single bandwidth).
PRIOR_WEIGHT = 0.02
# Weight of a microbench compute time (one process alone) against one run's compute time.
ANCHOR_WEIGHT = 1.0


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
    train = [o for o in observations if o.config_key in train_keys]
    test = [o for o in observations if o.config_key not in train_keys]
    split = Split(
        train, test, f"random {train_fraction:g} of configurations per variant, seed {seed}"
    )
    split.check_disjoint()
    return split


def split_where(observations: Sequence[Observation], field: str, value: str) -> Split:
    """Fit on the runs whose record field (dotted, e.g. cluster.link) equals `value`; score
    on the others (e.g. fit at one bandwidth, predict another)."""

    def matches(obs: Observation) -> bool:
        current: object = obs.record
        for part in field.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        return str(current) == value

    train = [o for o in observations if matches(o)]
    if not train:
        raise UsageError(f"no run has {field} == {value!r}")
    train_keys = {o.config_key for o in train}
    test = [o for o in observations if o.config_key not in train_keys]
    split = Split(train, test, f"fit where {field} == {value}")
    split.check_disjoint()
    return split


# ---------------------------------------------------------------------------------------------


def _solve(
    residuals: Callable[[np.ndarray], np.ndarray], start: Sequence[float], bounds: tuple
) -> np.ndarray:
    lower, upper = (np.asarray(b, dtype=float) for b in bounds)
    x0 = np.clip(np.asarray(start, dtype=float), lower, upper)
    result = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.2)
    return result.x


def fit_compute(
    observations: Sequence[Observation], calib: Calibration
) -> tuple[dict[str, ComputeLine], float | None]:
    """Per-model compute lines and the CPU-sharing slow-down, from measured compute times
    (none: the calibration's are kept)."""
    with_compute = [o for o in observations if o.compute_s]
    models = sorted({o.config.model for o in with_compute})
    if not models:
        return {}, None
    start: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    scales: list[float] = []
    for model in models:
        mine = [o for o in with_compute if o.config.model == model]
        scale = median(o.compute_s / o.config.batch_size for o in mine)  # type: ignore[operator]
        prior = calib.compute.get(model)
        scales.append(scale)
        start += [
            prior.fixed_s / scale / 100 if prior else 0.0,
            prior.per_sample_s / scale if prior else 0.5,
        ]
        lower += [0.0, 0.0]
        upper += [1e6, 1e3]
    start.append(calib.cpu_contention or 0.1)  # contention per extra process
    lower.append(0.0)
    upper.append(5.0)

    def unpack(x: np.ndarray) -> tuple[dict[str, ComputeLine], float]:
        lines = {
            m: ComputeLine(
                fixed_s=x[2 * i] * scales[i] * 100, per_sample_s=x[2 * i + 1] * scales[i]
            )
            for i, m in enumerate(models)
        }
        return lines, float(x[-1])

    def residuals(x: np.ndarray) -> np.ndarray:
        lines, kappa = unpack(x)
        out = []
        for obs in with_compute:
            sharing = max(obs.config.cpu_sharing_ranks, 1)
            pred = lines[obs.config.model].seconds(obs.config.batch_size) * (
                1 + kappa * (sharing - 1)
            )
            out.append((pred - obs.compute_s) / obs.compute_s)  # type: ignore[operator]
        # weak pull of the fixed costs toward zero: with one batch size per model they are
        # not identifiable, and per-sample cost is the better guess for other batch sizes
        out.extend(PRIOR_WEIGHT * x[0 : 2 * len(models) : 2])
        # a model timed alone by microbench anchors the line at one process, so that the
        # study's runs (all with several processes) can tell the slow-down apart
        for model, batch, alone_s in anchors:
            out.append(ANCHOR_WEIGHT * (lines[model].seconds(batch) - alone_s) / alone_s)
        return np.asarray(out)

    anchors = [
        (model, batch, calib.compute[model].seconds(batch))
        for model in models
        if model in calib.compute
        for batch in sorted({o.config.batch_size for o in with_compute if o.config.model == model})
        if calib.compute[model].seconds(batch) > 0
    ]

    x = _solve(residuals, start, (lower, upper))
    return unpack(x)


def fit_arch(
    observations: Sequence[Observation], params: ModelParams, calib: Calibration
) -> ArchParams:
    """The four free parameters of one architecture variant, on relative step-time error."""

    def build(x: np.ndarray) -> ArchParams:
        values = {name: x[i] * scale for i, (name, scale, *_rest) in enumerate(ARCH_PARAMETERS)}
        return ArchParams(**values)

    def residuals(x: np.ndarray) -> np.ndarray:
        candidate = build(x)
        out = []
        for obs in observations:
            trial = ModelParams(
                arch={obs.arch_key: candidate},
                cpu_contention=params.cpu_contention,
                compute=params.compute,
            )
            pred = predict_step(obs.config, trial, calib).step_s
            out.append((pred - obs.step_s) / obs.step_s)
        priors = [
            PRIOR_WEIGHT * (x[i] - prior / scale) / max(upper, 1.0)
            for i, (_n, scale, _lo, upper, prior) in enumerate(ARCH_PARAMETERS)
        ]
        return np.asarray(out + priors)

    start = [prior / scale for (_n, scale, _lo, _up, prior) in ARCH_PARAMETERS]
    start[3] = 0.2  # start overlap off its bound so the solver can move it
    bounds = ([p[2] for p in ARCH_PARAMETERS], [p[3] for p in ARCH_PARAMETERS])
    return build(_solve(residuals, start, bounds))


def fit_model(observations: Sequence[Observation], calib: Calibration) -> ModelParams:
    """Compute first (on measured compute times), then each architecture variant, then each
    family pooled (used for a variant the fitted part of the study never ran)."""
    compute, kappa = fit_compute(observations, calib)
    params = ModelParams(cpu_contention=kappa, compute=compute)
    variants: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        variants[obs.arch_key].append(obs)
    families: dict[str, list[Observation]] = defaultdict(list)
    for key, members in variants.items():
        params.arch[key] = fit_arch(members, params, calib)
        families[key.split("-")[0]].extend(members)
    for family, members in families.items():
        if family in params.arch:
            continue
        keys = {o.arch_key for o in members}
        # fit_arch scores each run under its own variant key, so one set fits them all
        params.arch[family] = (
            params.arch[keys.pop()] if len(keys) == 1 else fit_arch(members, params, calib)
        )
    return params


# ---------------------------------------------------------------------------------------------


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
    spread: float | None = None  # (slowest - fastest) / median over its repetitions

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s


def describe(obs: Observation) -> str:
    c = obs.config
    bits = c.bandwidth_bits
    link = "lo" if bits is None else f"{bits / 1e6:g}Mbit"
    extra = ""
    if c.placement.ps_hosts:
        shared = set(c.placement.ps_hosts) & set(c.placement.worker_hosts)
        where = "colocated" if shared else "dedicated"
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
                spread=_spread([o.step_s for o in members]),
            )
        )
    return rows


def _spread(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / float(median(values))


def error_summary(rows: Sequence[Scored]) -> dict[str, dict[str, float]]:
    """MAPE and worst absolute percentage error per architecture, per architecture and
    model ("ps / mlp"), and over all."""
    groups: dict[str, list[Scored]] = defaultdict(list)
    for row in rows:
        groups[row.arch].append(row)
        groups[f"{row.arch} / {row.model}"].append(row)
        groups["all"].append(row)
    summary = {}
    for name, members in sorted(groups.items()):
        errors = [abs(r.error) * 100 for r in members]
        worst = max(members, key=lambda r: abs(r.error))
        spreads = [r.spread * 100 for r in members if r.spread is not None]
        summary[name] = {
            "configurations": len(members),
            "mape_pct": float(np.mean(errors)),
            "worst_pct": float(max(errors)),
            "worst_config": worst.label,
            # how far repetitions of one configuration disagree: the floor under any model
            "repeat_spread_pct": float(np.mean(spreads)) if spreads else None,
        }
    return summary
