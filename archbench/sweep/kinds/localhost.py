"""This machine alone: every rank on it, no link between hosts."""

from __future__ import annotations

import os
from collections.abc import Mapping

from archbench.common.hosts import HostSlots
from archbench.sweep.kinds.base import ClusterKind
from archbench.sweep.spec import StudySpec
from archbench.sweep.target import ClusterTarget

LOCALHOST = "localhost"


class Localhost(ClusterKind):
    name = "localhost"
    launches_single = False  # a one-process run is started directly
    on_this_machine = True

    def resolve(self, spec: StudySpec, env: Mapping[str, str] | None) -> ClusterTarget:
        slots = spec.cluster.slots or os.cpu_count() or 1
        return ClusterTarget(self.name, (HostSlots(LOCALHOST, slots),))

    def host_checks(self, has_user_files: bool) -> str | None:
        return None  # its runs reach no other host
