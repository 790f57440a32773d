"""Where the answer changes: per workload, the architecture the performance model predicts
fastest over worker counts and link bandwidths, priced with the study's own fit (or a fit made
now with its kind of cluster's calibration), the study's measurements marked on it. The
crossovers along the measured lines, and whether the measurements agree, are its findings.
`archbench model map` draws the same map over other axes and ranges."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from archbench.analysis.load import Study
from archbench.analysis.section import FigureFile, Section, Table
from archbench.common.errors import UsageError
from archbench.perfmodel.fit.cli_model import study_calibration
from archbench.perfmodel.optimize import crossover_report as report
from archbench.perfmodel.optimize.crossover import Marker, Plane, format_range, format_value
from archbench.perfmodel.optimize.crossover_report import AxisRequest, WorkloadMap

KEY, TITLE = "map", "Where the answer changes: the crossover map"

HOW_TO_READ = (
    "Each cell is shaded by the architecture the performance model predicts fastest per sample "
    "there, darker the larger its margin over the runner-up; hatched cells are too close to call "
    "(a margin under the model's error, named in the legend). The outlined box is the range the "
    "fit saw: outside it the map extrapolates. A disc marks a setting the study measured where "
    "the measured fastest is the predicted one, a crossed ring one where it is not, a plain ring "
    "one where the measured gap is within the runs' noise (too close to call, as in `model "
    "validate`'s ranking). The map "
    "compares the configurations of two workers or more that the study measured; one process, "
    "where the answer names it, is not on it."
)


def _request() -> AxisRequest:
    """`archbench model map`'s default axes and ranges."""
    axes = {"workers": None, "bandwidth": None, "latency": None, "model_size": None}
    return report.axis_request(argparse.Namespace(x="workers", y="bandwidth", points=25, **axes))


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    if study.folder is None:
        return section.skip(TITLE, "drawn for a study folder (runs/<study>/), not records files")
    try:
        model, maps, skipped = report.study_maps(
            study.folder, _request(), argparse.Namespace(fit=None, calibration=None),
            study_calibration,
        )  # fmt: skip
    except UsageError as error:
        return section.skip(TITLE, str(error))
    for line in skipped:
        section.skip(TITLE, line)
    section.notes.append(
        f"Priced with {model.said}. Too close to call: a margin under {model.error_pct:.1f}% "
        f"({model.error_source})."
    )
    crossings, measured = [], []
    for wmap in maps:
        workload = wmap.result.workload
        stem = f"map_{workload.slug}"
        paths = report.draw_map(wmap, model, study.folder, fig_dir, stem)
        section.figures.append(FigureFile(stem, report.headline(wmap), paths))
        plane = wmap.result.plane
        for along in (plane.x, plane.y):
            crossings += [(workload.name, along, t) for t in report.line_texts(wmap, along)]
        measured += [(workload.name, report.marker_text(wmap, m)) for m in wmap.markers]
        section.findings.append(_finding(wmap))
    section.tables.append(Table(
        "map_crossovers", "Where the predicted fastest changes, along the measured lines",
        pd.DataFrame(crossings, columns=["workload", "along", "crossover"]),
    ))  # fmt: skip
    if measured:
        section.tables.append(Table(
            "map_measured", "The study's runs on the map: measured fastest against predicted",
            pd.DataFrame(measured, columns=["workload", "setting"]),
        ))  # fmt: skip
    return section


def _finding(wmap: WorkloadMap) -> str:
    """The map in a sentence: who wins how much of it, and where the study's runs disagree."""
    plane, workload = wmap.result.plane, wmap.result.workload
    where = (
        f"{format_range(plane.x, plane.x_values[0], plane.x_values[-1])} × "
        f"{format_range(plane.y, plane.y_values[0], plane.y_values[-1])}"
    )
    along = plane.x  # the workers, at the study's own links
    changes = report.line_texts(wmap, along, report.measured_lines(wmap, along))
    text = f"{workload.name}: " + "; ".join(changes)
    text += f". Over {where} the model predicts fastest: {report.share_text(wmap)}"
    compared = [m for m in wmap.markers if m.compared]
    if compared:
        agree = sum(1 for m in compared if m.agrees)
        text += f"; the measured fastest is the predicted one at {agree} of {len(compared)}"
        text += " measured settings" if len(compared) > 1 else " measured setting"
        close = [m for m in compared if m.too_close]
        if close:
            text += f", too close to call at {len(close)} (the measured gap within the runs' noise)"
        wrong = [m for m in compared if m.disagrees]
        if wrong:
            text += " (not at " + ", ".join(
                f"{_point(plane, m)}: measured {m.measured_fastest}, predicted "
                f"{m.predicted_fastest}" for m in wrong
            ) + ")"  # fmt: skip
    return text + "."


def _point(plane: Plane, marker: Marker) -> str:
    return f"{format_value(plane.x, marker.x)}, {format_value(plane.y, marker.y)}"
