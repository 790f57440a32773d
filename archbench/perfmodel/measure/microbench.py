"""`archbench microbench`: what the performance model needs to know about this cluster.

Measured, each as records of kind `microbench` appended to --out and a table on stdout:
- point-to-point ping-pong between two ranks on one host (intra) and on two hosts (inter),
  over an OSU-style size ladder, with alpha and beta fitted to it;
- MPI_Allreduce and Horovod allreduce over every host (algorithm and bus bandwidth,
  busbw = algbw * 2(n-1)/n);
- push (assign) and pull (read) through one TensorFlow gRPC parameter server, and the server's
  own costs (between two hosts where there are two);
- forward+backward time of each model at each batch size on one worker.

The measuring ranks are started on the given hosts by the mpirun command line that a study's
runs get (archbench.sweep.commands.mpirun_argv).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archbench.common.archs import arch as architecture
from archbench.common.archs import uses_horovod
from archbench.common.errors import RunFailed, UsageError
from archbench.common.hosts import (
    HostSlots,
    host_list_text,
    parse_host_list,
    rank_hosts,
    read_hostfile,
    total_slots,
)
from archbench.common.jsonl import JsonProblem, read_json
from archbench.common.mpirun import mpirun_argv
from archbench.common.output_folder import folder_problem
from archbench.common.process_group import run_in_group
from archbench.perfmodel.measure.calibration import (
    calibration_from_records,
    fingerprint_of_hosts,
    load_calibration,
    update_of,
)
from archbench.perfmodel.model.modelinfo import USER_DATA_INPUTS, input_spec
from archbench.perfmodel.model.units import (
    MAX_LIST_ENTRIES,
    check_numbers,
    own_row,
    positive_ints,
)
from archbench.runtime import virtualtime
from archbench.runtime.launch import root_mpi_env
from archbench.runtime.settings import SETTINGS, add_flag
from archbench.sweep.kinds import kind_of, resolve_target
from archbench.sweep.spec import load_spec

if TYPE_CHECKING:
    from archbench.sweep.plan import PlannedRun

SCHEMA = "archbench.microbench/1"
BENCHES = ("pt2pt", "allreduce", "horovod", "ps", "compute")
DEFAULT_SIZES = "8,64,512,4K,32K,256K,1M,4M"
DEFAULT_OUT = "runs/microbench/results.jsonl"
MODELS = "mlp,wide_mlp"
# Limits of the ladders a user gives: each message is allocated on every rank, each sharing
# level starts that many processes on one host.
MAX_MESSAGE_BYTES = 1 << 30
MAX_COMPUTE_SHARING = 256
# microbench's own numbers (NaN would pass a `<= 0` check and reach mpirun)
OWN_NUMBERS = (
    own_row("compute_steps", "int", 1, 100_000),
    own_row("seconds_per_size", "float", 0, 3600, exclusive_minimum=True),
    own_row("timeout", "float", 0, 7 * 86400, exclusive_minimum=True),
)
_SIZE = re.compile(r"\s*(\d+)\s*([kmg]?)i?b?\s*", re.I)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "microbench",
        help="measure alpha/beta, allreduce, PS push/pull and compute time",
        description=__doc__.split("\n\n")[0],
    )
    add = parser.add_argument
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hostfile", default=None, help="Open MPI hostfile (host slots=N)")
    hosts.add_argument("-H", "--hosts", default=None, help="host list, e.g. node1,node2 or node1:2")
    hosts.add_argument(
        "--study",
        default=None,
        metavar="SPEC",
        help="calibrate a study's cluster (runs/<study>.yaml): brought up as its sweep does, "
        "with its models and batch sizes; written to runs/<study>/calibration.jsonl, reused "
        "while it holds a calibration of the same kind of cluster",
    )
    add("--force", action="store_true", help="--study: measure again even when reusable")
    add(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"message sizes in bytes, K/M/G binary suffixes (default {DEFAULT_SIZES})",
    )
    add(
        "--benches",
        default=None,
        help=f"which measurements, comma separated (default all: {','.join(BENCHES)}; with "
        "--study, those the performance model prices the study's runs with)",
    )
    add("--models", default=MODELS, help="models for the compute measurement")
    add("--batch-sizes", default="32,64,128", help="per-worker batch sizes for compute")
    add_flag(parser, SETTINGS["dataset"], default="fashion_mnist")
    # how a user's data set is read (a table's columns, a series' windows), as training reads it
    for name in USER_DATA_INPUTS:
        add_flag(parser, SETTINGS[name], default=None)
    add(
        "--compute-steps",
        type=int,
        default=20,
        help="timed steps per model and batch size",
    )
    add(
        "--threads",
        type=int,
        default=0,
        help="TensorFlow threads per process for compute (default 0: as archbench.train picks "
        "for a rank alone on its host; match the study's `threads`)",
    )
    add(
        "--compute-sharing",
        default="1,3",
        help="processes computing at once on the first host (1 = alone; more measures how "
        "compute slows down when ranks share cores; default 1,3)",
    )
    add(
        "--seconds-per-size",
        type=float,
        default=0.3,
        help="time spent per message size (sets the iteration count)",
    )
    add(
        "--allreduce-algorithms",
        default="ring",
        help="MPI allreduce algorithms Horovod is timed with, comma separated: those the study's "
        "ring runs use (--allreduce-algorithm; default ring)",
    )
    add(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds each measuring job may take",
    )
    add("--out", default=DEFAULT_OUT, help=f"results file (default {DEFAULT_OUT})")
    parser.set_defaults(func=run)


# --------------------------------------------------------------------------- inputs


def parse_sizes(text: str) -> list[int]:
    """'8,1K,4M' -> [8, 1024, 4194304] (binary multiples, as the OSU benchmarks print them)."""
    sizes = []
    for part in text.split(","):
        if not part.strip():
            continue
        match = _SIZE.fullmatch(part)
        if not match:
            raise UsageError(f"cannot read message size {part.strip()!r} (examples: 8, 64K, 4M)")
        scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2).lower()]
        value = int(match.group(1)) * scale
        if not 1 <= value <= MAX_MESSAGE_BYTES:
            raise UsageError(f"message sizes must be 1 byte to 1G (1 GiB), got {part.strip()!r}")
        sizes.append(value)
    if not sizes:
        raise UsageError("--sizes names no size")
    if len(set(sizes)) > MAX_LIST_ENTRIES:
        raise UsageError(f"--sizes lists {len(set(sizes))} sizes; at most {MAX_LIST_ENTRIES}")
    return sorted(set(sizes))


def allreduce_algorithms(text: str) -> list[str]:
    choices = SETTINGS["allreduce_algorithm"].choices
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in choices]
    if unknown or not names:
        raise UsageError(f"--allreduce-algorithms {text!r}: choose from {', '.join(choices)}")
    return names


def resolve_hosts(args: argparse.Namespace) -> list[HostSlots]:
    if args.hostfile:
        return read_hostfile(args.hostfile)
    if args.hosts:
        return parse_host_list(args.hosts)
    return [HostSlots("localhost", max(os.cpu_count() or 2, 2))]


# --------------------------------------------------------------------------- launching


def _mpi_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(root_mpi_env())
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


# What every measuring rank needs from the driver's environment.
FORWARD_ENV = ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")


def job_argv(blocks: list[HostSlots], python: str, program: list[str]) -> list[str]:
    """The measuring ranks over exactly these (host, ranks) blocks, launched as a study's runs
    are (archbench.sweep.commands.mpirun_argv), oversubscribing where a job has more ranks than
    a host has cores."""
    return mpirun_argv(
        total_slots(blocks),
        blocks,
        [python, "-m", "archbench.perfmodel.measure.mb_ranks", *program],
        forward_env=FORWARD_ENV,
        launcher_args=["--oversubscribe"],
    )


def run_job(argv: list[str], result_file: Path, timeout_s: float) -> list[dict[str, Any]]:
    """Run one measuring job in its own process group; the whole group is killed on timeout or
    interrupt so no rank is left behind."""
    env = _mpi_env()
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")) if p
    )
    try:
        done = run_in_group(argv, timeout_s=timeout_s, env=env, merge_stderr=True)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"`{' '.join(argv[:6])} ...` took longer than {timeout_s:g}s") from None
    if done.returncode != 0 or not result_file.is_file():
        tail = "\n".join(done.stdout.strip().splitlines()[-8:])
        raise RunFailed(f"`{' '.join(argv)}` failed (status {done.returncode}):\n{tail}")
    try:
        return read_json(result_file)
    except JsonProblem as exc:
        raise RunFailed(f"{result_file}: {exc}") from None


# --------------------------------------------------------------------------- plan


def data_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given that shape a user's samples (none for a built-in data set)."""
    return {
        name: getattr(args, name) for name in USER_DATA_INPUTS if getattr(args, name) is not None
    }


