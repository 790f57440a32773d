"""From design points to the runs of a study: normalised configurations, run ids and run order.

A configuration holds every setting that applies to its architecture (fixed settings, factor
levels, launch defaults); settings that do not apply are dropped, and configurations that become
identical are measured once. A run is a configuration plus a repetition; its id is a stable hash of
both (and of the cluster kind), so the same spec always names the same runs.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from archbench.common.archs import MULTI_PROCESS
from archbench.common.archs import arch as architecture
from archbench.common.errors import UsageError
from archbench.runtime.probes import too_short
from archbench.runtime.settings import PLACEMENT_POLICIES, SETTINGS, applies, combination_problem
from archbench.sweep import commands, design
from archbench.sweep.kinds import kind_of
from archbench.sweep.limits import MAX_DESIGN_POINTS, MAX_RUNS
from archbench.sweep.spec import Design, StudySpec
from archbench.sweep.target import ClusterTarget

# Launch defaults for multi-process runs when the study does not set them (the registry's).
DEFAULT_WORKERS = SETTINGS["workers"].default
DEFAULT_PLACEMENT = SETTINGS["placement"].default
DEFAULT_LAUNCHER = SETTINGS["launcher"].default


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    repetition: int
    config: dict[str, Any]  # every setting of this run, train and launch, in catalogue order
    factors: dict[str, Any]  # the factor levels that picked this configuration
    layout: tuple[tuple[str, int], ...]  # (host, ranks) in rank order
    timeout_s: float
    # Started by a launcher from a hostfile: every multi-process run, and on a cluster (emulated,
    # Slurm) also `single`, so the baseline runs on a node, inside that node's CPU budget.
    launched: bool = True
    traced: bool = False  # writes a timeline (the study's or its `also:` block's `timeline:`)

    @property
    def arch(self) -> str:
        return self.config["arch"]

    @property
    def num_ps(self) -> int:
        return architecture(self.arch).servers(self.config.get("num_ps"))

    @property
    def num_workers(self) -> int:
        return self.config.get("workers", 1) if architecture(self.arch).multi_process else 1

    @property
    def world_size(self) -> int:
        return architecture(self.arch).processes(
            self.num_workers, self.config.get("num_ps"), self.config.get("companions", 0)
        )


@dataclass
class StudyPlan:
    spec: StudySpec
    target: ClusterTarget
    runs: list[PlannedRun]
    design_points: int = 0
    configurations: int = 0
    notes: list[str] = field(default_factory=list)


def describe(config: dict[str, Any], keys: list[str] | None = None) -> str:
    """`arch=ps workers=4 num_ps=1` for messages."""
    keys = keys or [k for k in ("arch", "model", "workers", "num_ps", "placement") if k in config]
    return " ".join(f"{key}={config[key]}" for key in keys if key in config)


@dataclass(frozen=True)
class DesignPart:
    """Design points and what they share: the study's own design, or one `also:` block."""

    fixed: dict[str, Any]
    points: list[dict[str, Any]]
    exclude: list[dict[str, Any]]
    repetitions: int
    traced: bool


def design_parts(spec: StudySpec) -> list[DesignPart]:
    """The study's design, then each `also:` block's full factorial over its fixed settings;
    UsageError, before any is built, when together they hold more than MAX_DESIGN_POINTS."""
    whole = Design("full_factorial")
    points = design.count(spec.design, spec.factors)
    points += sum(design.count(whole, block.factors) for block in spec.also)
    if points > MAX_DESIGN_POINTS:
        raise UsageError(
            f"study {spec.name}: its design and also: blocks give {points:,} design points; a "
            f"study has at most {MAX_DESIGN_POINTS:,}"
        )
    parts = [
        DesignPart(
            spec.fixed,
            design.expand(spec.design, spec.factors, spec.seed),
            spec.exclude,
            spec.repetitions,
            spec.timeline,
        )
    ]
    for block in spec.also:
        points = design.full_factorial(block.factors) if block.factors else [{}]
        fixed = {**spec.fixed, **block.fixed}
        parts.append(DesignPart(fixed, points, [], block.repetitions, block.timeline))
    return parts


def varied_settings(spec: StudySpec) -> list[str]:
    """What varies across the study: its factors, then each `also:` block's factors and the
    fixed settings where a block differs from the study. Each run's record lists its level of
    each (`sweep.factors`), so the report compares a block's runs with the rest."""
    names = dict.fromkeys(spec.factors)
    for block in spec.also:
        names.update(dict.fromkeys(block.factors))
        names.update(
            (name, None) for name, value in block.fixed.items() if spec.fixed.get(name) != value
        )
    return list(names)


