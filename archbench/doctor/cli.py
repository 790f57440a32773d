"""`archbench doctor`: checks that a study can run on the hosts of a hostfile (or `-H`, a
study's cluster, or the Slurm allocation it runs in), one line per problem naming the host and
the fix; exit status 0 only when every check passed."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from archbench.common.bandwidth import Bandwidth
from archbench.common.errors import UsageError
from archbench.common.hosts import check_host_name, parse_host_list, read_hostfile
from archbench.doctor.dataset import DataSet
from archbench.doctor.problems import Problem
from archbench.runtime.settings import SETTINGS, LevelError

# In the order they run: each needs the hosts the ones before it found usable.
CHECKS = ("ssh", "versions", "model", "data", "mpirun", "links")
# Data sets whose samples are made, not read: nothing to check on the hosts.
MADE_UP = ("synthetic",)


@dataclass
class Inputs:
    """What doctor checks: the hosts, the interpreter of the runs, the data, the link claimed."""

    hosts: list[str]
    python: str
    data_sets: list[DataSet]
    claim: Bandwidth | None = None
    models: list[str] = field(default_factory=list)  # the user's --model values (files to compare)
    controllers: set[str] = field(default_factory=set)  # Horovod controllers the study names
    source: str = ""  # where the hosts came from, for the summary
    # the hosts are the nodes of the Slurm allocation doctor runs in: probed through srun
    through_srun: bool = False


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check that a study can run on your hosts (ssh, versions, mpirun, ports, data, links)",
        description="Checks that a study can run on the hosts of a hostfile (or -H, a study's "
        "cluster, or the Slurm allocation it runs in): ssh without a password, the same stack "
        "as here, a job across every host under mpirun, ports for parameter servers, the data "
        "set on every host and the links' rate. One line per problem naming the host and the "
        "fix; exit status 0 only when every check passed, 1 when one failed, 2 on bad input.",
    )
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hostfile", default=None, help="Open MPI hostfile (host slots=N)")
    hosts.add_argument("-H", "--hosts", default=None, help="host list, e.g. node1,node2")
    parser.add_argument(
        "--study",
        default=None,
        metavar="SPEC",
        help="take the hosts, interpreter, data sets, Horovod controllers and link rate from a "
        "study spec (runs/<study>.yaml); the other options override it",
    )
    parser.add_argument(
        "--bandwidth",
        default=None,
        help="the link rate you expect between hosts (e.g. 1gbit): links measured below 80%% of "
        "it are problems (default: only measure)",
    )
    parser.add_argument(
        "--dataset",
        default=None,
        type=_setting_value("dataset"),
        help="the data set to find on every host (default fashion_mnist, or the study's); a "
        "user's (npz:FILE, npy:FOLDER, csv:FILE, series:FILE) must have the same sha256 there",
    )
    parser.add_argument(
        "--model",
        default=None,
        type=_setting_value("model"),
        help="a user's model (FILE.py:FUNCTION, package.module:FUNCTION, FILE.keras, FILE.h5) "
        "whose file must have the same sha256 on every host (default: the study's models)",
    )
    parser.add_argument("--data-dir", default=None, help="folder of the data set's files")
    parser.add_argument("--text-file", default=None, help="corpus of --dataset text or words")
    parser.add_argument(
        "--python",
        default=None,
        help="the runs' interpreter on every host (default: this one, or the study's python:)",
    )
    parser.add_argument(
        "--checks",
        default=",".join(CHECKS),
        help=f"which checks, comma separated (default all: {','.join(CHECKS)}); ssh always runs",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="read versions without importing TensorFlow (Horovod's controllers are not "
        "compared); with --checks ssh,versions these are the checks a sweep makes before its "
        "first run",
    )
    parser.set_defaults(func=run)


# --------------------------------------------------------------------------- inputs


def _setting_value(name: str):
    """An argparse type checking a value as the registry's row checks it (one line when not)."""

    def parse(text: str) -> str:
        try:
            SETTINGS[name].check(text)
        except (LevelError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


def _user_models(models: list[str]) -> list[str]:
    """The user's models among `models` (a built-in one has no file to compare)."""
    # deferred: archbench.workloads.models loads numpy; only models given need it
    from archbench.workloads.models import model_source

    return [model for model in dict.fromkeys(models) if model_source(model).user]


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(check_host_name(name) for name in names))


