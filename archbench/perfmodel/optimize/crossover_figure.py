"""The crossover map of one workload drawn: each cell shaded by its predicted winner (deeper
for a larger margin over the runner-up), grey and hatched where the margin is under the model's
error, washed out beyond the range the fit saw (outlined), and the study's runs as markers:
filled where the measured fastest is the predicted fastest, hollow and crossed where not."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.collections import PatchCollection
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from archbench.analysis import plotting
from archbench.perfmodel.optimize.crossover import (
    BANDWIDTH,
    LATENCY,
    WORKERS,
    CrossoverMap,
    Marker,
    format_value,
)

# the margin over the runner-up drawn in full colour; smaller ones paler, down to FAINTEST
FULL_MARGIN = 0.5
FAINTEST = 0.3
TOO_CLOSE_COLOR = "#d4d4d4"
WASH = (1.0, 1.0, 1.0, 0.35)  # laid over the cells beyond the fitted range
# the colours of candidates after each architecture's first: no grey (grey is "too close")
OTHER_COLORS = ("#8172b3", "#937860", "#da8bc3", "#ccb974", "#64b5cd", "#17becf", "#bcbd22")
# above this many runs' settings, their labels would cover the map
MAX_LABELLED_MARKERS = 12
AXIS_LABELS = {
    WORKERS: "workers",
    BANDWIDTH: "link bandwidth",
    LATENCY: "link latency (α per message)",
    "model-size": "gradient bytes per step (compute as measured)",
}


def label_colors(labels: Sequence[str]) -> dict[str, str]:
    """The first candidate of an architecture in its colour of every archbench figure, the
    others (a second PS placement, a compression) in the extra colours."""
    colors: dict[str, str] = {}
    used_archs: set[str] = set()
    extra = 0
    for label in labels:
        arch = label.split()[0]
        if arch in plotting.ARCH_COLORS and arch not in used_archs:
            colors[label] = plotting.arch_color(arch)
            used_archs.add(arch)
        else:
            colors[label] = OTHER_COLORS[extra % len(OTHER_COLORS)]
            extra += 1
    return colors


def shade(color: str, margin: float) -> tuple[float, float, float]:
    """The colour mixed with white: FAINTEST at no margin, full at FULL_MARGIN or more."""
    strength = 1.0 if math.isinf(margin) else min(math.log1p(margin) / math.log1p(FULL_MARGIN), 1)
    amount = FAINTEST + (1 - FAINTEST) * max(strength, 0.0)
    return tuple(1 - amount * (1 - c) for c in to_rgb(color))  # type: ignore[return-value]


def edges(values: Sequence[float]) -> list[float]:
    """Cell borders on a log axis: halfway (geometrically) between neighbours, the outer ones
    as far out as the inner."""
    inner = [math.sqrt(a * b) for a, b in zip(values, values[1:])]
    first = values[0] ** 2 / inner[0]
    last = values[-1] ** 2 / inner[-1]
    return [first, *inner, last]


def _ticks(axis: str, lo: float, hi: float) -> list[float]:
    base = 2.0 if axis == WORKERS else 10.0
    k = math.ceil(math.log(lo, base) - 1e-9)
    ticks = []
    while base**k <= hi * (1 + 1e-9):
        ticks.append(base**k)
        k += 1
    return ticks if len(ticks) >= 2 else [lo, hi]


def _tick_text(axis: str, value: float) -> str:
    return f"{value:g}" if axis == WORKERS else format_value(axis, value)


def draw(
    result: CrossoverMap,
    markers: Sequence[Marker],
    fitted: dict[str, tuple[int, int] | None],
    fitted_source: str,
    too_close: float,
    too_close_source: str,
    title: str,
    held: str,
    out_dir: Path,
    stem: str,
) -> list[Path]:
    """`<stem>.png` and `<stem>.svg` under out_dir."""
    plotting.plt.rcParams.update(plotting.STYLE)
    fig, ax = plotting.plt.subplots(figsize=(10.5, 6.2), layout="constrained")
    ax.grid(False)
    plane = result.plane
    xe, ye = edges(plane.x_values), edges(plane.y_values)
    colors = label_colors(result.labels)
    spans = (fitted.get(plane.x), fitted.get(plane.y))
    shown = _cells(ax, result, colors, xe, ye, spans, too_close)
    outlined = spans[0] is not None and spans[1] is not None
    if spans[0] is not None and spans[1] is not None:
        (x0, x1), (y0, y1) = spans
        ax.add_patch(
            Rectangle((xe[x0], ye[y0]), xe[x1 + 1] - xe[x0], ye[y1 + 1] - ye[y0], fill=False,
                      edgecolor="black", lw=2.2, zorder=4)
        )  # fmt: skip
    _draw_markers(ax, markers)
    _axes(ax, plane.x, plane.x_values, xe, ax.xaxis)
    _axes(ax, plane.y, plane.y_values, ye, ax.yaxis)
    ax.set_title(
        plotting.wrap(
            f"{held}. Shade: the predicted fastest, deeper for a larger margin over the "
            f"runner-up (full at {FULL_MARGIN:.0%}); grey hatched: margin under "
            f"{too_close:.1%} ({too_close_source})",
            110,
        ),
        fontsize=9,
    )
    handles = _legend(result, colors, markers, fitted_source, outlined, shown)
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8
    )
    fig.suptitle(plotting.wrap(title, 110), fontsize=11, fontweight="bold")
    return plotting.save(fig, out_dir, stem)


def _cells(
    ax: Axes,
    result: CrossoverMap,
    colors: dict[str, str],
    xe: Sequence[float],
    ye: Sequence[float],
    spans: tuple[tuple[int, int] | None, tuple[int, int] | None],
    too_close: float,
) -> tuple[bool, bool]:
    """Every cell shaded; the close ones hatched, those beyond the fitted range washed out.
    Whether any was close, and any washed."""
    cells, faces, close, washed = [], [], [], []
    for iy, row in enumerate(result.cells):
        for ix, cell in enumerate(row):
            corner, width, height = (xe[ix], ye[iy]), xe[ix + 1] - xe[ix], ye[iy + 1] - ye[iy]
            cells.append(Rectangle(corner, width, height))
            if cell.winner is None:
                faces.append((1.0, 1.0, 1.0))
            elif cell.margin < too_close:
                faces.append(to_rgb(TOO_CLOSE_COLOR))
                close.append(Rectangle(corner, width, height))
            else:
                faces.append(shade(colors[cell.winner.label], cell.margin))
            if not all(s is not None and s[0] <= i <= s[1] for s, i in zip(spans, (ix, iy))):
                washed.append(Rectangle(corner, width, height))
    ax.add_collection(PatchCollection(cells, facecolors=faces, edgecolors="none"))
    if close:
        ax.add_collection(
            PatchCollection(close, facecolors="none", edgecolors="#8a8a8a", hatch="xxx", lw=0)
        )
    if washed:
        ax.add_collection(PatchCollection(washed, facecolors=[WASH], edgecolors="none"))
    return bool(close), bool(washed)


def _axes(
    ax: Axes, name: str, values: Sequence[float], cell_edges: Sequence[float], axis: Axis
) -> None:
    """A log axis over the cells, ticked at powers of two (workers) or of ten."""
    if axis is ax.xaxis:
        ax.set_xscale("log")
        ax.set_xlim(cell_edges[0], cell_edges[-1])
        ax.set_xlabel(AXIS_LABELS[name])
    else:
        ax.set_yscale("log")
        ax.set_ylim(cell_edges[0], cell_edges[-1])
        ax.set_ylabel(AXIS_LABELS[name])
    axis.set_major_locator(FixedLocator(_ticks(name, values[0], values[-1])))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _tick_text(name, v)))


def _draw_markers(ax: Axes, markers: Sequence[Marker]) -> None:
    """Black and white, to stand out on any shade: a disc where the runs agree with the map,
    a ring where their measured gap is within their noise (too close to call), a ring with a
    cross (and what was measured) where they disagree. Labels of neighbouring
    disagreeing markers alternate above and below them (on the lowest row, two heights above:
    below it are the axis's ticks), so those on one line do not overlap."""
    labelled = 0
    lowest = min((m.y for m in markers), default=0.0)
    for m in sorted(markers, key=lambda m: (m.y, m.x)):
        if not m.compared:
            ax.scatter([m.x], [m.y], s=30, color="black", marker=".", zorder=6)
        elif m.agrees:
            ax.scatter([m.x], [m.y], s=90, color="black", edgecolors="white", lw=1.5, zorder=6)
        elif m.too_close:
            ax.scatter([m.x], [m.y], s=90, color="white", edgecolors="black", lw=1.8, zorder=6)
        else:
            ax.scatter([m.x], [m.y], s=110, color="white", edgecolors="black", lw=1.8, zorder=6)
            ax.scatter([m.x], [m.y], s=55, color="black", marker="x", lw=1.6, zorder=7)
            if len(markers) <= MAX_LABELLED_MARKERS:
                offset = (9, 7) if labelled % 2 == 0 else (9, 19 if m.y == lowest else -15)
                labelled += 1
                ax.annotate(
                    f"measured: {m.measured_fastest}", (m.x, m.y), xytext=offset,
                    textcoords="offset points", fontsize=7, zorder=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
                )  # fmt: skip


def _legend(
    result: CrossoverMap,
    colors: dict[str, str],
    markers: Sequence[Marker],
    fitted_source: str,
    outlined: bool,
    shown: tuple[bool, bool],
) -> list:
    """Every candidate, then what the map shows of the rest: too close (`shown[0]`),
    washed out (`shown[1]`), the outline and the kinds of runs' markers drawn."""
    won = result.winners()
    handles: list = [
        Patch(facecolor=colors[label], label=label + ("" if won[label] else " (never fastest)"))
        for label in result.labels
    ]
    if shown[0]:
        handles.append(
            Patch(facecolor=TOO_CLOSE_COLOR, edgecolor="#8a8a8a", hatch="xxx",
                  label="too close to call")
        )  # fmt: skip
    if shown[1]:
        handles.append(
            Patch(facecolor="#f3f3f3", edgecolor="#bbbbbb", label="extrapolated: washed out")
        )
    if outlined:
        handles.append(Line2D([], [], color="black", lw=2.2, label=f"outline: {fitted_source}"))
    else:
        handles.append(
            Line2D([], [], color="none", label=f"no outline ({fitted_source}: not on this grid)")
        )
    if any(m.compared and m.agrees for m in markers):
        handles.append(
            Line2D([], [], marker="o", ls="none", mfc="black", mec="white", ms=9,
                   label="runs: measured fastest = predicted")
        )  # fmt: skip
    if any(m.compared and m.too_close for m in markers):
        handles.append(
            Line2D([], [], marker="o", ls="none", mfc="white", mec="black", ms=9,
                   label="runs: within their noise")
        )  # fmt: skip
    if any(m.compared and m.disagrees for m in markers):
        handles.append(
            Line2D([], [], marker=r"$\otimes$", ls="none", color="black", ms=11,
                   label="runs: measured fastest ≠ predicted")
        )  # fmt: skip
    if any(not m.compared for m in markers):
        handles.append(
            Line2D([], [], marker=".", ls="none", color="black", label="runs: one candidate only")
        )
    return handles
