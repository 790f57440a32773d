"""`archbench predict`: the model's step time of one configuration, split into compute and
communication, and the samples per second it implies."""

from __future__ import annotations

import argparse
import json
import math
import sys

from archbench.common.archs import gathers_rows
from archbench.common.bandwidth import format_bits as format_bandwidth
from archbench.common.bandwidth import parse_bandwidth
from archbench.common.errors import UsageError
from archbench.perfmodel.fit.fitfile import (
    DEFAULT_CALIBRATION,
    default_calibration,
    model_inputs,
    override_compute,
)
from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.modelinfo import (
    INPUT_SETTINGS,
    embedding_shape,
    input_spec,
    ps_plan,
    shapes_only,
    variable_bytes,
    vocab_of,
)
from archbench.perfmodel.model.predictor import StepConfig, default_placement, predict_step
from archbench.perfmodel.model.units import check_numbers, emulated_burst_bytes
from archbench.runtime.settings import (
    ALL,
    SERVER_PLACEMENTS,
    SETTINGS,
    Setting,
    add_flag,
    combination_problem,
)
from archbench.workloads.models import check_model_name

# setting -> what predict asks differently from training (argparse keywords)
PREDICT_SETTINGS: dict[str, dict] = {
    "arch": {"required": True, "default": None},
    "workers": {"default": 1, "help": "worker processes (default 1)"},
    "num_ps": {"help": "PS tasks (ps only, default 1)"},
    "model": {"required": True, "default": None},
    # the settings that decide the model's input shape and outputs, as `archbench train` reads them
    **{name: {} for name in INPUT_SETTINGS},
    "dataset": {"help": "decides the model's input shape and outputs (your own: read from it)"},
    "batch_size": {"required": True, "default": None, "help": "per worker"},
    "bandwidth": {
        "help": "link between hosts, e.g. 200mbit, 1gbit, 10gbit/s (default: the calibrated path)"
    },
    "sync": {"default": True},
    "ps_sharding": {},
    "p2p_schedule": {},
    "fusion_threshold_mb": {},
    "compression": {},
    "compression_ratio": {},
    "powersgd_rank": {},
    "sync_every": {},
    "sparse_exchange": {},
}


def _positive_float(name: str, maximum: float) -> Setting:
    return Setting(
        name, "float", None, ALL, scope="predict", minimum=0, exclusive_minimum=True,
        maximum=maximum,
    )  # fmt: skip


# A host per rank at most: every worker and every server on a host of its own.
MAX_HOSTS = SETTINGS["workers"].maximum + SETTINGS["num_ps"].maximum

# predict's own numeric inputs, ranged the way the registry ranges the shared ones
PREDICT_INPUTS: dict[str, Setting] = {
    row.name: row
    for row in (
        Setting("hosts", "int", None, ALL, scope="predict", minimum=1, maximum=MAX_HOSTS),
        Setting("compute_ms", "float", None, ALL, scope="predict", minimum=0, maximum=1e9),
        _positive_float("touched_rows", 1e12),
        _positive_float("param_bytes", 1e15),
    )
}


def check_ranges(args: argparse.Namespace) -> None:
    """Every numeric flag within its range (NaN and inf refused), and the input settings
    together as `train` takes them; UsageError naming the first problem."""
    problem = combination_problem(input_config(args))
    if problem:
        raise UsageError(problem)
    if args.bandwidth:
        parse_bandwidth(args.bandwidth)  # refused before any file is read
    check_numbers(args, [SETTINGS[name] for name in PREDICT_SETTINGS])
    check_numbers(args, PREDICT_INPUTS.values())


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="predicted step time (compute / communication) and samples/s of a configuration",
        description=__doc__,
    )
    add = parser.add_argument
    # the settings predict shares with training, from the registry
    for name, override in PREDICT_SETTINGS.items():
        add_flag(parser, SETTINGS[name], **override)
    add(
        "--placement",
        default="dedicated",
        choices=sorted(SERVER_PLACEMENTS - {"one-host"}),  # the model prices links between hosts
        help="PS on hosts of their own, or beside workers (default dedicated)",
    )
    add(
        "--hosts",
        type=int,
        default=None,
        help="number of hosts (default: one per rank); ranks are dealt round-robin over them",
    )
    add(
        "--emulated",
        action="store_true",
        help="archbench's emulated cluster: all ranks share this machine's cores, and the "
        "shaped links let a token-bucket burst through",
    )
    add(
        "--param-bytes",
        type=float,
        default=None,
        help="gradient bytes per step (default: counted from the model)",
    )
    compute = parser.add_mutually_exclusive_group()
    compute.add_argument(
        "--compute-ms",
        type=float,
        default=None,
        help="per-step compute time of one worker alone at this batch, e.g. measured on a GPU "
        "elsewhere (default: calibrated or fitted)",
    )
    compute.add_argument(
        "--compute-from",
        default=None,
        metavar="FILE",
        help="the model's compute line from another machine's microbench results.jsonl",
    )
    add(
        "--calibration",
        default=None,
        help=f"microbench results.jsonl (alpha, beta, compute; default {DEFAULT_CALIBRATION} "
        "when it exists)",
    )
    add(
        "--touched-rows",
        type=float,
        default=None,
        help="--sparse-exchange sparse: the unique embedding rows one worker's batch touches per "
        "step (a sparse run records it as comm.sparse_exchange.rows_per_step)",
    )
    add("--fit", default=None, help="perfmodel_fit.json from `archbench model fit`")
    add("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=run)


def input_config(args: argparse.Namespace) -> dict:
    """The settings that decide the model's input, as `archbench train` reads them."""
    return {name: getattr(args, name) for name in INPUT_SETTINGS}


def build_config(args: argparse.Namespace) -> StepConfig:
    check_ranges(args)
    problem = combination_problem(
        {
            "arch": args.arch,
            "sync": args.sync,
            "sync_every": args.sync_every,
            "compression": args.compression,
            "sparse_exchange": args.sparse_exchange,
            "dataset": args.dataset,
            "model": args.model,
        }
    )
    if problem:
        raise UsageError(problem)
    sparse = args.sparse_exchange == "sparse"
    if sparse and args.touched_rows is None and not gathers_rows(args.arch):
        raise UsageError(
            f"--sparse-exchange sparse on {args.arch} needs --touched-rows: the unique embedding "
            "rows one worker's batch touches per step (comm.sparse_exchange.rows_per_step of a "
            "sparse run)"
        )
    if args.touched_rows is not None and not sparse:
        raise UsageError("--touched-rows applies only with --sparse-exchange sparse")
    placement = default_placement(args.arch, args.workers, args.num_ps, args.placement, args.hosts)
    bandwidth = parse_bandwidth(args.bandwidth) if args.bandwidth else None
    sizes = shapes = table = looked_up = None
    plan = None
    if args.param_bytes is not None:
        if sparse:
            raise UsageError(
                "--sparse-exchange sparse prices the model's own embedding: drop --param-bytes"
            )
        param_bytes = float(args.param_bytes)
    else:
        check_model_name(args.model, args.dataset)
        shape, classes = input_spec(input_config(args))
        vocab = vocab_of(input_config(args))
        sizes = variable_bytes(args.model, shape, classes, vocab)
        shapes = shapes_only(args.model, shape, classes, vocab)
        param_bytes = float(sum(sizes))
        if placement.ps_hosts:
            plan = ps_plan(
                args.model, shape, classes, len(placement.ps_hosts), args.ps_sharding, vocab
            )
        table = embedding_shape(args.model, shape, classes, vocab) if sparse else None
        looked_up = args.batch_size * math.prod(shape) if sparse else None
        if sparse and table is None:
            raise UsageError(
                f"--sparse-exchange sparse: model {args.model!r} has no embedding whose rows "
                "could travel sparse"
            )
    return StepConfig(
        arch=args.arch,
        model=args.model,
        batch_size=args.batch_size,
        param_bytes=param_bytes,
        placement=placement,
        bandwidth_bits=bandwidth,
        sync=args.sync,
        ps_sharding=args.ps_sharding,
        variable_bytes=sizes,
        ps_plan=plan,
        fusion_threshold_mb=args.fusion_threshold_mb,
        compression=args.compression,
        compression_ratio=args.compression_ratio,
        powersgd_rank=args.powersgd_rank,
        variable_shapes=shapes,
        p2p_schedule=args.p2p_schedule,
        cpu_sharing_ranks=len(placement.hosts) if args.emulated else 1,
        link_burst_bytes=emulated_burst_bytes(args.bandwidth) if args.emulated else 0.0,
        sync_every=args.sync_every or 1,
        sparse_exchange=args.sparse_exchange or "dense",
        touched_rows=args.touched_rows,
        embedding_shape=table,
        rows_looked_up=looked_up,
    )


def run(args: argparse.Namespace) -> int:
    check_ranges(args)
    params, calib = model_inputs(args.fit, default_calibration(args.calibration))
    compute_ms = {} if args.compute_ms is None else {args.model: args.compute_ms}
    compute_source = override_compute(params, [args.model], compute_ms, args.compute_from)
    config = build_config(args)
    prediction = predict_step(config, params, calib)
    if args.json:
        out = {
            "config": {
                "arch": config.arch,
                "model": config.model,
                "workers": config.num_workers,
                "num_ps": config.num_ps,
                "batch_size": config.batch_size,
                "param_bytes": config.param_bytes,
                "bandwidth_bits": config.bandwidth_bits,
                "sync": config.sync,
                "sync_every": config.sync_every,
                "hosts": list(config.placement.hosts),
                "roles": list(config.placement.roles),
            },
            "prediction": prediction.to_json(),
            "calibration": calib.source,
            "compute": compute_source or "calibrated or fitted",
        }
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    print(
        f"{config.arch} {config.model}: {config.num_workers} workers"
        + (
            f", {config.num_ps} PS ({args.placement}, {'sync' if config.sync else 'async'})"
            if config.placement.ps_hosts
            else ""
        )
        + f", batch {config.batch_size}/worker, link {format_bandwidth(config.bandwidth_bits)},"
        f" gradients {config.param_bytes / 1e6:.3f} MB"
    )
    print(f"  compute          {prediction.compute_s * 1e3:10.3f} ms")
    print(
        f"  communication    {prediction.comm_s * 1e3:10.3f} ms"
        f"  (exposed {prediction.exposed_comm_s * 1e3:.3f} ms)"
    )
    print(f"  step             {prediction.step_s * 1e3:10.3f} ms")
    print(f"  throughput       {prediction.samples_per_s:10.1f} samples/s")
    terms = prediction.terms
    if "busiest_ps_bytes" in terms:
        origin = "measured" if "ps_request_s" in calib.measured else "calibration default"
        # the exposed term is a worker's own chain of requests unless the server's outlast its link
        exposed = (
            f"a worker's own {int(terms['worker_requests'])} requests, one after another"
            if terms["requests_s"] <= terms["worker_requests_s"] * (1 + 1e-9)
            else "what outlasts its link's transfers"
        )
        print(
            f"  busiest server   ps{int(terms['busiest_ps'])}: "
            f"{terms['busiest_ps_bytes'] / 1e6:.3f} MB in {int(terms['busiest_ps_variables'])} "
            f"variables (mean {terms['mean_ps_bytes'] / 1e6:.3f} MB per server, "
            f"{args.ps_sharding}); {int(terms['busiest_ps_requests'])} tensor requests per step "
            f"at {terms['per_request_s'] * 1e6:.1f} us each ({origin}) = {terms['server_requests_s'] * 1e3:.3f} ms "
            f"of its time, per-request cost {terms['requests_s'] * 1e3:.3f} ms ({exposed}); "
            f"absorbing {config.num_workers} gradients and updating its shard "
            f"{terms['server_update_s'] * 1e3:.3f} ms"
        )
    name, share = prediction.dominant
    print(
        "  step terms       "
        + ", ".join(
            f"{k} {v * 1e3:.3f} ms"
            for k, v in sorted(prediction.parts.items(), key=lambda kv: -kv[1])
            if v > 0 or k == F.COMPUTE
        )
    )
    line = f"  dominant term    {name} ({share:.0%} of the step)"
    if name == F.COMPUTE and len(prediction.parts) > 1:
        other, other_share = prediction.dominant_overhead
        line += f"; besides compute: {other} ({other_share:.0%})"
    print(line)
    print(
        f"  (calibration: {calib.source}; parameters: {args.fit or 'defaults'}; compute: "
        f"{compute_source or 'calibrated or fitted'})"
    )
    return 0
