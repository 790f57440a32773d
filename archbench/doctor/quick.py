"""The cheap checks, which a sweep makes on its hosts before its first run: each host answers
ssh without a password, has this host's stack (versions read without importing TensorFlow), and
has the same bytes as this host in the user's model and data files the study reads. In a Slurm
allocation, only the files are compared, on its nodes through srun (allocation_problems)."""

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


def allocation_problems(
    nodes: Sequence[str],
    python: str,
    cwd: str,
    models: Sequence[str] = (),
    data_specs: Sequence[str] = (),
) -> list[Problem]:
    """Nodes of the Slurm allocation this runs in whose copy of the user's model or data files
    differs from this host's (or that srun could not probe), reached through srun: mpirun starts
    the ranks that way, and a site may refuse ssh to its nodes."""
    data_sets = [DataSet(spec) for spec in data_specs]
    reports, failed = hostprobe.probe_allocation(nodes, python, False, data_sets, cwd, models)
    return (
        failed
        + files.file_problems(nodes, reports, "model")
        + files.file_problems(nodes, reports, "data")
    )
