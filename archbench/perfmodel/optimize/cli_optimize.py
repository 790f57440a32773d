"""`archbench optimize runs/<study>.yaml`: rank every configuration of a study by predicted
training time, measure only the most promising few through the sweep runner, report the pick,
and compare with random search given the same number of measurements."""

from __future__ import annotations

import argparse
import math
from typing import Any

from archbench.common.errors import UsageError
from archbench.perfmodel.fit.fitfile import (
    DEFAULT_CALIBRATION,
    default_calibration,
    model_inputs,
    write_json_atomic,
)
from archbench.perfmodel.fit.records import study_records
from archbench.perfmodel.model.modelinfo import train_size
from archbench.perfmodel.model.units import check_numbers, own_row
from archbench.perfmodel.optimize.optimizer import (
    OBJECTIVES,
    Candidate,
    attach_convergence,
    attach_measurements,
    config_key,
    planned_steps,
    predict_candidates,
    random_search_odds,
    step_config_for,
)

REPORT_NAME = "optimize"
# samples per "epoch" of a data set whose size only loading it would tell (text corpora); every
# configuration of a study shares it, so the ranking does not depend on it
DEFAULT_EPOCH_SAMPLES = 60000
# optimize's own numbers, ranged as the registry ranges a setting's (--target-accuracy: the
# spec's may stand in for it, so `_target_accuracy` holds either to the range)
NUMBERS = (
    own_row("budget", "int", 1, 1_000_000),
    own_row("budget_fraction", "float", 0, 1, exclusive_minimum=True),
    own_row("tolerance", "float", 0, 1, exclusive_minimum=True),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "optimize", help="pick a study's fastest configuration measuring only a few",
        description=__doc__,
    )  # fmt: skip
    add = parser.add_argument
    add("spec", help="study spec, e.g. runs/demo.yaml")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget",
        type=int,
        default=None,
        help="configurations to measure (default: a quarter of them)",
    )
    budget.add_argument(
        "--budget-fraction",
        type=float,
        default=0.25,
        help="share of the configurations to measure (default 0.25)",
    )
    add(
        "--objective",
        choices=OBJECTIVES,
        default="epoch_time",
        help="epoch_time: time to train one epoch, median step x steps per epoch at the "
        "configuration's global batch (default); run_time: median step x the run's steps; "
        "time_to_target: time to --target-accuracy, the steps runs of the same model, global "
        "batch and method took to reach it (measured in the study) x the predicted step",
    )
    add(
        "--target-accuracy",
        type=float,
        default=None,
        help="time_to_target: the test accuracy to reach (default: the spec's target_accuracy)",
    )
    add("--fit", default=None, help="perfmodel_fit.json of `archbench model fit` (free parameters)")
    add(
        "--calibration",
        default=None,
        help=f"microbench results.jsonl (default {DEFAULT_CALIBRATION} when it exists)",
    )
    add(
        "--cluster",
        default=None,
        choices=("auto", "localhost", "emulated", "slurm"),
        help="where measuring runs go (overrides the spec's cluster.kind)",
    )
    add(
        "--no-measure",
        action="store_true",
        help="measure nothing: use the records the study already has",
    )
    add(
        "--tolerance",
        type=float,
        default=0.05,
        help="'close to the best' margin (default 0.05)",
    )
    parser.set_defaults(func=run)


def _candidates(plan: Any) -> list[Candidate]:
    # deferred: the sweep's cluster kinds load only for a study
    from archbench.sweep.kinds import kind_of

    shared = kind_of(plan.target).on_this_machine  # every rank on this machine's cores
    by_key: dict[str, Candidate] = {}
    for run in plan.runs:
        key = config_key(run.config)
        if key in by_key:
            by_key[key].run_ids.append(run.run_id)
            continue
        step_config = step_config_for(run.config, run.layout, shared)
        by_key[key] = Candidate(
            key=key, config=run.config, run_ids=[run.run_id], step_config=step_config,
            steps=planned_steps(run.config, step_config.num_workers),
            epoch_samples=train_size(run.config) or DEFAULT_EPOCH_SAMPLES,
        )  # fmt: skip
    return list(by_key.values())


def _measure(spec: Any, cluster: str | None, run_ids: set[str]) -> int:
    """Runs (resumably) only the runs of the chosen configurations, through the sweep."""
    # deferred: the sweep driver (subprocess, threads) loads only when runs are measured
    from archbench.sweep.driver import Sweep, SweepOptions

    class ChosenRuns(Sweep):
        def pending(self):  # type: ignore[no-untyped-def]
            return [run for run in super().pending() if run.run_id in run_ids]

    return ChosenRuns(spec, SweepOptions(cluster=cluster)).run()