def plan_jobs(
    hosts: list[HostSlots], benches: set[str], sizes: list[int], args: argparse.Namespace
) -> list[tuple[str, str, list[HostSlots], list[str]]]:
    """(bench, scope, host blocks, program args) of each measuring job."""
    common = [
        "--sizes",
        ",".join(map(str, sizes)),
        "--seconds-per-size",
        str(args.seconds_per_size),
    ]
    first = hosts[0][0]
    intra = [HostSlots(first, 2)]
    inter = [HostSlots(name, 1) for name, _ in hosts] if len(hosts) > 1 else None
    jobs = []
    if benches & {"pt2pt", "allreduce"}:
        # the ping-pong needs two ranks; MPI's own allreduce, every host
        mpi = ["mpi", *common] if "allreduce" in benches else ["mpi", *common, "--no-allreduce"]
        jobs.append(("mpi", "intra", intra, mpi))
        if inter:
            jobs.append(("mpi", "inter", inter if "allreduce" in benches else inter[:2], mpi))
    if "horovod" in benches:
        for algorithm in allreduce_algorithms(args.allreduce_algorithms):
            program = ["horovod", *common, "--allreduce-algorithm", algorithm]
            if inter:
                # every ring size the hosts allow: the fixed cost of a call grows with it
                for ranks in range(2, len(inter) + 1):
                    jobs.append(("horovod", "inter", inter[:ranks], program))
            else:
                jobs.append(("horovod", "intra", intra, program))
    if "ps" in benches:
        # The server's costs (per request, per byte absorbed and applied) are its own CPU's,
        # whichever host its client is on: timed once, between two hosts where there are two.
        if inter:
            pair = [inter[0], inter[1]]
            jobs.append(
                ("ps", "inter", pair, ["ps", *common, "--hosts", f"{pair[0][0]},{pair[1][0]}"])
            )
        else:
            jobs.append(("ps", "intra", intra, ["ps", *common, "--hosts", f"{first},{first}"]))
    if "compute" in benches:
        for sharing in positive_ints(
            args.compute_sharing, "--compute-sharing", MAX_COMPUTE_SHARING
        ):
            scope = "single" if sharing == 1 else f"shared x{sharing}"
            program = ["compute", "--models", args.models, "--batch-sizes", args.batch_sizes,
                       "--dataset", args.dataset, "--steps", str(args.compute_steps),
                       "--threads", str(args.threads)]  # fmt: skip
            shaping = data_settings(args)
            if shaping:
                program += ["--data-settings", json.dumps(shaping)]
            jobs.append(("compute", scope, [HostSlots(first, sharing)], program))
    return jobs


