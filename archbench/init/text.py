"""The starter spec as YAML text, with comments that say what each part is for and what to
change. A string that is not a plain word (a path with blanks, a YAML keyword) is written as a
JSON string, which YAML reads back as written.

Every value a user gives that reaches the spec (the hostfile's path, the -o file, --data-dir,
--model, --dataset, a Slurm job's id), in a setting or in a comment, is one line: `user_value`
refuses any other before anything is read, and `render` refuses a line that would hold a line
break, so no value can start a line of its own (`--data-dir $'/d\n  warmup_steps: 7'` would
otherwise add a setting to `fixed:`)."""

from __future__ import annotations

import json
import re
from typing import Any

from archbench.common.safe_text import one_line
from archbench.init.hosts import Hosts
from archbench.init.levels import ARCHS, Design
from archbench.init.workload import Workload

# Words YAML reads back as the same string when written bare: no number, no YAML keyword.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_KEYWORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def user_value(value: str, flag: str) -> str:
    """`value` of `flag` when the spec may hold it (one line); UsageError naming the flag."""
    return one_line(value, flag)


def user_values(values: dict[str, str | None]) -> None:
    """Each value given (flag -> value, None: not given) one the spec may hold."""
    for flag, value in values.items():
        if value is not None:
            user_value(value, flag)


def scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _KEYWORDS:
        return text
    return json.dumps(text)


def flow(values: list[Any] | dict[str, Any]) -> str:
    if isinstance(values, dict):
        return "{" + ", ".join(f"{key}: {scalar(value)}" for key, value in values.items()) + "}"
    return "[" + ", ".join(scalar(value) for value in values) + "]"


def _cluster_lines(hosts: Hosts, rate: str | None, rate_source: str) -> list[str]:
    lines = ["cluster:"]
    why = {
        "kind": {
            "hostfile": "your hosts, from the hostfile below",
            "slurm": "the hosts of the allocation the sweep runs in (salloc, sbatch)",
            "emulated": "the emulated cluster, used as it is (manage: false)",
        }[hosts.kind],
        "hostfile": "one `host slots=N` line per host, relative to the folder you sweep from",
        "slots": "ranks one node takes",
    }
    for key, value in hosts.cluster.items():
        comment = f"  # {why[key]}" if key in why else ""
        lines.append(f"  {key}: {scalar(value)}{comment}")
    if rate is not None:
        lines.append(f"  # The links' rate, {rate_source}; doctor --study holds them to it:")
        lines.append(f"  bandwidth: {rate}")
    else:
        lines.append(f"  # bandwidth: 1gbit  # the links' rate: {rate_source}")
    return lines


def _other_models(models: list[str]) -> list[str]:
    if not models:
        return []
    if "wide_mlp" not in models:
        return [f"  # Other models for this data: {', '.join(models)}; make model a factor."]
    return [
        f"  # Other models for this data: {', '.join(models)} (wide_mlp: 20 M",
        "  # parameters, where communication dominates); make model a factor to compare them.",
    ]


def render(
    study: str,
    out: str,
    hosts: Hosts,
    workload: Workload,
    design: Design,
    rate: tuple[str | None, str],
    steps: int,
    repetitions: int,
) -> str:
    names = ", ".join(f"{name}:{slots}" for name, slots in hosts.hosts)
    lines = [
        f"# A starter study for the {len(hosts.hosts)} host(s) of {hosts.source} ({names}),",
        "# written by `archbench init`. Every architecture on the same data and model, at the",
        "# worker counts these hosts hold. Change what the comments point at, then:",
        f"#   archbench doctor --study {out}        # the hosts can run it",
        f"#   archbench sweep {out} --dry-run       # the runs it would make",
        f"#   archbench sweep {out} && archbench report runs/{study}/",
        "# The format, every setting and the designs: docs/studies.md.",
        f"study: {scalar(study)}",
        "description: >",
        f"  single vs ring-allreduce vs peer-to-peer vs synchronous parameter server on {hosts.source},",
        f"  {workload.title}.",
        "seed: 1",
        "# Repetitions give the report its confidence intervals (2 at the least; 3 or more for",
        "# differences of a few percent).",
        f"repetitions: {repetitions}",
        "order: random        # spreads the machines' drift over the configurations",
        "timeout_s: 600       # per run, launch to exit: raise it for larger models or more steps",
        "",
        *_cluster_lines(hosts, *rate),
        "",
        "fixed:",
        f"  # Data: {workload.found}.",
        *_other_models(workload.other_models),
    ]
    lines += [f"  {key}: {scalar(value)}" for key, value in workload.fixed.items()]
    lines += [
        "  # Steps per run: the report ranks by time per epoch, so runs of different worker",
        "  # counts still compare on equal work.",
        f"  steps: {steps}",
        f"  batch_size: {workload.batch_size(max(design.workers))}  # per worker (the global "
        "batch is workers x this)",
        "  sync: sync  # ps: the synchronous parameter server (async: a level to add)",
        "",
        "factors:",
        f"  arch: {flow(list(ARCHS))}",
        f"  workers: {flow(design.workers)}   # what the {sum(s for _, s in hosts.hosts)} slot(s) "
        "hold; add levels as hosts grow",
    ]
    if design.placements:
        lines.append(
            f"  placement: {flow(design.placements)}   # ps only: the server on a host of its "
            "own or beside a worker"
        )
    for note in design.notes:
        lines.append(f"  # not a placement here: {note}")
    lines += ["", "design: full_factorial"]
    if design.exclude:
        lines.append("# Configurations these hosts cannot hold (too few slots where they go):")
        lines.append("exclude:")
        lines += [f"  - {flow(point)}" for point in design.exclude]
    # the last guard: a value that came another way (a Slurm job id) still cannot add a line
    return "".join(user_value(line, "a line of the spec") + "\n" for line in lines)