def run(args: argparse.Namespace) -> int:
    # deferred: the study reader and planner load only when optimize runs, not for --help
    from archbench.sweep.kinds import describe, resolve_target
    from archbench.sweep.plan import build_plan
    from archbench.sweep.spec import load_spec

    check_numbers(args, NUMBERS)
    spec = load_spec(args.spec)
    target = resolve_target(spec, args.cluster)
    plan = build_plan(spec, target)
    params, calib = model_inputs(args.fit, default_calibration(args.calibration))
    candidates = _candidates(plan)
    total = len(candidates)
    if args.budget is not None:
        budget = min(args.budget, total)
    else:
        budget = max(1, math.floor(total * args.budget_fraction))
    target_accuracy = _target_accuracy(spec, args)
    if target_accuracy is not None:
        groups = attach_convergence(candidates, _records(spec), target_accuracy)
        if not any(cand.steps_to_target for cand in candidates):
            reached = sum(group.reached for group in groups.values())
            raise UsageError(
                f"no configuration of {spec.name} has steps to test accuracy {target_accuracy:g} "
                f"measured ({reached} of {sum(g.runs for g in groups.values())} runs in "
                f"{spec.results_dir} reached it): measure the study first, or lower "
                "--target-accuracy"
            )
    ranked = predict_candidates(candidates, params, calib, args.objective)
    chosen = ranked[:budget]
    print(
        f"study {spec.name}: {total} configurations on {describe(target)}; measuring the "
        f"{budget} predicted fastest ({budget / total:.0%})"
    )
    for cand in chosen:
        print(
            f"  #{cand.predicted_rank} {cand.label()}: predicted {cand.predicted:.4g} "
            f"({cand.predicted_step_s * 1e3:.1f} ms/step)"
        )
    if not args.no_measure:
        _measure(spec, args.cluster, {run_id for c in chosen for run_id in c.run_ids})
    attach_measurements(candidates, _records(spec), args.objective, target_accuracy)
    measured_chosen = [c for c in chosen if c.measured is not None]
    if not measured_chosen:
        raise UsageError(
            f"none of the {budget} chosen configurations has an ok record in {spec.results_dir} "
            "(run without --no-measure, or check the sweep's failures)"
        )
    pick = min(measured_chosen, key=lambda c: c.measured)  # type: ignore[arg-type, return-value]
    report = _report(spec, candidates, ranked, chosen, pick, budget, args, target_accuracy)
    out_dir = spec.results_dir / "report"
    write_json_atomic(out_dir / f"{REPORT_NAME}.json", report)
    text = _markdown(report, ranked)
    (out_dir / f"{REPORT_NAME}.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"report: {out_dir / (REPORT_NAME + '.md')}")
    return 0


def _records(spec: Any) -> list[dict[str, Any]]:
    return study_records(spec.results_dir) if spec.results_dir.is_dir() else []


def _target_accuracy(spec: Any, args: argparse.Namespace) -> float | None:
    """The accuracy time_to_target aims at (None for the other objectives)."""
    if args.objective != "time_to_target":
        if args.target_accuracy is not None:
            raise UsageError("--target-accuracy applies only to --objective time_to_target")
        return None
    target = args.target_accuracy
    if target is None:
        target = spec.fixed.get("target_accuracy")
    if target is None:
        raise UsageError(
            "--objective time_to_target needs --target-accuracy (or target_accuracy among the "
            "spec's fixed settings)"
        )
    if not (isinstance(target, int | float) and 0 < float(target) <= 1):
        raise UsageError(f"--target-accuracy must be in (0, 1], got {target}")
    return float(target)


def _report(
    spec: Any,
    candidates: list[Candidate],
    ranked: list[Candidate],
    chosen: list[Candidate],
    pick: Candidate,
    budget: int,
    args: argparse.Namespace,
    target_accuracy: float | None,
) -> dict[str, Any]:
    measured_all = [c for c in candidates if c.measured is not None]
    complete = len(measured_all) == len(candidates)
    best = min(measured_all, key=lambda c: c.measured) if measured_all else None  # type: ignore[arg-type, return-value]
    summary: dict[str, Any] = {
        "study": spec.name,
        "objective": args.objective,
        "target_accuracy": target_accuracy,
        "configurations": len(candidates),
        "budget": budget,
        "budget_fraction": budget / len(candidates),
        "measured_of_chosen": sum(1 for c in chosen if c.measured is not None),
        "pick": pick.label(),
        "pick_predicted_rank": pick.predicted_rank,
        "pick_measured_s": pick.measured,
        "ground_truth": "complete"
        if complete
        else f"{len(measured_all)} of {len(candidates)} measured",
        "tolerance": args.tolerance,
    }
    if best is not None and best.measured:
        gap = (pick.measured - best.measured) / best.measured  # type: ignore[operator]
        summary.update(
            best_measured=best.label(), best_measured_s=best.measured,
            best_predicted_rank=best.predicted_rank, pick_gap_pct=gap * 100,
        )  # fmt: skip
    if complete and best is not None:
        # Only against every configuration measured is "the best" known, and random search
        # can be scored exactly.
        summary["pick_within_tolerance"] = summary["pick_gap_pct"] <= args.tolerance * 100 + 1e-9
        odds = random_search_odds([c.measured for c in measured_all], budget, args.tolerance)  # type: ignore[misc]
        summary["random_search"] = {**odds, "over": f"{len(measured_all)} measured configurations"}
        predicted = [c.predicted for c in measured_all]
        measured = [c.measured for c in measured_all]
        summary["rank_correlation"] = _spearman(predicted, measured)  # type: ignore[arg-type]
    return {
        "summary": summary,
        "candidates": [
            {
                "label": c.label(),
                "predicted_rank": c.predicted_rank,
                "predicted_s": c.predicted,
                "predicted_step_s": c.predicted_step_s,
                "measured_s": c.measured,
                "measured_step_s": c.measured_step_s,
                "steps_to_target": c.steps_to_target,
                "runs": c.run_ids,
                "chosen": c.predicted_rank <= budget,
            }
            for c in ranked
        ],  # fmt: skip
    }


def _spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


_OBJECTIVE_TEXT = {
    "epoch_time": "median step x steps per epoch at each configuration's global batch",
    "run_time": "median step x the run's configured steps",
    "time_to_target": "predicted: steps to the target measured for the same model, global "
    "batch and method x the predicted step; measured: the runs' training time to the target",
}


def _markdown(report: dict[str, Any], ranked: list[Candidate]) -> str:
    s = report["summary"]
    unit = "s/epoch" if s["objective"] == "epoch_time" else "s"
    lines = [
        f"# optimize: {s['study']}",
        "",
        f"- objective: {s['objective']} ({_OBJECTIVE_TEXT[s['objective']]}"
        + (f", target {s['target_accuracy']:g})" if s.get("target_accuracy") else ")"),
        f"- measured {s['measured_of_chosen']} of the {s['budget']} predicted fastest, out of "
        f"{s['configurations']} configurations ({s['budget_fraction']:.0%})",
        f"- pick: **{s['pick']}** (predicted rank {s['pick_predicted_rank']}), measured "
        f"{s['pick_measured_s']:.4g} {unit}",
    ]  # fmt: skip
    if "random_search" in s:
        rs = s["random_search"]
        lines += [
            f"- best of all {s['configurations']} (every one measured): {s['best_measured']} "
            f"(predicted rank {s['best_predicted_rank']}), {s['best_measured_s']:.4g} {unit}",
            f"- pick is {s['pick_gap_pct']:.1f}% slower than the best: "
            f"{'within' if s['pick_within_tolerance'] else 'outside'} {s['tolerance']:.0%}",
            f"- random search with the same {s['budget']} measurements: expected gap "
            f"{rs['expected_gap_pct']:.1f}%, chance within {s['tolerance']:.0%} "
            f"{rs['p_within_tolerance']:.0%} (exact, over {rs['over']})",
        ]
        if s.get("rank_correlation") is not None:
            lines.append(
                f"- Spearman rank correlation, predicted vs measured: {s['rank_correlation']:.2f}"
            )
    else:
        lines.append(
            f"- ground truth: {s['ground_truth']}; measure the whole study (`archbench sweep`) "
            "to know how far the pick is from the best and to score random search"
        )
    to_target = s["objective"] == "time_to_target"
    steps_head, steps_rule = (" steps to target |", " ---: |") if to_target else ("", "")
    lines += [
        "",
        f"| rank | configuration |{steps_head} predicted | measured | chosen |",
        f"| ---: | --- |{steps_rule} ---: | ---: | :---: |",
    ]
    for c in ranked:
        measured = f"{c.measured:.4g}" if c.measured is not None else ""
        steps = ""
        if to_target:
            steps = f" {c.steps_to_target:g} |" if c.steps_to_target else " not measured |"
        lines.append(
            f"| {c.predicted_rank} | {c.label()} |{steps} {c.predicted:.4g} | {measured} | "
            f"{'x' if c.predicted_rank <= s['budget'] else ''} |"
        )
    return "\n".join(lines) + "\n"
