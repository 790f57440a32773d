"""The cheap checks, which a sweep makes on its hosts before its first run: each host answers
ssh without a password and has this host's stack (versions read without importing TensorFlow)."""

from __future__ import annotations

from collections.abc import Sequence

from archbench.doctor import hostprobe, reach, versions
from archbench.doctor.problems import Problem


def quick_problems(hosts: Sequence[str], python: str, cwd: str) -> list[Problem]:
    gone = reach.unreachable(hosts)
    usable = [host for host in hosts if host not in {problem.host for problem in gone}]
    reports, failed = hostprobe.probe_hosts(usable, python, False, (), cwd)
    return gone + failed + versions.version_problems(usable, reports)
