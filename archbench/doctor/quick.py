"""The cheap checks, which a sweep makes on its hosts before its first run: each host answers
ssh without a password, has this host's stack (versions read without importing TensorFlow), and
has the same bytes as this host in the user's model and data files the study reads."""

from __future__ import annotations

from collections.abc import Sequence

from archbench.doctor import files, hostprobe, reach, versions
from archbench.doctor.dataset import DataSet
from archbench.doctor.problems import Problem


def quick_problems(
    hosts: Sequence[str],
    python: str,
    cwd: str,
    models: Sequence[str] = (),
    data_specs: Sequence[str] = (),
) -> list[Problem]:
    """Problems on `hosts`; `models` and `data_specs`: the user's --model and --dataset values
    whose files every host must hold as this one does."""
    gone = reach.unreachable(hosts)
    usable = [host for host in hosts if host not in {problem.host for problem in gone}]
    data_sets = [DataSet(spec) for spec in data_specs]
    reports, failed = hostprobe.probe_hosts(usable, python, False, data_sets, cwd, models)
    return (
        gone
        + failed
        + versions.version_problems(usable, reports)
        + files.file_problems(usable, reports, "model")
        + files.file_problems(usable, reports, "data")
    )