def _from_study(path: str) -> Inputs:
    """Hosts, interpreter, data sets, controllers and link claim of a study's cluster and runs."""
    # deferred: the sweep's planner (subprocess, shlex) loads only for --study
    from archbench.sweep.commands import default_python
    from archbench.sweep.kinds import SRUN, kind_of, resolve_target
    from archbench.sweep.plan import build_plan
    from archbench.sweep.spec import load_spec

    spec = load_spec(path)
    target = resolve_target(spec)
    kind = kind_of(target)
    kind.check_up(target, spec)
    runs = build_plan(spec, target).runs
    data_sets = list(
        dict.fromkeys(
            DataSet(
                # a setting left unset is None in a run's config: the registry's default then
                run.config.get("dataset") or SETTINGS["dataset"].default,
                run.config.get("data_dir"),
                run.config.get("text_file"),
            )
            for run in runs
        )
    )
    controllers = {str(run.config["controller"]) for run in runs if run.config.get("controller")}
    models = [str(run.config.get("model") or SETTINGS["model"].default) for run in runs]
    claim = target.bandwidth or spec.fixed.get("bandwidth")
    return Inputs(
        hosts=_unique([name for name, _ in target.hosts]),
        python=spec.python or default_python(),
        data_sets=[data for data in data_sets if data.dataset not in MADE_UP],
        claim=Bandwidth.parse(claim) if claim else None,
        controllers=controllers,
        models=_user_models(models),
        source=f"study {spec.name} ({target.kind})",
        through_srun=kind.host_checks(has_user_files=True) == SRUN,
    )


def resolve_inputs(args: argparse.Namespace, env: dict[str, str] | None = None) -> Inputs:
    """The checks' inputs from the options, a study and the Slurm allocation; UsageError (one
    line, exit 2) for input that cannot be read."""
    env = dict(os.environ) if env is None else env
    claim = Bandwidth.parse(args.bandwidth) if args.bandwidth is not None else None
    inputs = _from_study(args.study) if args.study else None
    through_srun = False
    if args.hostfile:
        hosts, source = [name for name, _ in read_hostfile(args.hostfile)], args.hostfile
    elif args.hosts:
        hosts, source = [name for name, _ in parse_host_list(args.hosts)], "-H"
    elif inputs is not None:
        hosts, source, through_srun = inputs.hosts, inputs.source, inputs.through_srun
    elif env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"):
        # deferred: the Slurm host list (subprocess) loads only inside an allocation
        from archbench.sweep.slurm import allocation_hosts

        hosts = [name for name, _ in allocation_hosts(env)]
        source = f"Slurm job {env.get('SLURM_JOB_ID', '?')}"
        through_srun = True
    else:
        raise UsageError(
            "name the hosts: --hostfile FILE, -H host1,host2 or --study SPEC "
            "(or run inside a Slurm allocation)"
        )
    if inputs is None:
        inputs = Inputs(hosts=[], python=sys.executable, data_sets=[DataSet()])
    inputs.hosts, inputs.source, inputs.through_srun = _unique(hosts), source, through_srun
    if args.dataset or args.data_dir or args.text_file:
        data = DataSet(args.dataset or "fashion_mnist", args.data_dir, args.text_file)
        inputs.data_sets = [data] if data.dataset not in MADE_UP else []
    if args.model:
        inputs.models = _user_models([args.model])
    inputs.python = args.python or inputs.python
    inputs.claim = claim or inputs.claim
    return inputs


# --------------------------------------------------------------------------- the checks


