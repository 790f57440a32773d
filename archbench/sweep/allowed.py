"""What a study spec may ask of the programs a sweep starts, beyond its settings.

A spec is input, not code: it says what to train and how to start it, and nothing else. It cannot
name another program to run, move where records are written, or load code into the runs:

- `python:` is a Python (CPython's compiled executable, named python, python3 or python3.N, its
  link target too; a script is refused unrun) that imports archbench (`archbench.sweep.preflight`);
- `extra_args` holds flags of `archbench train` that no setting covers: the sweep's own (`--out`,
  `--run-id`, `--study`, `--runs-file`) and a setting's flag are refused (`archbench.runtime.settings`);
- `launcher_args` holds MCA parameters (`--mca NAME VALUE`), `-x NAME` and the launcher switches
  below, which change how the launcher reports or places ranks;
- `env` sets the tuning variables of the libraries a run uses (the prefixes below).

MCA parameters (`--mca NAME`, `OMPI_MCA_NAME`) are allowed by framework: the transports and
collectives a study tunes (`btl`, `pml`, `mtl`, `coll`, `osc`, `oob`, `mpi`), nothing else. Open
MPI has hundreds of parameters, and those that name a file do not all say so (`orte_rankfile`),
so a list of what is refused would always miss one. An MCA parameter or variable whose name says it
holds a program, its arguments, a file or a folder (`plm_rsh_agent`, `HOROVOD_TIMELINE`,
`..._FILE`, `..._DIR`) is refused too: set it in the environment of the sweep itself, which every
run inherits, where the person running the sweep chooses it rather than the spec.
"""

from __future__ import annotations

import re
from typing import Any

from archbench.common.errors import UsageError
from archbench.common.safe_text import shown

# Launcher options that take no value.
LAUNCHER_SWITCHES = frozenset(
    {
        # mpirun
        "--oversubscribe", "--nooversubscribe", "--use-hwthread-cpus", "--tag-output",
        "--timestamp-output", "--display-map", "--display-allocation", "--report-bindings",
        "-v", "--verbose", "-q", "--quiet",
        # horovodrun
        "--disable-cache", "--tcp",
    }
)  # fmt: skip
# Launcher options that take one value (a level, a count, a network interface).
LAUNCHER_VALUED = frozenset(
    {"--log-level", "--network-interface", "--start-timeout", "--gloo-timeout-seconds"}
)
MCA_OPTIONS = frozenset({"--mca", "-mca", "--gmca", "-gmca"})
FORWARD_OPTION = "-x"
# Variables the libraries of a run read for tuning (threads, transports, logging levels).
ENV_PREFIXES = (
    "TF_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "NCCL_", "GLOO_", "UCX_", "CUDA_", "HOROVOD_",
    "OMPI_MCA_",
)  # fmt: skip
ENV_NAMES = frozenset(
    {"PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER", "PYTHONDONTWRITEBYTECODE"}
)
# Words of a parameter's or variable's name that say its value is a program, its arguments, a
# file or a folder.
_PATH_WORDS = frozenset(
    {
        "agent", "args", "argv", "cmd", "command", "exec", "executable", "file", "files",
        "filename", "hostfile", "dir", "tmpdir", "path", "paths", "prefix", "script", "output",
        "home", "preload", "timeline", "dump", "uri",
    }
)  # fmt: skip
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The MCA frameworks a study may tune: transports, point-to-point, collectives, one-sided, the
# out-of-band channel, and the MPI layer's own switches (mpi_yield_when_idle, ...).
MCA_FRAMEWORKS = ("btl", "pml", "mtl", "coll", "osc", "oob", "mpi")
_MCA_ENV_PREFIX = "OMPI_MCA_"


def names_a_path(name: str) -> bool:
    """Whether a parameter or variable name says its value is a program, arguments, a file or a
    folder (`plm_rsh_agent`, `NCCL_DEBUG_FILE`)."""
    return bool(_PATH_WORDS & set(re.split(r"[_.\-]+", name.lower())))


def mca_parameter_allowed(name: str) -> bool:
    """Whether a study may set the MCA parameter `name`: one of MCA_FRAMEWORKS' (the framework
    itself, `btl`, or one of its parameters, `btl_tcp_if_include`) that names no path."""
    framework = name.split("_", 1)[0]
    return framework in MCA_FRAMEWORKS and not names_a_path(name)


def check_mca_parameter(name: str, where: str) -> None:
    if not mca_parameter_allowed(name):
        raise UsageError(
            f"{where}: MCA parameter {shown(name)} is not one a study may set (it may set parameters "
            f"of {', '.join(MCA_FRAMEWORKS)}, none that names a program, a file or a folder); "
            f"set OMPI_MCA_{name} in the sweep's own environment"
        )


def check_variable(name: str, where: str) -> None:
    """A variable a spec may set for its runs (env:, -x NAME=VALUE); UsageError otherwise."""
    if not _VARIABLE_NAME.fullmatch(name):
        raise UsageError(f"{where}: {name!r} is not an environment variable name")
    if name.startswith(_MCA_ENV_PREFIX):  # an MCA parameter, as --mca sets it
        check_mca_parameter(name[len(_MCA_ENV_PREFIX) :], where)
    if not (name in ENV_NAMES or name.startswith(ENV_PREFIXES)) or names_a_path(name):
        raise UsageError(
            f"{where}: {name} is not a variable a study may set (it may set tuning variables: "
            f"{', '.join(prefix + '*' for prefix in ENV_PREFIXES)}, {', '.join(sorted(ENV_NAMES))}; "
            "none that names a program, a file or a folder); set it in the sweep's own environment"
        )


def check_launcher_args(words: list[str], where: str) -> list[str]:
    """`launcher_args` words a spec may pass to mpirun or horovodrun; UsageError naming the
    first that it may not."""
    context = f"{where}: launcher_args"
    index = 0
    while index < len(words):
        word = words[index]
        if word in MCA_OPTIONS:
            if index + 2 >= len(words):
                raise UsageError(f"{context}: {word} takes a parameter name and a value")
            check_mca_parameter(words[index + 1], context)
            index += 3
        elif word == FORWARD_OPTION:
            if index + 1 >= len(words):
                raise UsageError(f"{context}: -x takes a variable name")
            check_variable(words[index + 1].split("=", 1)[0], context)
            index += 2
        elif word in LAUNCHER_VALUED:
            if index + 1 >= len(words):
                raise UsageError(f"{context}: {word} takes a value")
            index += 2
        elif word in LAUNCHER_SWITCHES:
            index += 1
        else:
            raise UsageError(
                f"{context}: {word!r} is not an option a study may pass to the launcher (it may "
                "pass --mca NAME VALUE, -x NAME, "
                f"{', '.join(sorted(LAUNCHER_SWITCHES | LAUNCHER_VALUED))})"
            )
    return words


def check_env(env: dict[str, Any], where: str) -> None:
    for name in env:
        check_variable(str(name), f"{where}: env")
