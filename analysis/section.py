"""What each figure module hands to the report: figures, tables, notes, and what was skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class FigureFile:
    stem: str
    caption: str
    paths: list[Path]  # PNG first, then SVG

    @property
    def png(self) -> Path:
        return self.paths[0]


@dataclass
class Table:
    name: str  # file stem of its CSV under tables/
    title: str
    frame: pd.DataFrame  # raw numbers; the report formats them for reading


@dataclass
class Section:
    key: str
    title: str
    how_to_read: str = ""
    figures: list[FigureFile] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "what: why" lines

    def table(self, name: str) -> pd.DataFrame | None:
        return next((t.frame for t in self.tables if t.name == name), None)

    def skip(self, what: str, why: str) -> Section:
        self.skipped.append(f"{what}: {why}")
        return self