def _levels_of(names: list[str], listed: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """A run's level of each varied setting its own design point did not name: its
    configuration's, else the setting's default where it applies to the run's architecture."""
    levels = {}
    for name in names:
        if name in listed:
            continue
        if name in config:
            levels[name] = config[name]
        elif SETTINGS[name].default is not None and applies(name, config["arch"]):
            levels[name] = SETTINGS[name].default
    return levels


def normalise(
    point: dict[str, Any],
    spec: StudySpec,
    target: ClusterTarget,
    fixed: dict[str, Any] | None = None,
    traced: bool | None = None,
) -> dict[str, Any]:
    """The configuration a design point runs as, or UsageError when it cannot run at all.
    `fixed` and `traced` are the study's unless given (an `also:` block's)."""
    traced = spec.timeline if traced is None else traced
    merged = {**(spec.fixed if fixed is None else fixed), **point}
    arch = merged.get("arch", "single")
    config: dict[str, Any] = {"arch": arch}
    for name, value in merged.items():
        # None: a setting left unset (a `null` level), the same run as not naming it
        if name != "arch" and value is not None and applies(name, arch, value):
            config[name] = value
    if arch in MULTI_PROCESS:
        config.setdefault("workers", DEFAULT_WORKERS)
        # Gloo runs only under horovodrun, so a gloo level brings its launcher along.
        gloo = config.get("controller") == "gloo"
        config.setdefault("launcher", "horovodrun" if gloo else DEFAULT_LAUNCHER)
        if architecture(arch).has_servers:
            config.setdefault("num_ps", SETTINGS["num_ps"].default)
        if target.one_host and config.get("placement", "spread") in PLACEMENT_POLICIES:
            config.pop("placement", None)  # every rank is on the one host whatever the policy
        else:
            config.setdefault("placement", DEFAULT_PLACEMENT)
        if kind_of(target).shapes_links:
            if "bandwidth" not in config and target.bandwidth:
                config["bandwidth"] = target.bandwidth
        elif "bandwidth" in config:
            raise UsageError(
                f"bandwidth={config['bandwidth']} needs the emulated cluster (--cluster emulated), "
                f"not {target.kind}"
            )
    elif spec.baseline_load == "loaded" and int(merged.get("workers") or 1) > 1:
        # The baseline of a W-worker comparison, measured with W - 1 companions beside it.
        config.setdefault("companions", int(merged["workers"]) - 1)
    if "epochs" in config and "steps" in config:
        raise UsageError(f"configuration {describe(config)} sets both epochs and steps; keep one")
    if config.get("controller") == "gloo" and config.get("launcher") != "horovodrun":
        raise UsageError(
            f"configuration {describe(config)}: controller gloo needs launcher horovodrun"
        )
    _check_model(config)
    problem = combination_problem(config) or (_untraceable(config) if traced else None)
    if problem:
        raise UsageError(f"configuration {describe(config)}: {problem}")
    order = list(SETTINGS)
    return {name: config[name] for name in sorted(config, key=order.index)}


def _untraceable(config: dict[str, Any]) -> str | None:
    """`timeline: true`: why a run of --steps cannot be traced (with --epochs the run itself
    says so: its length depends on the data)."""
    if config.get("steps") is None:
        return None

    length = ("warmup_steps", "probe_every", "timeline_steps")
    return too_short(config["steps"], *(config.get(n, SETTINGS[n].default) for n in length))


def _check_model(config: dict[str, Any]) -> None:
    # deferred: archbench.workloads.models loads numpy
    from archbench.workloads.models import check_model_name

    try:
        check_model_name(config.get("model", "mlp"), config.get("dataset", "fashion_mnist"))
    except UsageError as exc:
        raise UsageError(
            f"configuration {describe(config, ['arch', 'model', 'dataset'])}: {exc}"
        ) from None


def matches(pattern: dict[str, Any], config: dict[str, Any]) -> bool:
    return all(key in config and config[key] == value for key, value in pattern.items())


def run_id_for(
    config: dict[str, Any], repetition: int, cluster_kind: str, traced: bool | None = None
) -> str:
    """Stable id: `<arch>-<10 hex digits of the configuration's hash>-r<repetition>`. `traced`
    is given only for a run traced otherwise than the rest of its study (an `also:` block's
    `timeline:`), so that a traced and an untraced run of one configuration are two runs while
    every other id stays what it was before blocks could choose."""
    identity: dict[str, Any] = {"config": config, "repetition": repetition, "cluster": cluster_kind}
    if traced is not None:
        identity["traced"] = traced
    canonical = json.dumps(
        identity,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:10]
    return f"{config['arch']}-{digest}-r{repetition}"


def build_plan(spec: StudySpec, target: ClusterTarget) -> StudyPlan:
    """Every run of the study, validated and in run order; UsageError on the first problem."""
    kind_of(target).check_plan(target, spec)
    parts = design_parts(spec)
    varying = varied_settings(spec)
    plan = StudyPlan(spec, target, [], design_points=sum(len(part.points) for part in parts))
    # configuration (with whether it is traced) -> (config, factor levels, repetitions, traced)
    configurations: dict[str, tuple[dict[str, Any], dict[str, Any], int, bool]] = {}
    excluded = collapsed = 0
    for part in parts:
        for point in part.points:
            try:
                config = normalise(point, spec, target, part.fixed, part.traced)
            except UsageError:
                # a combination no run can take (e.g. topk with --sync-every 8) that the spec
                # leaves out is excluded, not refused
                if any(matches(pattern, {**part.fixed, **point}) for pattern in part.exclude):
                    excluded += 1
                    continue
                raise
            if any(matches(pattern, config) for pattern in part.exclude):
                excluded += 1
                continue
            key = json.dumps({"config": config, "traced": part.traced}, sort_keys=True, default=str)
            if key in configurations:
                collapsed += 1
                continue
            factors = {name: config[name] for name in point if name in config}
            factors.update(_levels_of(varying, factors, config))
            configurations[key] = (config, factors, part.repetitions, part.traced)
    if not configurations:
        raise UsageError(f"study {spec.name}: the design leaves no configuration to run")
    if collapsed:
        plan.notes.append(
            f"{collapsed} design point(s) repeat another configuration once settings that do not "
            "apply to their architecture (or to a one-host cluster) are dropped; each runs once"
        )
    if excluded:
        plan.notes.append(f"{excluded} design point(s) excluded by the spec")
    plan.configurations = len(configurations)
    total = sum(repetitions for _, _, repetitions, _ in configurations.values())
    if total > MAX_RUNS:
        raise UsageError(
            f"study {spec.name}: {plan.configurations:,} configurations and their repetitions "
            f"make {total:,} runs; a study has at most {MAX_RUNS:,}"
        )

    for config, factors, repetitions, traced in configurations.values():
        layout = commands.layout_for(config, target)
        for repetition in range(1, repetitions + 1):
            run_config = dict(config)
            base_seed = config.get("seed", spec.seed)
            run_config["seed"] = base_seed + (repetition - 1 if spec.seed_per_repetition else 0)
            run_config = {
                name: run_config[name] for name in sorted(run_config, key=list(SETTINGS).index)
            }
            plan.runs.append(
                PlannedRun(
                    run_id=run_id_for(
                        run_config,
                        repetition,
                        target.kind,
                        traced if traced != spec.timeline else None,
                    ),
                    repetition=repetition,
                    config=run_config,
                    factors=factors,
                    layout=layout,
                    timeout_s=spec.timeout_for(run_config),
                    launched=config["arch"] in MULTI_PROCESS
                    or kind_of(target).launches_single
                    or config.get("companions", 0) > 0,
                    traced=traced,
                )
            )
    if spec.order in ("random", "blocked"):
        random.Random(f"order:{spec.seed}").shuffle(plan.runs)
    if spec.order == "blocked":  # stable: each repetition keeps its shuffled order
        plan.runs.sort(key=lambda run: run.repetition)
    return plan


def check_only(plan: StudyPlan, only: dict[str, list[Any]] | None) -> None:
    """`--only` names levels some run of the plan has, and together they select a run;
    UsageError naming the first level (or the selection) that picks nothing."""
    if not only:
        return
    for name, levels in only.items():
        present = {json.dumps(run.config.get(name), default=str) for run in plan.runs}
        for level in levels:
            if json.dumps(level, default=str) not in present:
                shown = {str(run.config[name]) for run in plan.runs if name in run.config}
                have = ", ".join(sorted(shown)) or "none (it is not set)"
                raise UsageError(
                    f"--only {name}={level}: no run of study {plan.spec.name} has it "
                    f"(its runs' levels of {name}: {have})"
                )
    if not any(
        all(run.config.get(name) in levels for name, levels in only.items()) for run in plan.runs
    ):
        chosen = " ".join(f"{name}={'|'.join(map(str, levels))}" for name, levels in only.items())
        raise UsageError(f"--only {chosen}: no run of study {plan.spec.name} has all of these")