# --------------------------------------------------------------------------- output


def _human_bytes(n: float) -> str:
    for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def print_table(rows: list[dict[str, Any]]) -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["bench"], row.get("scope", ""), row.get("ranks")), []).append(row)
    for (bench, scope, _ranks), members in groups.items():
        hosts = members[0].get("hosts")
        print(f"\n{bench} ({scope}; ranks on {','.join(hosts) if hosts else '?'})")
        if bench == "pt2pt":
            print(f"{'size':>8} {'one-way us':>12} {'MB/s':>10} {'iters':>6}")
            for r in members:
                print(
                    f"{_human_bytes(r['size_bytes']):>8} {r['one_way_s'] * 1e6:12.1f} "
                    f"{r['bandwidth_Bps'] / 1e6:10.1f} {r['iterations']:6d}"
                )
        elif bench.startswith("allreduce"):
            print(f"{'size':>8} {'time us':>12} {'algbw MB/s':>11} {'busbw MB/s':>11} {'ranks':>6}")
            for r in members:
                print(
                    f"{_human_bytes(r['size_bytes']):>8} {r['time_s'] * 1e6:12.1f} "
                    f"{r['algbw_Bps'] / 1e6:11.1f} {r['busbw_Bps'] / 1e6:11.1f} {r['ranks']:6d}"
                )
        elif bench == "ps_requests":
            print(f"{'requests':>8} {'time us':>12}")
            for r in members:
                print(f"{r['requests']:8d} {r['time_s'] * 1e6:12.1f}")
        elif bench.startswith("ps_"):
            print(f"{'size':>8} {'time us':>12} {'MB/s':>10}")
            for r in members:
                print(
                    f"{_human_bytes(r['size_bytes']):>8} {r['time_s'] * 1e6:12.1f} "
                    f"{r['bandwidth_Bps'] / 1e6:10.1f}"
                )
        elif bench == "compute":
            print(
                f"{'model':>10} {'batch':>6} {'compute ms':>11} {'update ms':>9} {'step ms':>9}"
                f" {'sharing':>8}"
            )
            for r in members:
                print(
                    f"{r['model']:>10} {r['batch_size']:6d} {r['compute_s_median'] * 1e3:11.2f} "
                    f"{update_of(r) * 1e3:9.2f} "
                    f"{r['step_s_median'] * 1e3:9.2f}"
                    f" {r.get('sharing', 1):8d}"
                )
        elif bench == "alpha_beta":
            for r in members:
                print(
                    f"  alpha {r['alpha_s'] * 1e6:.1f} us, beta {r['beta_s_per_byte'] * 1e9:.3f} ns/B"
                    f" ({8 / r['beta_s_per_byte'] / 1e6:.0f} Mbit/s)"
                )


