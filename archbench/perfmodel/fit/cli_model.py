"""`archbench model fit|validate|whatif runs/<study>/`.

fit       fits the model's few free parameters on part of a study's runs and saves them
          (report/perfmodel_fit.json), with the list of runs it used;
validate  predicts the study's other configurations with that fit, and reports the error per
          architecture (MAPE and worst case) with a predicted-vs-measured figure;
whatif    predicted scaling curves of ring / p2p / ps for larger clusters than the one at hand.
published the model's scaling efficiency against published clusters (the Horovod benchmark,
          TensorFlow's distributed PS benchmark), with each term added in turn.
map       per workload, the architecture predicted fastest over two axes (workers, bandwidth,
          latency, model size) and where the winner changes (crossover_report).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from archbench.common.archs import uses_horovod
from archbench.common.bandwidth import parse_bandwidth
from archbench.common.errors import UsageError
from archbench.common.output_folder import file_problem, folder_problem
from archbench.perfmodel.fit import figures
from archbench.perfmodel.fit.fitfile import (
    DEFAULT_CALIBRATION,
    FIT_NAME,
    FIT_SCHEMA,
    default_calibration,
    model_inputs,
    override_compute,
    parse_compute_ms,
    read_fit,
    write_json_atomic,
)
from archbench.perfmodel.fit.fitting import (
    Scored,
    Split,
    error_summary,
    fit_model,
    score,
    split_link,
    split_random,
    split_where,
    split_workers,
)
from archbench.perfmodel.fit.ranking import (
    Ranked,
    rank_settings,
    ranking_summary,
    ranking_text,
    settings_of,
)
from archbench.perfmodel.fit.records import Observation, study_observations
from archbench.perfmodel.measure.calibration import (
    Calibration,
    fingerprint_of_record,
    load_calibration,
)
from archbench.perfmodel.model.cli_predict import PREDICT_INPUTS
from archbench.perfmodel.model.formulas import (
    ALLREDUCE_ALGORITHMS,
    RING,
    LinkCost,
    beta_from_bandwidth,
)
from archbench.perfmodel.model.modelinfo import INPUT_SETTINGS
from archbench.perfmodel.model.predictor import ModelParams
from archbench.perfmodel.model.units import check_numbers, names, own_row, positive_ints
from archbench.runtime.settings import MAX_WORKERS, SETTINGS, add_flag, combination_problem

VALIDATION_NAME = "perfmodel_validation"
# a study's own calibration, beside its records (`archbench microbench --study`)
STUDY_CALIBRATION = "calibration.jsonl"
SPLITS = ("workers", "link", "random", "all")
WHATIF_NAME = "perfmodel_whatif"
# the split's numbers: its own, ranged as the registry ranges a setting's, and a seed as
# `archbench train` takes one
SPLIT_NUMBERS = (
    own_row("cut", "int", 1, MAX_WORKERS),
    own_row("train_fraction", "float", 0, 1, exclusive_minimum=True),
    SETTINGS["seed"],
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model", help="fit / validate the performance model on a study; what-if curves",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    def split_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("study", help="study folder (runs/<study>/) holding run records")
        sub.add_argument(
            "--split",
            choices=SPLITS,
            default="workers",
            help="which configurations to fit: workers (default: W <= --cut, every larger W "
            "scored), link (one link rate, --train-link; the others scored), random "
            "(--train-fraction of each architecture's configurations) or all (to score another "
            "study with validate --fit)",
        )
        sub.add_argument(
            "--cut", type=int, default=2, help="--split workers: fit W <= CUT (default 2)"
        )
        sub.add_argument(
            "--train-link",
            default=None,
            metavar="RATE",
            help="--split link: the rate to fit at (default the study's fastest)",
        )
        sub.add_argument(
            "--train-fraction",
            type=float,
            default=0.5,
            help="--split random: share of each architecture's configurations to fit on "
            "(default 0.5)",
        )
        sub.add_argument("--seed", type=int, default=0, help="seed of the random split")
        sub.add_argument(
            "--train-where",
            default=None,
            metavar="FIELD=VALUE",
            help="fit on runs whose record field equals VALUE, e.g. cluster.link=200mbit "
            "(instead of --split)",
        )
        sub.add_argument(
            "--calibration",
            default=None,
            help="microbench results.jsonl (default: the study's calibration.jsonl, else "
            f"{DEFAULT_CALIBRATION}; only records of the study's kind of cluster count)",
        )

    fit = actions.add_parser("fit", help="fit the free parameters on part of a study")
    split_options(fit)
    fit.add_argument("--out", default=None, help=f"fit file (default <study>/report/{FIT_NAME})")
    fit.set_defaults(func=run_fit)

    validate = actions.add_parser(
        "validate", help="score the fit on the configurations it did not see"
    )
    split_options(validate)
    validate.add_argument(
        "--fit",
        default=None,
        help=f"a saved fit to score with (default: fit now, and save to <study>/report/{FIT_NAME})",
    )
    validate.set_defaults(func=run_validate)

    whatif = actions.add_parser("whatif", help="predicted scaling curves for larger clusters")
    whatif.add_argument(
        "study",
        nargs="?",
        default=None,
        help="study folder: its models, batch sizes and fit (optional)",
    )
    whatif.add_argument("--models", default=None, help="models (default: those of the study)")
    whatif.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="per-worker batch (default: the study's most common, else 64)",
    )
    whatif.add_argument("--workers", default="2,4,8,16,32,64,128,256,512")
    whatif.add_argument("--bandwidths", default="1gbit,10gbit,100gbit")
    # the model's input as `archbench train` reads it (default: the study's runs')
    for name in INPUT_SETTINGS:
        add_flag(whatif, SETTINGS[name], default=None)
    add_flag(whatif, SETTINGS["sparse_exchange"], default=None)
    whatif.add_argument(
        "--touched-rows",
        type=float,
        default=None,
        help="--sparse-exchange sparse: the unique embedding rows one worker's batch touches "
        "per step (a sparse run's comm.sparse_exchange.rows_per_step); a `ring (dense)` line "
        "is drawn beside the sparse ones",
    )
    compute = whatif.add_mutually_exclusive_group()
    compute.add_argument(
        "--compute-ms",
        default=None,
        metavar="MS|MODEL=MS,...",
        help="per-step compute of one worker alone at the batch drawn, measured elsewhere "
        "(e.g. on a GPU): one number for every model, or one per model",
    )
    compute.add_argument(
        "--compute-from",
        default=None,
        metavar="FILE",
        help="the models' compute lines from another machine's microbench results.jsonl",
    )
    whatif.add_argument("--fit", default=None)
    whatif.add_argument(
        "--calibration",
        default=None,
        help=f"microbench results.jsonl (default {DEFAULT_CALIBRATION} when it exists)",
    )
    cluster_flags(whatif)
    whatif.add_argument(
        "--out", default=None, help=f"figure stem (default <study>/report/{WHATIF_NAME})"
    )
    whatif.set_defaults(func=run_whatif)

    published = actions.add_parser(
        "published",
        help="predicted scaling efficiency against published clusters (Horovod, TensorFlow PS)",
    )
    published.add_argument("--json", action="store_true", help="machine-readable output")
    published.set_defaults(func=run_published)

    crossover = actions.add_parser(
        "map", help="which architecture is predicted fastest over two axes, and where that changes"
    )
    crossover.add_argument("study", help="study folder (runs/<study>/) holding run records")
    for flag, default in (("--x", "workers"), ("--y", "bandwidth")):
        crossover.add_argument(
            flag, default=default, choices=("workers", "bandwidth", "latency", "model-size"),
            help=f"axis (default {default})",
        )  # fmt: skip
    for flag, example, held in (
        ("--workers", "2:64", "the workload's most common"),
        ("--bandwidth", "100mbit:100gbit", "the workload's most common link"),
        ("--latency", "10us:10ms", "the calibration's α"),
        ("--model-size", "100kB:1GB", "the model's own gradient bytes"),
    ):  # fmt: skip
        crossover.add_argument(
            flag, default=None, metavar="LO:HI|VALUE",
            help=f"as an axis its range (default {example}), else the value it is held at "
            f"(default {held})",
        )  # fmt: skip
    crossover.add_argument(
        "--points", type=int, default=25, help="grid values per axis, 3 to 100 (default 25)"
    )
    crossover.add_argument(
        "--fit", default=None, help=f"a saved fit (default <study>/report/{FIT_NAME}, else fit now)"
    )
    crossover.add_argument(
        "--calibration", default=None, help="microbench results.jsonl (default the study's own)"
    )
    crossover.add_argument("--out", default=None, help="folder (default <study>/map/)")
    crossover.add_argument("--json", action="store_true", help="machine-readable output")
    crossover.set_defaults(func=run_map)


def cluster_flags(parser: argparse.ArgumentParser) -> None:
    """What the hosts and the allreduce are like (GPU servers): every flag defaults to the
    model's own behaviour (one worker per host, the calibration's links, fused buffers in turn,
    the fitted or calibrated overlap)."""
    cluster = parser.add_argument_group("the cluster's hosts and allreduce")
    cluster.add_argument(
        "--devices-per-host", type=int, default=1, metavar="G",
        help="workers per host, in rank order, sharing its NIC (GPUs of a server; default 1)",
    )  # fmt: skip
    cluster.add_argument(
        "--allreduce", choices=ALLREDUCE_ALGORITHMS, default=RING,
        help="with --devices-per-host above 1: one ring through every device, each host's "
        "devices next to each other (default), or hierarchical (reduce-scatter in the host, "
        "rings between hosts, allgather in the host)",
    )  # fmt: skip
    cluster.add_argument(
        "--intra-host-bandwidth", default=None, metavar="RATE",
        help="each device's link inside a host (e.g. 126gbit for PCIe 3.0 x16; default the "
        "calibration's)",
    )  # fmt: skip
    cluster.add_argument(
        "--intra-host-latency", default=None, metavar="TIME",
        help="latency of a hop inside a host (e.g. 5.7us; default the calibration's)",
    )  # fmt: skip
    cluster.add_argument(
        "--latency", default=None, metavar="TIME",
        help="latency of a hop between hosts, per message (e.g. 9.6us; default the "
        "calibration's)",
    )  # fmt: skip
    cluster.add_argument(
        "--call-cost", default=None, metavar="TIME",
        help="with --devices-per-host above 1: a fixed cost per allreduce call (default 0)",
    )  # fmt: skip
    cluster.add_argument(
        "--overlap", default=None, metavar="PHI|backward",
        help="share of the exchange hidden behind compute, 0 to 1, for every architecture, "
        "or `backward`: the ring's allreduces follow the gradients as the backward pass "
        "makes them (layer order, by each layer's multiply-adds); default the fit's or 0",
    )  # fmt: skip
    cluster.add_argument(
        "--backward-share", type=float, default=2.0 / 3.0, metavar="B",
        help="--overlap backward: the backward pass's share of the compute (default 2/3)",
    )  # fmt: skip
    cluster.add_argument(
        "--pipeline-buffers", action="store_true",
        help="a fused buffer's latency runs while the previous buffer's bytes move",
    )  # fmt: skip
    cluster.add_argument(
        "--fusion-mb", type=float, default=None, metavar="MB",
        help="tensor fusion threshold of the ring's allreduce (default 64)",
    )  # fmt: skip


def apply_cluster_flags(
    args: argparse.Namespace, params: ModelParams, calib: Calibration
) -> tuple[ModelParams, Calibration, Any, list[str]]:
    """The parameters, calibration and cluster options (whatif.ClusterOptions) the cluster
    flags ask for, and a line for each flag that changed something."""
    # deferred: the map's value parser and the what-if curves load only for `model whatif`
    from archbench.perfmodel.optimize.crossover import LATENCY, parse_value
    from archbench.perfmodel.optimize.whatif import ClusterOptions

    said: list[str] = []
    if args.devices_per_host < 1:
        raise UsageError("--devices-per-host must be at least 1")
    if args.fusion_mb is not None and args.fusion_mb <= 0:
        raise UsageError("--fusion-mb must be positive")
    if not 0.0 < args.backward_share <= 1.0:
        raise UsageError("--backward-share must be above 0 and at most 1")
    if args.intra_host_bandwidth is not None or args.intra_host_latency is not None:
        beta = calib.intra.beta_s_per_byte
        alpha = calib.intra.alpha_s
        if args.intra_host_bandwidth is not None:
            beta = beta_from_bandwidth(parse_bandwidth(args.intra_host_bandwidth))
        if args.intra_host_latency is not None:
            alpha = parse_value(LATENCY, args.intra_host_latency)
        calib = replace(calib, intra=LinkCost(alpha, beta))
        said.append(f"inside a host: {alpha * 1e6:g} us, {8 / beta / 1e9:g} Gbit/s per device")
    if args.latency is not None:
        alpha = parse_value(LATENCY, args.latency)
        beta = calib.inter.beta_s_per_byte if calib.inter else calib.intra.beta_s_per_byte
        calib = replace(calib, inter=LinkCost(alpha, beta), ring_call_s={})
        said.append(f"between hosts: {alpha * 1e6:g} us per message")
    schedule = "fraction"
    if args.overlap is not None:
        if args.overlap == "backward":
            schedule = "backward"
            phi = 0.0
            said.append(
                f"overlap: the ring's allreduces follow the backward pass "
                f"({args.backward_share:.2f} of the compute); 0 elsewhere"
            )
        else:
            try:
                phi = float(args.overlap)
            except ValueError:
                raise UsageError(
                    f"--overlap must be a share from 0 to 1 or `backward`, got {args.overlap!r}"
                ) from None
            if not 0.0 <= phi <= 1.0:
                raise UsageError(f"--overlap must be from 0 to 1, got {args.overlap}")
            said.append(f"overlap: {phi:g} of every exchange hidden behind compute")
        keys = {*params.arch, "ring", "p2p", "ps"}  # a family's entry covers its variants
        params = replace(params, arch={k: replace(params.for_key(k), overlap=phi) for k in keys})
    call_s = parse_value(LATENCY, args.call_cost) if args.call_cost is not None else 0.0
    options = ClusterOptions(
        devices_per_host=args.devices_per_host,
        allreduce_algorithm=args.allreduce,
        overlap_schedule=schedule,
        pipelined_buffers=args.pipeline_buffers,
        fusion_threshold_mb=args.fusion_mb,
        call_s=call_s,
        backward_share=args.backward_share,
    )
    if args.devices_per_host > 1:
        said.append(f"{args.devices_per_host} workers per host; allreduce: {args.allreduce}")
    if args.pipeline_buffers:
        said.append("fused buffers pipelined")
    return params, calib, options, said


# --------------------------------------------------------------------------- fit / validate


def check_output_folder(path: Path, what: str, parents: bool = True) -> None:
    """The folder `path` goes in can be written (made when missing; with `parents` False only
    that folder itself, for a path the user gave); UsageError naming `what`."""
    problem = folder_problem(path.parent, parents=parents)
    if problem:
        raise UsageError(f"{what} {path} cannot be written: {problem}")


def check_output_file(path: Path, what: str) -> None:
    """`path` can be written whole (a regular file or a new one); UsageError naming `what`."""
    problem = file_problem(path)
    if problem:
        raise UsageError(f"{what} {path} cannot be written: {problem}")


def _split(observations: list[Observation], args: argparse.Namespace) -> Split:
    if args.train_where:
        field, sep, value = args.train_where.partition("=")
        if not sep or not field:
            raise UsageError(f"--train-where must look like FIELD=VALUE, got {args.train_where!r}")
        return split_where(observations, field.strip(), value.strip())
    if args.split == "link":
        return split_link(observations, args.train_link)
    if args.split == "random":
        return split_random(observations, args.train_fraction, args.seed)
    if args.split == "all":
        return Split(list(observations), [], "all: every configuration fitted")
    return split_workers(observations, args.cut)


def _fit_document(
    study: Path, split: Split, calib: Calibration, args: argparse.Namespace
) -> dict[str, Any]:
    if not split.train:
        raise UsageError(f"{split.rule}: no configuration of {study} to fit on")
    result = fit_model(split.train, calib)
    in_sample = error_summary(score(split.train, result.params, calib))
    return {
        "schema": FIT_SCHEMA,
        "study": str(study),
        "split": split.rule,
        "train_run_ids": sorted({o.run_id for o in split.train}),
        "train_config_keys": sorted({o.config_key for o in split.train}),
        "params": result.params.to_json(),
        "terms": [t.to_json() for t in result.terms],
        "compute_sources": result.compute_sources,
        "calibration": calib.to_json(),
        "in_sample_error": in_sample,
    }


def study_calibration(
    study: Path, observations: list[Observation], path: str | None
) -> tuple[Calibration, str]:
    """The calibration of the study's kind of cluster (its runs' fingerprint): from the file
    named, else the study's own calibration.jsonl, else the default microbench results; with a
    line saying what was used (the defaults where no record matches)."""
    from collections import Counter

    counts = Counter(
        json.dumps(fingerprint_of_record(o.record), sort_keys=True) for o in observations
    )
    cluster = json.loads(counts.most_common(1)[0][0])
    algorithms = Counter(
        str(o.record.get("config", {}).get("allreduce_algorithm") or "ring")
        for o in observations
        if uses_horovod(o.config.arch)
    )
    algorithm = algorithms.most_common(1)[0][0] if algorithms else "ring"
    paths = [Path(path)] if path else [study / STUDY_CALIBRATION, DEFAULT_CALIBRATION]
    for candidate in paths:
        if not candidate.is_file():
            if path:
                load_calibration(candidate)  # says the file is missing
            continue
        calib = load_calibration(candidate, cluster, algorithm)
        if calib.measured:
            return calib, f"calibration: {candidate} ({', '.join(calib.measured)} measured)"
    where = " or ".join(str(p) for p in paths)
    return Calibration(), (
        f"calibration: defaults (no microbench record in {where} was measured on this study's "
        f"kind of cluster: {_describe_cluster(cluster)}; run `archbench microbench --study "
        f"runs/{study.name}.yaml`)"
    )


def _describe_cluster(cluster: dict[str, Any]) -> str:
    if not cluster.get("emulated"):
        return f"real hosts, {cluster.get('cpu') or 'unknown CPU'}"
    dilation = f"dilation {cluster['dilation']:g}" if cluster.get("dilation") else "no dilation"
    return f"emulated, {dilation}, {cluster.get('cpu') or 'unknown CPU'}"


def run_fit(args: argparse.Namespace) -> int:
    check_numbers(args, SPLIT_NUMBERS)
    study = Path(args.study)
    out = Path(args.out) if args.out else study / "report" / FIT_NAME
    if args.out:  # checked before the study is read: a slip in --out costs nothing
        check_output_file(out, "fit file")
    else:
        check_output_folder(out, "fit file")
    observations = study_observations(study)
    calib, said = study_calibration(study, observations, args.calibration)
    split = _split(observations, args)
    document = _fit_document(study, split, calib, args)
    write_json_atomic(out, document)
    print(said)
    print(
        f"fitted on {len(document['train_config_keys'])} configurations "
        f"({len(document['train_run_ids'])} runs; {split.rule}); "
        f"{len({o.config_key for o in split.test})} left for validation"
    )
    print_fit(document)
    print(f"fit written to {out}")
    return 0


def print_fit(document: dict[str, Any]) -> None:
    """What the fit measured from the study, which terms it fitted and which it kept."""
    params = document["params"]
    for model, line in sorted(params["compute"].items()):
        source = document.get("compute_sources", {}).get(model, "")
        print(
            f"  compute {model}: {line['fixed_s'] * 1e3:.3f} ms + "
            f"{line['per_sample_s'] * 1e6:.2f} us/sample, update {line.get('update_s', 0) * 1e3:.3f}"
            f" ms ({source})"
        )
    for term in document.get("terms", []):
        value = _term_value(term["field"], term["value"])
        if term["fitted"]:
            print(
                f"  fitted  {term['term']}: {value} "
                f"(from {term['configurations']} configuration(s))"
            )
        else:
            print(f"  kept    {term['term']}: {value} ({term['reason']})")


def _term_value(field: str, value: float) -> str:
    if field == "overhead_s":
        return f"{value * 1e3:.3f} ms"
    if field == "alpha_s":
        return f"{value * 1e6:.1f} us"
    if field == "gamma_s_per_byte":
        return f"{value * 1e9:.3f} ns/B"
    return f"{value:.3f}"


def held_out(observations: list[Observation], fit: dict[str, Any]) -> list[Observation]:
    """The observations the fit never saw (by configuration and by run)."""
    keys = set(fit.get("train_config_keys", []))
    runs = set(fit.get("train_run_ids", []))
    test = [o for o in observations if o.config_key not in keys and o.run_id not in runs]
    Split(
        train=[o for o in observations if o.config_key in keys], test=test, rule=""
    ).check_disjoint()
    return test


def run_validate(args: argparse.Namespace) -> int:
    check_numbers(args, SPLIT_NUMBERS)
    study = Path(args.study)
    observations = study_observations(study)
    check_output_folder(study / "report" / VALIDATION_NAME, "the validation")
    fit_path = Path(args.fit) if args.fit else study / "report" / FIT_NAME
    if args.fit:
        fit = read_fit(fit_path)
        fitted_on = Path(str(fit.get("study", study)))
        if fitted_on.resolve() == study.resolve():
            print(f"using fit {fit_path} ({fit['split']})")
        else:  # a fit made on another study: none of this one's runs were fitted
            print(f"using fit {fit_path}, made on {fitted_on} ({fit['split']}); scoring {study}")
    else:  # fitted now, with the split and the calibration there are now
        calib, said = study_calibration(study, observations, args.calibration)
        print(said)
        fit = _fit_document(study, _split(observations, args), calib, args)
        write_json_atomic(fit_path, fit)
        print(f"fitted now ({fit['split']}), saved to {fit_path}")
        print_fit(fit)
    # the fit carries the calibration it was fitted with: score it as fitted
    params, calib = model_inputs(fit_path, None)
    test = held_out(observations, fit)
    if not test:
        raise UsageError(
            f"every configuration of {study} was used for fitting; nothing is left to score"
        )
    rows = score(test, params, calib)
    summary = error_summary(rows)
    # a setting: what held-out configurations share but the architecture choice (ranking.py)
    setting_of = settings_of(test)
    ranked = rank_settings(rows, setting_of)
    ranking = ranking_summary(ranked, len(set(setting_of.values())))
    report = study / "report"
    figure_paths = figures.predicted_vs_measured(
        rows, f"{study.name}: held-out configurations ({len(rows)})", report / VALIDATION_NAME
    )
    write_json_atomic(report / f"{VALIDATION_NAME}.json", {
        "study": str(study), "fit": str(fit_path), "split": fit["split"],
        "summary": summary, "rows": [_row_json(r) for r in rows],
        "ranking": {**ranking, "settings_ranked": [_ranked_json(r) for r in ranked]},
        "figures": [str(p) for p in figure_paths],
    })  # fmt: skip
    table = validation_table(rows, summary) + "\n" + ranking_text(ranked, ranking)
    (report / f"{VALIDATION_NAME}.md").write_text(table, encoding="utf-8")
    print(table)
    print(f"figure: {', '.join(map(str, figure_paths))}")
    return 0


def _ranked_json(ranked: Ranked) -> dict[str, Any]:
    return {
        "setting": ranked.setting, "candidates": ranked.candidates,
        "predicted_fastest": ranked.picked.label, "measured_fastest": ranked.fastest.label,
        "verdict": ranked.verdict, "cost": ranked.cost,
        "runner_up": ranked.runner_up.label,
        "predicted_fastest_measured_s": ranked.picked.measured_s,
        "measured_fastest_s": ranked.fastest.measured_s,
        "gap_pct": ranked.gap * 100, "noise_floor_pct": ranked.noise * 100,
    }  # fmt: skip


def _row_json(row: Scored) -> dict[str, Any]:
    return {
        "config": row.label, "arch": row.arch, "variant": row.arch_key, "model": row.model,
        "measured_s": row.measured_s, "predicted_s": row.predicted_s,
        "predicted_compute_s": row.predicted_compute_s, "predicted_exposed_comm_s": row.predicted_comm_s,
        "error_pct": row.error * 100, "runs": row.runs,
        "noise_floor_pct": None if row.noise is None else row.noise * 100,
    }  # fmt: skip


def validation_table(rows: list[Scored], summary: dict[str, dict[str, Any]]) -> str:
    lines = [
        "The noise floor: how far one repetition's median step is from the mean of the others'",
        "(the error a perfect model would still show).",
        "",
        "| architecture | held-out configurations | MAPE | noise floor | worst | worst configuration |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, s in summary.items():
        floor = "" if s.get("noise_floor_pct") is None else f"{s['noise_floor_pct']:.1f}%"
        lines.append(
            f"| {name} | {s['configurations']} | {s['mape_pct']:.1f}% | {floor} | "
            f"{s['worst_pct']:.1f}% | {s['worst_config']} |"
        )
    lines += [
        "",
        "| configuration | measured step (ms) | predicted (ms) | error | noise floor |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in sorted(rows, key=lambda r: (r.arch, r.label)):
        floor = "" if row.noise is None else f"{row.noise * 100:.1f}%"
        lines.append(
            f"| {row.label} | {row.measured_s * 1e3:.1f} | {row.predicted_s * 1e3:.1f} | "
            f"{row.error * 100:+.1f}% | {floor} |"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- what-if


def run_whatif(args: argparse.Namespace) -> int:
    # deferred: the what-if curves load only for `model whatif`
    from archbench.perfmodel.optimize.whatif import describe_walls, whatif_curves

    numbers = [SETTINGS[name] for name in (*INPUT_SETTINGS, "batch_size")]
    check_numbers(args, [*numbers, PREDICT_INPUTS["touched_rows"]])
    workers = positive_ints(args.workers, "--workers", SETTINGS["workers"].maximum)
    bandwidths = names(args.bandwidths, "--bandwidths")
    for bandwidth in bandwidths:
        parse_bandwidth(bandwidth)
    if args.dataset is None and (args.synthetic_shape or args.synthetic_classes):
        raise UsageError("--synthetic-shape and --synthetic-classes go with --dataset synthetic")
    study = Path(args.study) if args.study else None
    stem = Path(args.out) if args.out else (study or Path("runs")) / "report" / WHATIF_NAME
    # a stem the user gave makes at most its own folder; the default's folders are the command's
    check_output_folder(stem, "figure", parents=not args.out)
    observations = study_observations(study) if study else []
    fit_path = args.fit
    if fit_path is None and study and (study / "report" / FIT_NAME).is_file():
        fit_path = study / "report" / FIT_NAME
    params, calib = model_inputs(fit_path, default_calibration(args.calibration))
    models = (
        names(args.models, "--models")
        if args.models
        else sorted({o.config.model for o in observations})
    )
    if not models:
        raise UsageError("name --models or a study whose runs say which models to draw")
    inputs = None
    sparse = args.sparse_exchange == "sparse"
    if sparse != (args.touched_rows is not None):
        raise UsageError("--sparse-exchange sparse and --touched-rows go together")
    if sparse and args.dataset is None:
        raise UsageError("--sparse-exchange sparse needs --dataset (the word model's: words)")
    if args.dataset is not None:
        # deferred: archbench.workloads.models loads only with --dataset
        from archbench.workloads.models import check_model_name

        for model in models:
            check_model_name(model, args.dataset)
        inputs = {name: getattr(args, name) for name in INPUT_SETTINGS}
        inputs["touched_rows"] = args.touched_rows
        problem = combination_problem(inputs)
        if problem:
            raise UsageError(problem)
    compute_source = override_compute(
        params, models, parse_compute_ms(args.compute_ms, models), args.compute_from
    )
    params, calib, cluster, cluster_said = apply_cluster_flags(args, params, calib)
    curves, batches, singles = whatif_curves(
        models, workers, bandwidths, params, calib, observations, args.batch_size, inputs,
        cluster,
    )  # fmt: skip
    per_host = (
        "one worker per host" if cluster.devices_per_host == 1
        else f"{cluster.devices_per_host} workers per host"
    )  # fmt: skip
    title = f"predicted scaling, {per_host}; batch " + ", ".join(
        f"{m} {b}/worker" for m, b in batches.items()
    )
    rates = {key: {label: c.rates() for label, c in lines.items()} for key, lines in curves.items()}
    paths = figures.whatif_grid(rates, models, bandwidths, title, stem)
    print(
        f"calibration: {calib.source}; parameters: {fit_path or 'defaults'}; compute: "
        f"{compute_source or 'calibrated or fitted'}"
    )
    for line in cluster_said:
        print(line)
    print("scaling efficiency = samples/s of W workers / (W x one worker alone)")
    for (model, bandwidth), lines in curves.items():
        print(
            f"{model} @ {bandwidth} (batch {batches[model]}/worker; one worker alone "
            f"{singles[model]:.1f} samples/s):"
        )
        for label, curve in lines.items():
            print("  " + describe_walls(label, curve, singles[model]))
    print(f"figure: {', '.join(map(str, paths))}", file=sys.stdout)
    return 0


# --------------------------------------------------------------------------- published


def run_published(args: argparse.Namespace) -> int:
    # deferred: the published clusters load only for `model published`
    from archbench.perfmodel.optimize.published import run_published as published

    return published(args)


# --------------------------------------------------------------------------- crossover map


def run_map(args: argparse.Namespace) -> int:
    # deferred: the map and its figures (matplotlib) load only for `model map`
    from archbench.perfmodel.optimize.crossover_report import run_map as map_study

    return map_study(args, study_calibration)
