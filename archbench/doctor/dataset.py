"""The data set's files present and readable on every host (each host's probe runs the checks
a run makes before it starts, archbench.workloads.data.check_available)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archbench.doctor.problems import Problem


@dataclass(frozen=True)
class DataSet:
    """The data a study reads, as `archbench train` names it."""

    dataset: str | None = "fashion_mnist"
    data_dir: str | None = None
    text_file: str | None = None

    def describe(self) -> str:
        where = self.data_dir or self.text_file
        return f"{self.dataset}{f' ({where})' if where else ''}"


def data_problems(hosts: Sequence[str], reports: dict[str, dict[str, Any]]) -> list[Problem]:
    """One line per host where a data set cannot be read (its problems joined)."""
    problems = []
    for host in hosts:
        found = reports.get(host, {}).get("data")
        if found:
            problems.append(Problem(
                host, " / ".join(found),
                f"put the same files at the same path on {host} (every host reads its own copy)",
            ))  # fmt: skip
    return problems