def shaped_link(hosts: list[str]) -> tuple[str | None, float | None]:
    """The emulated cluster's link rate when the hosts are its nodes (None on real hosts)."""
    try:
        # deferred: inside the ImportError guard for a build without archbench.cluster
        from archbench.cluster.state import current_link
    except ImportError:
        return None, None
    link = current_link(hosts)
    if not link:
        return None, None
    # deferred: loads only on an emulated cluster's link
    from archbench.common.bandwidth import parse_bandwidth

    return link, parse_bandwidth(link)


def run(args: argparse.Namespace) -> int:
    # before a study's cluster comes up or a job is launched
    check_numbers(args, [*OWN_NUMBERS, *(SETTINGS[n] for n in ("threads", *USER_DATA_INPUTS))])
    if args.study:
        return run_for_study(args)
    return measure(args, resolve_hosts(args))


def run_for_study(args: argparse.Namespace) -> int:
    """The calibration a study needs, on the study's own cluster: brought up as its sweep
    would bring it up (its nodes, link rate and dilation) and down again if this brought it up;
    the models, batch sizes, threads and allreduce algorithm of its runs. Written beside its
    records (runs/<study>/calibration.jsonl), and not measured again while that file holds a
    calibration of the same kind of cluster (--force: measure anyway)."""
    # deferred: the sweep's planner loads only for --study
    from archbench.sweep.plan import build_plan

    spec = load_spec(args.study)
    target = resolve_target(spec)
    runs = build_plan(spec, target).runs
    if args.out == DEFAULT_OUT:
        args.out = str(spec.results_dir / "calibration.jsonl")
    ring_runs = [r.config for r in runs if uses_horovod(r.arch)]
    args.allreduce_algorithms = ",".join(
        sorted({str(c.get("allreduce_algorithm") or "ring") for c in ring_runs}) or ["ring"]
    )
    models = sorted({str(r.config["model"]) for r in runs if r.config.get("model")})
    if models and args.models == MODELS:
        args.models = ",".join(models)
        args.dataset = str(runs[0].config.get("dataset") or args.dataset)
        for name in USER_DATA_INPUTS:  # a user's data is read as the study's runs read it
            if getattr(args, name) is None:
                setattr(args, name, runs[0].config.get(name))
        batches = sorted({int(r.config["batch_size"]) for r in runs if r.config.get("batch_size")})
        args.batch_sizes = ",".join(map(str, batches)) or args.batch_sizes
        args.threads = int(runs[0].config.get("threads") or args.threads)
    cluster = kind_of(target).manager(
        target, spec, None, lambda line: print(f"[microbench] {line}", file=sys.stderr, flush=True)
    )
    if cluster is not None:
        cluster.check_ready({target.bandwidth} if target.bandwidth else set())
    try:
        if cluster is not None:
            cluster.ensure(target.bandwidth)
        hosts = [HostSlots(name, 1) for name, _ in target.hosts]
        here = fingerprint_of_hosts([name for name, _ in hosts])
        if args.benches is None:
            args.benches, why = study_benches(runs, here)
            print(f"[microbench] measuring {args.benches}: {why}", file=sys.stderr, flush=True)
        out = Path(args.out)
        if out.is_file() and not args.force:
            known = load_calibration(out, here)
            if known.measured:
                print(
                    f"{out} already holds a calibration of this kind of cluster "
                    f"({', '.join(known.measured)} measured); reusing it (--force to measure again)"
                )
                return 0
        return measure(args, hosts)
    finally:
        if cluster is not None:
            cluster.close()


