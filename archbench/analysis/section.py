"""What a report section is, and what it hands to the report.

A section is one module of this package (see report.SECTIONS for their order) that owns all of
it: its figures, its tables with the columns the report shows and how each reads, and its
findings, the sentences at the top of the report. It has

- `KEY` and `TITLE`;
- `build(study, fig_dir) -> Section`: draws its figures under fig_dir and returns them with its
  tables (each with its `Column`s; a table without columns shows every column as it is), its
  notes, its findings and what it skipped and why.

A new section is one new module and its place in report.SECTIONS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from archbench.analysis.fmt import plain


@dataclass
class FigureFile:
    stem: str
    caption: str
    paths: list[Path]  # PNG first, then SVG

    @property
    def png(self) -> Path:
        return self.paths[0]


@dataclass(frozen=True)
class Column:
    """A table column as the report shows it; columns a table lacks are left out."""

    name: str  # in the table's frame
    header: str
    cell: Callable[[Any], str] = plain


@dataclass
class Table:
    name: str  # file stem of its CSV under tables/
    title: str
    frame: pd.DataFrame  # raw numbers; the report formats them for reading
    columns: list[Column] | None = None  # None: every column of the frame, as it is
    shown: bool = True  # False: CSV only (a figure shows it)


@dataclass
class Section:
    key: str
    title: str
    how_to_read: str = ""
    figures: list[FigureFile] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # sentences for the top of the report
    skipped: list[str] = field(default_factory=list)  # "what: why" lines

    def table(self, name: str) -> pd.DataFrame | None:
        return next((t.frame for t in self.tables if t.name == name), None)

    def skip(self, what: str, why: str) -> Section:
        self.skipped.append(f"{what}: {why}")
        return self


def display_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """A table's header and cells as the report shows them."""
    frame = table.frame
    columns = table.columns or [Column(c, c, plain) for c in frame.columns]
    columns = [c for c in columns if c.name in frame.columns]
    # Columns that say nothing here (all n/a) are dropped.
    columns = [c for c in columns if frame[c.name].notna().any()]
    headers = [c.header for c in columns]
    rows = [[c.cell(row[c.name]) for c in columns] for _, row in frame.iterrows()]
    return headers, rows


def markdown_table(table: Table) -> list[str]:
    """The table's lines in Markdown (cells escaped)."""
    headers, rows = display_rows(table)

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines
