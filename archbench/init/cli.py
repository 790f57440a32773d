"""`archbench init`: writes a starter study spec for the hosts of a hostfile, of the Slurm
allocation it runs in, or of an emulated cluster; the spec passes `archbench sweep --dry-run`
before it is written, and an existing file is kept unless --force. Every value given is checked
before anything is read: text that reaches the spec is one line (archbench.init.text), and -o is
a regular file or a new one (never a device or a folder; at most its own folder is made)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from archbench.common.errors import UsageError
from archbench.common.output_folder import file_problem
from archbench.init import hosts as hosts_of
from archbench.init import levels, workload
from archbench.init.link import link_rate
from archbench.init.text import render, user_values
from archbench.perfmodel.model.modelinfo import USER_DATA_INPUTS
from archbench.runtime.settings import SETTINGS, add_flag
from archbench.sweep.kinds import resolve_target
from archbench.sweep.plan import build_plan
from archbench.sweep.spec import load_spec

DEFAULT_OUT = "runs/first.yaml"
DEFAULT_STEPS = 100
DEFAULT_REPETITIONS = 3
_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init",
        help="write a starter study spec for your hosts (hostfile, Slurm allocation, or emulated)",
        description="Writes a starter study spec for the hosts of a hostfile (or the Slurm "
        "allocation it runs in, or an emulated cluster): worker counts that fit the hosts' "
        "slots, parameter-server placements where a spare host exists, the data set found here "
        "(or your own model and data: --model, --dataset), "
        "the link rate measured between the first two hosts (or --bandwidth), and repetitions "
        "for confidence intervals; its comments say what to change. Bad input: one line, exit 2.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--hostfile", default=None, help="Open MPI hostfile (host slots=N)")
    where.add_argument(
        "--cluster", default=None, metavar="NAME", help="an emulated cluster that is up"
    )
    parser.add_argument(
        "-o", "--out", default=DEFAULT_OUT, help=f"the spec to write (default {DEFAULT_OUT})"
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing spec")
    parser.add_argument(
        "--bandwidth",
        default=None,
        help="the hosts' link rate (e.g. 10gbit); default: measured between the first two hosts",
    )
    parser.add_argument(
        "--data-dir", default=None, help="folder of the Fashion-MNIST files (default: Debian's)"
    )
    add_flag(parser, SETTINGS["model"], default=None)
    add_flag(
        parser,
        SETTINGS["dataset"],
        default=None,
        help="fashion_mnist (the default), or your own: npz:FILE, npy:FOLDER, csv:FILE, "
        "series:FILE",
    )
    # how your own data is read (a table's columns, a series' windows), as training reads it
    for name in USER_DATA_INPUTS:
        add_flag(parser, SETTINGS[name], default=None)
    parser.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help=f"steps per run ({DEFAULT_STEPS})"
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=DEFAULT_REPETITIONS,
        help=f"runs of each configuration ({DEFAULT_REPETITIONS})",
    )
    parser.set_defaults(func=run)


def _checked_numbers(args: argparse.Namespace) -> None:
    warmup = int(SETTINGS["warmup_steps"].default)
    if args.steps <= warmup:
        raise UsageError(f"--steps {args.steps}: must be above the warm-up ({warmup} steps)")
    if not 1 <= args.repetitions <= 1000:
        raise UsageError(f"--repetitions {args.repetitions}: must be 1..1000")


def _study_name(out: Path) -> str:
    name = out.name.removesuffix(".yaml").removesuffix(".yml")
    if not _STUDY_NAME.fullmatch(name):
        raise UsageError(
            f"-o {out}: the file's name is the study's: letters, digits, '.', '_', '-'"
        )
    return name


def _checked_out(out: Path, force: bool) -> None:
    """-o names a file init may write: a regular file (kept unless --force) or a new one in a
    folder that exists or is one level below one."""
    problem = file_problem(out)
    if problem:
        raise UsageError(f"-o {out}: {problem}")
    if out.exists() and not force:
        raise UsageError(f"{out} exists; keep it, or pass --force to write over it")


def _write_checked(text: str, out: Path) -> None:
    """Writes `text` beside `out`, checks it as the sweep will (spec, cluster, plan), then
    moves it into place: a spec that would not sweep is never left behind, nor a folder made
    for it."""
    made = not out.parent.is_dir()
    out.parent.mkdir(exist_ok=True)  # checked: at most this one folder is new
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(text)
            spec = load_spec(temporary)
            build_plan(spec, resolve_target(spec))
            os.replace(temporary, out)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except BaseException:
        if made:
            os.rmdir(out.parent)
        raise


def _draft_design(text_for, out: Path) -> levels.Design:
    """The levels that fit, tried on a draft spec with every candidate level."""

    draft = levels.Design(list(levels.CANDIDATE_WORKERS), list(levels.PLACEMENTS))
    with tempfile.TemporaryDirectory(prefix="archbench-init-") as folder:
        path = Path(folder) / out.name
        path.write_text(text_for(draft))
        spec = load_spec(path)
        return levels.fit(spec, resolve_target(spec))


def run(args: argparse.Namespace) -> int:
    _checked_numbers(args)
    shaping = {name: getattr(args, name) for name in USER_DATA_INPUTS}
    user_values(
        {"--hostfile": args.hostfile, "--cluster": args.cluster, "-o": args.out,
         "--data-dir": args.data_dir, "--model": args.model, "--dataset": args.dataset,
         **{"--" + name.replace("_", "-"): value for name, value in shaping.items()
            if isinstance(value, str)}}
    )  # fmt: skip
    out = Path(args.out)
    study = _study_name(out)
    _checked_out(out, args.force)
    hosts = hosts_of.resolve(args.hostfile, args.cluster, os.environ)
    data = workload.find(args.data_dir, args.model, args.dataset, shaping)
    rate = link_rate(hosts, args.bandwidth)

    def text_for(design: levels.Design) -> str:
        return render(study, str(out), hosts, data, design, rate, args.steps, args.repetitions)

    design = _draft_design(text_for, out)
    _write_checked(text_for(design), out)
    names = ", ".join(f"{name}:{slots}" for name, slots in hosts.hosts)
    print(f"wrote {out}: a starter study for {hosts.source} ({names})")
    print(f"  data: {data.found}")
    print(f"  link: {rate[0] or 'not claimed'}: {rate[1]}")
    placements = ", ".join(design.placements) or "none (one host)"
    print(f"  workers: {', '.join(map(str, design.workers))}; ps placements: {placements}")
    print(f"next: archbench doctor --study {out}; archbench sweep {out} --dry-run", file=sys.stdout)
    return 0