def study_benches(runs: list[PlannedRun], here: dict[str, Any]) -> tuple[str, str]:
    """The measurements the performance model prices a study's runs with (`--benches`), and
    why the others are left out. MPI's own allreduce only fills the table. Compute is the fit's
    from the study's own `single` runs where every model and batch size has them, and its
    slow-down with processes sharing cores is nil where each process has cores of its own: one
    per host, or on a dilated node no more processes than its virtual cores."""
    benches = ["pt2pt"]
    left_out = ["allreduce (MPI's own: the model does not price with it)"]
    if any(uses_horovod(run.arch) and len(run.layout) > 1 for run in runs):
        benches.append("horovod")
    if any(architecture(run.arch).has_servers for run in runs):
        benches.append("ps")
    workloads = {(run.config.get("model"), run.config.get("batch_size")) for run in runs}
    timed = {
        (run.config.get("model"), run.config.get("batch_size"))
        for run in runs
        if architecture(run.arch).is_baseline
    }
    per_node = here.get("vcpus_per_node") if here.get("dilation") else None
    cores_each = here.get("vcpus_per_process") or 1
    shared = any(
        virtualtime.crowded(ranks, per_node, cores_each) if per_node else ranks > 1
        for run in runs
        for _, ranks in run.layout
    )
    if workloads <= timed and not shared:
        left_out.append(
            "compute (the fit takes it from the study's single runs, and no process shares "
            "its cores)"
        )
    else:
        benches.append("compute")
    return ",".join(benches), "left out " + "; ".join(left_out)


def measure(args: argparse.Namespace, hosts: list[HostSlots]) -> int:
    # deferred: the record package (subprocess, platform) loads only when benches run
    from archbench.record import append_record
    from archbench.runtime.environment import environment, new_run_id, now_iso

    sizes = parse_sizes(args.sizes)
    benches = {b.strip() for b in (args.benches or ",".join(BENCHES)).split(",") if b.strip()}
    unknown = benches - set(BENCHES)
    if unknown or not benches:
        raise UsageError(
            f"unknown bench {', '.join(sorted(unknown)) or '(none)'} (choose from {', '.join(BENCHES)})"
        )
    positive_ints(args.batch_sizes, "--batch-sizes", SETTINGS["batch_size"].maximum)
    positive_ints(args.compute_sharing, "--compute-sharing", MAX_COMPUTE_SHARING)
    if "compute" in benches:
        # deferred: archbench.workloads.models loads only for the compute bench
        from archbench.workloads.models import check_model_name

        for model in args.models.split(","):
            check_model_name(model, args.dataset)
        # a user's data set is read here once, so a file that will not load is one line
        input_spec({"dataset": args.dataset, **data_settings(args)})
    out = Path(args.out)
    if out.exists() and out.is_dir():
        raise UsageError(f"--out {out} is a folder; give a .jsonl file")
    problem = folder_problem(out.parent)
    if problem:
        raise UsageError(f"--out {out} cannot be written: {problem}")
    link, link_bits = shaped_link([name for name, _ in hosts])
    allreduce_algorithms(args.allreduce_algorithms)
    fingerprint = fingerprint_of_hosts([name for name, _ in hosts])
    python = sys.executable
    run_id = new_run_id()
    started = now_iso()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="archbench-mb-") as scratch:
        for index, (kind, scope, blocks, program) in enumerate(
            plan_jobs(hosts, benches, sizes, args)
        ):
            result_file = Path(scratch) / f"job{index}.json"
            argv = job_argv(blocks, python, [*program, "--result-file", str(result_file)])
            print(
                f"[microbench] {kind} ({scope}) on {host_list_text(blocks)}",
                file=sys.stderr,
                flush=True,
            )
            begin = time.perf_counter()
            for row in run_job(argv, result_file, args.timeout):
                if row["bench"] == "pt2pt" and "pt2pt" not in benches:
                    continue
                hosts_of_ranks = rank_hosts(blocks)[: row.get("ranks", 1)]
                row.update(
                    scope=scope, hosts=hosts_of_ranks, launcher="mpirun", fingerprint=fingerprint
                )
                if scope == "inter" and link_bits:
                    row["link"], row["link_bits"] = link, link_bits
                rows.append(row)
            print(
                f"[microbench]   done in {time.perf_counter() - begin:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    # alpha and beta fitted to each ping-pong ladder, kept as records of their own
    calib = calibration_from_records(
        ({"kind": "microbench", **r} for r in rows),
        "this run",
        allreduce_algorithms(args.allreduce_algorithms)[0],
    )
    for scope, path in (("intra", calib.intra), ("inter", calib.inter)):
        if path is not None and any(r["bench"] == "pt2pt" and r["scope"] == scope for r in rows):
            rows.append(
                {
                    "bench": "alpha_beta",
                    "scope": scope,
                    "alpha_s": path.alpha_s,
                    "beta_s_per_byte": path.beta_s_per_byte,
                    "hosts": next(
                        r["hosts"] for r in rows if r["bench"] == "pt2pt" and r["scope"] == scope
                    ),
                    "fingerprint": fingerprint,
                }
            )
    env = environment()
    out.parent.mkdir(parents=True, exist_ok=True)
    for row in rows:
        append_record(
            str(out),
            {
                "schema": SCHEMA,
                "kind": "microbench",
                "run_id": run_id,
                "started_at": started,
                "finished_at": now_iso(),
                "status": "ok",
                **row,
                "env": env,
            },
        )
    print_table(rows)
    if calib.link_efficiency > 1.0:
        print(
            f"\nbetween hosts the ping-pong reached 1/{calib.link_efficiency:.2f} of the {link} links"
        )
    for line in calib.describe_server_costs():
        print(f"\n{line}")
    if calib.cpu_contention:
        print(
            f"\ncompute slows down by {calib.cpu_contention:.2f}x per extra process on the same cores"
        )
    print(f"\n{len(rows)} records appended to {out}")
    return 0