def parse_checks(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise UsageError(f"--checks {text!r}: choose from {', '.join(CHECKS)}")
    return names


class Doctor:
    """Runs the checks in order, each on the hosts the ones before it left usable, and prints
    one line per check that passed and one per problem. ssh always runs: every other check
    reaches the hosts through it."""

    def __init__(
        self,
        inputs: Inputs,
        checks: Sequence[str] = CHECKS,
        quick: bool = False,
        out: TextIO | None = None,
    ):
        self.inputs = inputs
        self.checks = set(checks)
        self.quick = quick
        self.out = out or sys.stdout
        self.problems: list[Problem] = []
        self.cwd = os.getcwd()

    def check(self, name: str, problems: list[Problem], passed: str) -> bool:
        for problem in problems:
            print(f"FAIL {name:<9} {problem.line()}", file=self.out, flush=True)
        if not problems:
            print(f"ok   {name:<9} {passed}", file=self.out, flush=True)
        self.problems += problems
        return not problems

    def skip(self, name: str, why: str) -> None:
        print(f"--   {name:<9} skipped: {why}", file=self.out, flush=True)

    def run(self) -> int:
        # deferred: the checks (subprocess, threads) load only when doctor runs, not for --help
        from archbench.doctor import dataset, files, hostprobe, reach, versions

        hosts = self.inputs.hosts
        # the same steps as archbench.doctor.quick, each printed as it ends
        gone = reach.unreachable(hosts)
        self.check("ssh", gone, f"{', '.join(hosts)} reachable without a password")
        usable = [host for host in hosts if host not in {p.host for p in gone}]
        data_sets = self.inputs.data_sets if "data" in self.checks else []
        models = self.inputs.models if "model" in self.checks else []
        failed: list[Problem] = []
        if "versions" in self.checks or data_sets or models:
            full = "versions" in self.checks and not self.quick  # imports TensorFlow there
            if self.inputs.through_srun:  # srun reaches every node of the allocation, ssh or not
                usable = hosts
                probe = hostprobe.probe_allocation
            else:
                probe = hostprobe.probe_hosts
            reports, failed = probe(usable, self.inputs.python, full, data_sets, self.cwd, models)
            # a probe that did not run is said once: under the first check that reads it
            unsaid = failed
            if "versions" in self.checks:
                stack = versions.version_problems(usable, reports)
                stack += versions.controller_problems(usable, reports, self.inputs.controllers)
                here = versions.summary(reports)
                self.check("versions", unsaid + stack, f"as here on every host reached: {here}")
                unsaid = []
            if models:
                problems = files.file_problems(usable, reports, "model")
                self.check("model", unsaid + problems,
                           f"{files.described('model', reports)} the same on every host reached")  # fmt: skip
                unsaid = []
            if data_sets:
                what = ", ".join(data.describe() for data in data_sets)
                problems = dataset.data_problems(usable, reports)
                problems += files.file_problems(usable, reports, "data")
                same = ", the same bytes as here" if files.described("data", reports) else ""
                self.check("data", unsaid + problems,
                           f"{what} readable on every host reached{same}")  # fmt: skip
        jobs = [name for name in ("mpirun", "links") if name in self.checks]
        if jobs and (gone or failed):
            for name in jobs:
                self.skip(name, "every host must answer ssh and run archbench first")
        elif jobs:
            self._mpi_and_links(hosts)
        return self.finish()

    def _mpi_and_links(self, hosts: list[str]) -> None:
        # deferred: the MPI and link checks (subprocess, ctypes) load only when they run
        from archbench.doctor import link, mpijob

        passed = True
        if "mpirun" in self.checks:
            passed = self.check(
                "mpirun",
                mpijob.mpi_problems(hosts, self.inputs.python, self.cwd),
                f"a job across {', '.join(hosts)} ran; parameter-server ports reachable "
                "between them",
            )
        if "links" not in self.checks:
            return
        if len(hosts) < 2:
            self.skip("links", "one host, no link between hosts")
        elif not passed:
            self.skip("links", "mpirun must work across the hosts first")
        else:
            problems, measured = link.link_problems(
                hosts, self.inputs.python, self.cwd, self.inputs.claim
            )
            self.check("links", problems, measured)

    def finish(self) -> int:
        count = len(self.inputs.hosts)
        if self.problems:
            print(
                f"archbench doctor: {len(self.problems)} problem(s) on the {count} host(s) of "
                f"{self.inputs.source}; a study will fail there until they are fixed",
                file=self.out,
            )
            return 1
        checked = (
            "every check"
            if self.checks == set(CHECKS)
            else ", ".join(name for name in CHECKS if name in self.checks or name == "ssh")
        )
        print(
            f"archbench doctor: {checked} passed on the {count} host(s) of {self.inputs.source}",
            file=self.out,
        )
        return 0


def run(args: argparse.Namespace) -> int:
    checks = parse_checks(args.checks)
    return Doctor(resolve_inputs(args), checks, quick=args.quick).run()
