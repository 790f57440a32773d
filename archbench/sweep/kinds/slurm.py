"""The nodes of the Slurm allocation the sweep runs in (inside `salloc` or `sbatch`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from archbench.sweep import slurm
from archbench.sweep.kinds.base import SRUN, ClusterKind
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget


class Slurm(ClusterKind):
    name = "slurm"

    def resolve(self, spec: StudySpec, env: Mapping[str, str] | None) -> ClusterTarget:
        return ClusterTarget(self.name, tuple(slurm.allocation_hosts(env)))

    def host_checks(self, has_user_files: bool) -> str | None:
        # mpirun starts the ranks through srun, and a site may refuse ssh to its nodes, which
        # ssh-based checks would take for a fault: only the user's files are compared, through
        # srun, and only when there are some
        return SRUN if has_user_files else None

    def record_facts(self, cluster: dict[str, Any]) -> None:
        # The allocation the sweep ran in: also when the ranks were started over ssh, which
        # does not pass Slurm's variables on.
        cluster["slurm_job_id"] = cluster.get("slurm_job_id") or os.environ.get("SLURM_JOB_ID")
        cluster["slurm_nodelist"] = os.environ.get("SLURM_JOB_NODELIST")
