"""`archbench model map runs/<study>/`: per workload of a study, which architecture the model
predicts fastest over two axes, where that changes and why, and whether the study's own runs
agree: a figure (PNG, SVG), the crossover table (stdout, markdown, CSV), or JSON.

Reads the study (its records, its fit or calibration, its validation's error); the grid and
the crossovers are `crossover`'s, the drawing `crossover_figure`'s. Every input is checked
before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, read_json
from archbench.common.output_folder import folder_problem
from archbench.perfmodel.fit.fitfile import FIT_NAME, model_inputs, read_fit
from archbench.perfmodel.fit.fitting import error_summary, fit_model, score
from archbench.perfmodel.fit.records import Observation, study_observations
from archbench.perfmodel.measure.calibration import Calibration
from archbench.perfmodel.model.predictor import ModelParams
from archbench.perfmodel.optimize import crossover_figure
from archbench.perfmodel.optimize.crossover import (
    AXES,
    BANDWIDTH,
    DEFAULT_RANGES,
    LATENCY,
    MODEL_SIZE,
    WORKERS,
    Candidate,
    Crossover,
    CrossoverMap,
    Marker,
    Plane,
    Point,
    Workload,
    axis_values,
    candidates_of,
    coordinate,
    crossovers,
    describe,
    evaluate,
    fitted_span,
    format_range,
    format_value,
    markers,
    measured_range,
    observed_point,
    parse_range,
    parse_value,
    workloads_of,
)

MAP_FOLDER = "map"
VALIDATION_FILE = Path("report") / "perfmodel_validation.json"
# crossover lines shown on stdout and in the markdown per axis (every one goes to the CSV)
SHOWN_LINES = 6
CSV_COLUMNS = (
    "workload", "along", "other_axis", "other_value", "before", "at", "loser", "winner",
    "deciding_term", "loser_term_before_ms", "loser_term_after_ms", "winner_term_before_ms",
    "winner_term_after_ms", "winner_margin_pct", "too_close", "in_fitted_range",
)  # fmt: skip

# study_calibration of cli_model (which imports this module, so it is handed in)
FindCalibration = Callable[[Path, list[Observation], str | None], tuple[Calibration, str]]


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class AxisRequest:
    """The two axes, their ranges, the values the others are held at (None: the study's own)
    and the points per axis."""

    x: str
    y: str
    ranges: dict[str, tuple[float, float]]
    held: dict[str, float | None]
    points: int


def axis_request(args: argparse.Namespace) -> AxisRequest:
    """The axes and ranges the flags ask for; UsageError for any that cannot be."""
    if args.x == args.y:
        raise UsageError(f"--x and --y are both {args.x}: choose two different axes")
    ranges, held = {}, {}
    for axis in AXES:
        given = getattr(args, axis.replace("-", "_"))
        if axis in (args.x, args.y):
            ranges[axis] = parse_range(axis, given or DEFAULT_RANGES[axis])
        elif given is not None:
            if ":" in str(given):
                raise UsageError(
                    f"--{axis} is not an axis of this map: give one value to hold it at, "
                    f"got {given!r}"
                )
            held[axis] = parse_value(axis, given)
        else:
            held[axis] = None
    # --points is checked where the grid is made; made once now, a bad count costs nothing
    axis_values(args.x, *ranges[args.x], args.points)
    return AxisRequest(args.x, args.y, ranges, held, args.points)


@dataclass(frozen=True)
class StudyModel:
    """The parameters and calibration a study is priced with, what they are, and the error
    under which two predictions are too close to call."""

    params: ModelParams
    calib: Calibration
    said: str
    fitted_run_ids: frozenset[str] | None  # None: the fit was made on another study
    error_pct: float
    error_source: str


def study_model(
    study: Path,
    observations: list[Observation],
    args: argparse.Namespace,
    find_calibration: FindCalibration,
) -> StudyModel:
    """The study's saved fit (--fit, else report/perfmodel_fit.json); without one, a fit made
    now on every configuration with the study's calibration (not saved); neither: UsageError."""
    fit_path = Path(args.fit) if args.fit else study / "report" / FIT_NAME
    if args.fit or fit_path.is_file():
        fit = read_fit(fit_path)
        params, calib = model_inputs(fit_path, args.calibration)
        same_study = Path(str(fit.get("study", study))).resolve() == study.resolve()
        fitted = frozenset(fit.get("train_run_ids", [])) if same_study else None
        in_sample = ((fit.get("in_sample_error") or {}).get("all") or {}).get("mape_pct")
        said = f"fit: {fit_path} ({fit.get('split', 'split unknown')}); calibration: {calib.source}"
    else:
        calib, found = find_calibration(study, observations, args.calibration)
        if not calib.measured:
            raise UsageError(
                f"{study} has no fit ({fit_path}) and no calibration of its kind of cluster: "
                f"run `archbench model fit {study}` or `archbench microbench --study "
                f"runs/{study.name}.yaml` first"
            )
        params = fit_model(observations, calib).params
        in_sample = error_summary(score(observations, params, calib))["all"]["mape_pct"]
        fitted = frozenset(o.run_id for o in observations)
        said = f"fit: made now on every configuration of {study} (not saved); {found}"
    held_out = _held_out_mape(study)
    if held_out is not None:
        error, source = held_out, f"the held-out MAPE of `model validate` ({VALIDATION_FILE})"
    elif in_sample is not None:
        error, source = float(in_sample), "the fit's in-sample MAPE; the study has no validation"
    else:
        error, source = 0.0, "none known (the fit records no error)"
    return StudyModel(params, calib, said, fitted, error, source)


def _held_out_mape(study: Path) -> float | None:
    """`model validate`'s MAPE over every held-out configuration of the study, if it ran."""
    path = study / VALIDATION_FILE
    if not path.is_file():
        return None
    try:
        value = read_json(path)["summary"]["all"]["mape_pct"]
    except (OSError, JsonProblem, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


# --------------------------------------------------------------------------- one workload


@dataclass(frozen=True)
class WorkloadMap:
    """One workload's map and what is drawn and told of it."""

    result: CrossoverMap
    crossovers: list[Crossover]
    markers: list[Marker]
    fitted: dict[str, tuple[int, int] | None]  # per axis: the grid cells the fit saw
    fitted_source: str
    too_close: float  # margin (fraction) under which a cell is too close to call
    measured_values: dict[str, list[float]]  # per axis: the study's settings (for the lines)

    def in_fitted(self, ix: int, iy: int) -> bool:
        spans = (self.fitted[self.result.plane.x], self.fitted[self.result.plane.y])
        return all(s is not None and s[0] <= i <= s[1] for s, i in zip(spans, (ix, iy)))


def _held_value(axis: str, members: Sequence[Observation], request: AxisRequest) -> Any:
    """Where a non-axis is held: the flag's value, else the workload's most common setting
    (workers, bandwidth) or the study's own (latency, model size: None)."""
    given = request.held.get(axis)
    if given is not None or axis in (LATENCY, MODEL_SIZE):
        return given
    if axis == WORKERS:
        return Counter(o.config.num_workers for o in members).most_common(1)[0][0]
    return Counter(o.config.bandwidth_bits for o in members).most_common(1)[0][0]


def plane_for(request: AxisRequest, members: Sequence[Observation], calib: Calibration) -> Plane:
    """The workload's grid: the requested ranges with its measured settings on them."""
    base = Point(
        workers=int(_held_value(WORKERS, members, request) or 2),
        bandwidth_bits=_held_value(BANDWIDTH, members, request),
        latency_s=_held_value(LATENCY, members, request),
        model_bytes=_held_value(MODEL_SIZE, members, request),
    )
    values = {}
    for axis in (request.x, request.y):
        seen = [coordinate(observed_point(o, calib), axis) for o in members]
        values[axis] = axis_values(
            axis, *request.ranges[axis], request.points, [v for v in seen if v is not None]
        )
    return Plane(request.x, request.y, values[request.x], values[request.y], base)


def map_workload(
    workload: Workload,
    by_label: dict[str, list[Observation]],
    request: AxisRequest,
    model: StudyModel,
) -> WorkloadMap:
    members = [o for group in by_label.values() for o in group]
    candidates: list[Candidate] = candidates_of(by_label)
    plane = plane_for(request, members, model.calib)
    result = evaluate(workload, candidates, plane, model.params, model.calib)
    fitted_members = (
        [o for o in members if o.run_id in model.fitted_run_ids]
        if model.fitted_run_ids is not None
        else members
    )
    source = "the range the fit saw"
    if model.fitted_run_ids is None:
        source = "the study's measured range (the fit was made on another study)"
    elif not fitted_members:
        source = "no fitted run of this workload"
    spans = {}
    for axis, values in ((plane.x, plane.x_values), (plane.y, plane.y_values)):
        spans[axis] = fitted_span(values, measured_range(fitted_members, axis, model.calib))
    measured = {
        axis: sorted(
            {v for o in members if (v := coordinate(observed_point(o, model.calib), axis))}
        )
        for axis in (plane.x, plane.y)
    }
    return WorkloadMap(
        result, crossovers(result),
        markers(result, by_label, candidates, model.params, model.calib),
        spans, source, model.error_pct / 100.0, measured,
    )  # fmt: skip


# --------------------------------------------------------------------------- tables


def _index(values: Sequence[float], value: float) -> int:
    return min(range(len(values)), key=lambda i: abs(math.log(values[i] / value)))


def shown_lines(wmap: WorkloadMap, along: str) -> list[float]:
    """The lines (values of the other axis) whose crossovers stdout and the markdown show:
    the study's own settings, and the two ends of the axis."""
    plane = wmap.result.plane
    other = plane.y if along == plane.x else plane.x
    values = plane.y_values if other == plane.y else plane.x_values
    held = coordinate(plane.base, other)
    picked = [values[_index(values, v)] for v in wmap.measured_values[other]]
    if held is not None and not picked:
        picked.append(values[_index(values, held)])
    picked += [values[0], values[-1]]
    unique = sorted(set(picked))
    if len(unique) > SHOWN_LINES:
        step = (len(unique) - 1) / (SHOWN_LINES - 1)
        unique = [unique[round(i * step)] for i in range(SHOWN_LINES)]
    return unique


def _cell_indices(wmap: WorkloadMap, c: Crossover) -> tuple[int, int]:
    plane = wmap.result.plane
    if c.along == plane.x:
        return plane.x_values.index(c.at), plane.y_values.index(c.other_value)
    return plane.x_values.index(c.other_value), plane.y_values.index(c.at)


def _too_close(wmap: WorkloadMap, c: Crossover) -> bool:
    return c.margin < wmap.too_close


def measured_lines(wmap: WorkloadMap, along: str) -> list[float]:
    """The lines through the study's own settings of the other axis (grid values nearest)."""
    plane = wmap.result.plane
    other = plane.y if along == plane.x else plane.x
    values = plane.y_values if other == plane.y else plane.x_values
    return sorted({values[_index(values, v)] for v in wmap.measured_values[other]})


def line_texts(wmap: WorkloadMap, along: str, lines: Sequence[float] | None = None) -> list[str]:
    """One entry per line (default: the shown lines): its crossovers, or its one winner."""
    plane = wmap.result.plane
    out = []
    for value in shown_lines(wmap, along) if lines is None else lines:
        found = [c for c in wmap.crossovers if c.along == along and c.other_value == value]
        if found:
            out += [describe(c) + _flags(wmap, c) for c in found]
            continue
        other = plane.y if along == plane.x else plane.x
        if along == plane.x:
            row = plane.y_values.index(value)
            cells = [wmap.result.cell(i, row) for i in range(len(plane.x_values))]
            span = plane.x_values
        else:
            column = plane.x_values.index(value)
            cells = [wmap.result.cell(column, j) for j in range(len(plane.y_values))]
            span = plane.y_values
        winner = cells[0].winner.label if cells[0].winner else "nothing"
        close = sum(cell.margin < wmap.too_close for cell in cells)
        out.append(
            f"{winner} fastest all along {format_range(along, span[0], span[-1])} "
            f"at {format_value(other, value)}"
            + (f" [too close to call at {close} of its {len(cells)} points]" if close else "")
        )
    return out


def _flags(wmap: WorkloadMap, c: Crossover) -> str:
    notes = []
    if _too_close(wmap, c):
        notes.append(f"too close to call: margin {c.margin:.1%}")
    if not wmap.in_fitted(*_cell_indices(wmap, c)):
        notes.append("extrapolated")
    return f" [{'; '.join(notes)}]" if notes else ""


def _held_text(plane: Plane, workload: Workload) -> str:
    parts = []
    for axis in AXES:
        if axis in (plane.x, plane.y):
            continue
        value = coordinate(plane.base, axis)
        if axis == LATENCY and value is None:
            parts.append("latency: the calibration's")
        elif axis == MODEL_SIZE and value is None:
            parts.append(f"gradient: {workload.model}'s own")
        elif axis in (WORKERS, BANDWIDTH):
            parts.append(format_value(axis, value))
        else:
            parts.append(f"{axis}: {format_value(axis, value)}")
    return "; ".join(parts)


def headline(wmap: WorkloadMap) -> str:
    plane, workload = wmap.result.plane, wmap.result.workload
    return (
        f"{workload.name}: predicted fastest per sample over "
        f"{format_range(plane.x, plane.x_values[0], plane.x_values[-1])} x "
        f"{format_range(plane.y, plane.y_values[0], plane.y_values[-1])} "
        f"({_held_text(plane, workload)})"
    )


def share_text(wmap: WorkloadMap) -> str:
    cells = [c for row in wmap.result.cells for c in row]
    close = sum(1 for c in cells if c.margin < wmap.too_close)
    won = Counter(c.winner.label for c in cells if c.winner and c.margin >= wmap.too_close)
    parts = [f"{label} {n / len(cells):.0%}" for label, n in won.most_common()]
    if close:
        parts.append(f"too close to call {close / len(cells):.0%}")
    return ", ".join(parts)


def marker_text(wmap: WorkloadMap, m: Marker) -> str:
    plane = wmap.result.plane
    where = f"{format_value(plane.x, m.x)}, {format_value(plane.y, m.y)}"
    if not m.compared:
        return f"{where}: only {m.measured_fastest} measured"
    if m.too_close:
        verdict = "too close to call (the measured gap within the runs' noise)"
    else:
        verdict = "agrees" if m.agrees else "DISAGREES"
    return (
        f"{where}: measured fastest {m.measured_fastest} "
        f"({m.measured_s[m.measured_fastest] * 1e3:.3g} ms/step), predicted {m.predicted_fastest}"
        f" ({m.predicted_s[m.predicted_fastest] * 1e3:.3g} ms/step) of the {len(m.measured_s)} "
        f"measured there: {verdict}"
    )


def text_report(wmap: WorkloadMap, paths: Sequence[Path]) -> list[str]:
    plane = wmap.result.plane
    lines = [headline(wmap), f"  candidates: {', '.join(wmap.result.labels)}"]
    lines.append(f"  cells won: {share_text(wmap)}")
    for along in (plane.x, plane.y):
        lines.append(f"  along {along}:")
        lines += [f"    {t}" for t in line_texts(wmap, along)]
    if wmap.markers:
        lines.append(
            "  the study's runs (a disc in the figure where they agree, a crossed ring where not,"
            " a plain ring where their gap is within their noise):"
        )
        lines += [f"    {marker_text(wmap, m)}" for m in wmap.markers]
    lines.append(f"  files: {', '.join(map(str, paths))}")
    return lines


def markdown(wmap: WorkloadMap, study: Path, model: StudyModel, figure: str) -> str:
    plane = wmap.result.plane
    lines = [
        f"# Crossover map: {study.name}, {wmap.result.workload.name}",
        "",
        headline(wmap) + ".",
        "",
        f"{model.said}. Too close to call: a margin under {model.error_pct:.1f}% "
        f"({model.error_source}). Outlined: {wmap.fitted_source}.",
        "",
        f"![crossover map]({figure})",
        "",
        f"Cells won: {share_text(wmap)}.",
        "",
        "| along | crossover |",
        "| --- | --- |",
    ]
    for along in (plane.x, plane.y):
        lines += [f"| {along} | {t} |" for t in line_texts(wmap, along)]
    if wmap.markers:
        lines += ["", "| the study's runs |", "| --- |"]
        lines += [f"| {marker_text(wmap, m)} |" for m in wmap.markers]
    lines.append("")
    lines.append("Every crossover of every grid line is in the CSV beside this file.")
    return "\n".join(lines) + "\n"


def csv_rows(wmap: WorkloadMap) -> list[dict[str, Any]]:
    rows = []
    for c in wmap.crossovers:
        rows.append({
            "workload": wmap.result.workload.name, "along": c.along, "other_axis": c.other,
            "other_value": c.other_value, "before": c.before, "at": c.at, "loser": c.loser,
            "winner": c.winner, "deciding_term": c.term,
            "loser_term_before_ms": c.loser_term_s[0] * 1e3,
            "loser_term_after_ms": c.loser_term_s[1] * 1e3,
            "winner_term_before_ms": c.winner_term_s[0] * 1e3,
            "winner_term_after_ms": c.winner_term_s[1] * 1e3,
            "winner_margin_pct": c.margin * 100, "too_close": _too_close(wmap, c),
            "in_fitted_range": wmap.in_fitted(*_cell_indices(wmap, c)),
        })  # fmt: skip
    return rows


def csv_text(wmap: WorkloadMap) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(wmap))
    return buffer.getvalue()


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def workload_json(wmap: WorkloadMap, paths: Sequence[Path]) -> dict[str, Any]:
    result, plane = wmap.result, wmap.result.plane
    return {
        "model": result.workload.model,
        "batch_per_worker": result.workload.batch,
        "candidates": list(result.labels),
        "x": {"axis": plane.x, "values": list(plane.x_values)},
        "y": {"axis": plane.y, "values": list(plane.y_values)},
        "held": {a: coordinate(plane.base, a) for a in AXES if a not in (plane.x, plane.y)},
        # rows are y values, columns x values
        "winner": [[c.winner.label if c.winner else None for c in row] for row in result.cells],
        "runner_up": [
            [c.runner_up.label if c.runner_up else None for c in row] for row in result.cells
        ],
        "margin_pct": [[_number(c.margin * 100) for c in row] for row in result.cells],
        "too_close": [[c.margin < wmap.too_close for c in row] for row in result.cells],
        "seconds_per_sample": [
            [{p.label: p.per_sample_s for p in c.priced} for c in row] for row in result.cells
        ],
        "fitted_cells": {a: list(s) if s else None for a, s in wmap.fitted.items()},
        "fitted_source": wmap.fitted_source,
        "crossovers": [
            {**row, "text": describe(c)}
            for row, c in zip(csv_rows(wmap), wmap.crossovers, strict=True)
        ],
        "measured": [
            {
                "x": m.x,
                "y": m.y,
                "measured_step_s": m.measured_s,
                "predicted_step_s": m.predicted_s,
                "measured_fastest": m.measured_fastest,
                "predicted_fastest": m.predicted_fastest,
                "map_winner": m.map_winner,
                "compared": m.compared,
                "agrees": m.agrees,
                "verdict": m.verdict,
                "noise_floor": m.noise,
            }
            for m in wmap.markers
        ],  # fmt: skip
        "files": [str(p) for p in paths],
    }


# --------------------------------------------------------------------------- the command


def study_maps(
    study: Path, request: AxisRequest, args: argparse.Namespace, find_calibration: FindCalibration
) -> tuple[StudyModel, list[WorkloadMap], list[str]]:
    """The model a study is priced with, the map of each workload with two architectures or
    more, and the workloads left out and why; UsageError where no map can be drawn."""
    observations = study_observations(study)
    compared, skipped = {}, []
    for workload, by_label in workloads_of(observations).items():
        if len(by_label) < 2:
            skipped.append(f"{workload.name}: only {next(iter(by_label))} measured")
        else:
            compared[workload] = by_label
    if not compared:
        why = "; ".join(skipped) or "no run with two workers or more"
        raise UsageError(f"{study}: no workload with two architectures to compare ({why})")
    model = study_model(study, observations, args, find_calibration)
    maps = [map_workload(w, by_label, request, model) for w, by_label in compared.items()]
    return model, maps, skipped


def draw_map(wmap: WorkloadMap, model: StudyModel, study: Path, out: Path, stem: str) -> list[Path]:
    """The map's figure, `<stem>.png` and `.svg` under `out`."""
    return crossover_figure.draw(
        wmap.result, wmap.markers, wmap.fitted, wmap.fitted_source, wmap.too_close,
        model.error_source,
        f"{study.name}: {wmap.result.workload.name}, the architecture predicted fastest per "
        "sample", _held_text(wmap.result.plane, wmap.result.workload), out, stem,
    )  # fmt: skip


def run_map(args: argparse.Namespace, find_calibration: FindCalibration) -> int:
    request = axis_request(args)
    study = Path(args.study)
    if not study.is_dir():
        raise UsageError(f"study folder {study} does not exist")
    out = Path(args.out) if args.out else study / MAP_FOLDER
    # a folder the user gave makes at most itself; the default's is the command's own
    problem = folder_problem(out, parents=not args.out)
    if problem:
        raise UsageError(f"map folder {out} cannot be written: {problem}")
    model, maps, skipped = study_maps(study, request, args, find_calibration)
    # everything is priced: now the files
    written = []
    for wmap in maps:
        slug = wmap.result.workload.slug
        paths = draw_map(wmap, model, study, out, slug)
        md, table = out / f"{slug}_crossovers.md", out / f"{slug}_crossovers.csv"
        md.write_text(markdown(wmap, study, model, paths[0].name), encoding="utf-8")
        table.write_text(csv_text(wmap), encoding="utf-8")
        written.append((wmap, [*paths, md, table]))
    if args.json:
        document = {
            "study": str(study), "model": model.said,
            "too_close_pct": model.error_pct, "too_close_source": model.error_source,
            "axes": {"x": request.x, "y": request.y},
            "workloads": [workload_json(w, p) for w, p in written], "skipped": skipped,
        }  # fmt: skip
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    print(model.said)
    print(f"too close to call: a margin under {model.error_pct:.1f}% ({model.error_source})")
    for line in skipped:
        print(f"skipped {line}")
    for wmap, paths in written:
        print()
        print("\n".join(text_report(wmap, paths)))
    return 0
