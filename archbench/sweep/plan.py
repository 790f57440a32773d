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

from archbench.archs import MULTI_PROCESS
from archbench.archs import arch as architecture
from archbench.errors import UsageError
from archbench.settings import PLACEMENT_POLICIES, SETTINGS, applies, combination_problem
from archbench.sweep import commands, design
from archbench.sweep.hosts import ClusterTarget
from archbench.sweep.limits import MAX_RUNS
from archbench.sweep.spec import StudySpec

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


def normalise(point: dict[str, Any], spec: StudySpec, target: ClusterTarget) -> dict[str, Any]:
    """The configuration a design point runs as, or UsageError when it cannot run at all."""
    merged = {**spec.fixed, **point}
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
        if target.kind == "emulated":
            if "bandwidth" not in config and target.bandwidth:
                config["bandwidth"] = target.bandwidth
        elif "bandwidth" in config:
            raise UsageError(
                f"bandwidth={config['bandwidth']} needs the emulated cluster (--cluster emulated), "
                f"not {target.kind}"
            )
    elif _loaded_baseline(spec, target) and int(merged.get("workers") or 1) > 1:
        # The baseline of a W-worker comparison, measured with W - 1 companions beside it.
        config.setdefault("companions", int(merged["workers"]) - 1)
    if "epochs" in config and "steps" in config:
        raise UsageError(f"configuration {describe(config)} sets both epochs and steps; keep one")
    if config.get("controller") == "gloo" and config.get("launcher") != "horovodrun":
        raise UsageError(
            f"configuration {describe(config)}: controller gloo needs launcher horovodrun"
        )
    _check_model(config)
    problem = combination_problem(config) or (_untraceable(config) if spec.timeline else None)
    if problem:
        raise UsageError(f"configuration {describe(config)}: {problem}")
    order = list(SETTINGS)
    return {name: config[name] for name in sorted(config, key=order.index)}


def _untraceable(config: dict[str, Any]) -> str | None:
    """`timeline: true`: why a run of --steps cannot be traced (with --epochs the run itself
    says so: its length depends on the data)."""
    if config.get("steps") is None:
        return None
    from archbench.timeline.plan import too_short

    length = ("warmup_steps", "probe_every", "timeline_steps")
    return too_short(config["steps"], *(config.get(n, SETTINGS[n].default) for n in length))


def _loaded_baseline(spec: StudySpec, target: ClusterTarget) -> bool:
    if spec.baseline_load == "auto":
        return target.kind == "emulated"
    return spec.baseline_load == "loaded"


def _check_model(config: dict[str, Any]) -> None:
    from archbench.models import check_model_name

    try:
        check_model_name(config.get("model", "mlp"), config.get("dataset", "fashion_mnist"))
    except UsageError as exc:
        raise UsageError(
            f"configuration {describe(config, ['arch', 'model', 'dataset'])}: {exc}"
        ) from None


def matches(pattern: dict[str, Any], config: dict[str, Any]) -> bool:
    return all(key in config and config[key] == value for key, value in pattern.items())


def run_id_for(config: dict[str, Any], repetition: int, cluster_kind: str) -> str:
    """Stable id: `<arch>-<10 hex digits of the configuration's hash>-r<repetition>`."""
    canonical = json.dumps(
        {"config": config, "repetition": repetition, "cluster": cluster_kind},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:10]
    return f"{config['arch']}-{digest}-r{repetition}"


def build_plan(spec: StudySpec, target: ClusterTarget) -> StudyPlan:
    """Every run of the study, validated and in run order; UsageError on the first problem."""
    if target.kind == "emulated":
        from archbench.sweep.emulated import check_buildable

        check_buildable(target, spec.cluster)
    points = design.expand(spec.design, spec.factors, spec.seed)
    plan = StudyPlan(spec, target, [], design_points=len(points))
    configurations: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    excluded = collapsed = 0
    for point in points:
        try:
            config = normalise(point, spec, target)
        except UsageError:
            # a combination no run can take (e.g. topk with --sync-every 8) that the spec
            # leaves out is excluded, not refused
            if any(matches(pattern, {**spec.fixed, **point}) for pattern in spec.exclude):
                excluded += 1
                continue
            raise
        if any(matches(pattern, config) for pattern in spec.exclude):
            excluded += 1
            continue
        key = json.dumps(config, sort_keys=True, default=str)
        if key in configurations:
            collapsed += 1
            continue
        factors = {name: config[name] for name in point if name in config}
        configurations[key] = (config, factors)
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
    if plan.configurations * spec.repetitions > MAX_RUNS:
        raise UsageError(
            f"study {spec.name}: {plan.configurations:,} configurations x {spec.repetitions:,} "
            f"repetitions = {plan.configurations * spec.repetitions:,} runs; a study has at most "
            f"{MAX_RUNS:,}"
        )

    for config, factors in configurations.values():
        layout = commands.layout_for(config, target)
        for repetition in range(1, spec.repetitions + 1):
            run_config = dict(config)
            base_seed = config.get("seed", spec.seed)
            run_config["seed"] = base_seed + (repetition - 1 if spec.seed_per_repetition else 0)
            run_config = {
                name: run_config[name] for name in sorted(run_config, key=list(SETTINGS).index)
            }
            plan.runs.append(
                PlannedRun(
                    run_id=run_id_for(run_config, repetition, target.kind),
                    repetition=repetition,
                    config=run_config,
                    factors=factors,
                    layout=layout,
                    timeout_s=spec.timeout_for(run_config),
                    launched=config["arch"] in MULTI_PROCESS
                    or target.kind != "localhost"
                    or config.get("companions", 0) > 0,
                )
            )
    if spec.order == "random":
        random.Random(f"order:{spec.seed}").shuffle(plan.runs)
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
