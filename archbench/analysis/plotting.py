"""Shared figure style: one colour per architecture everywhere, labelled axes with units,
titles that wrap instead of overlapping, PNG + SVG output from the Agg backend."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from archbench.analysis.section import FigureFile  # noqa: E402
from archbench.common.archs import ARCHITECTURES, ARCHS, sort_key  # noqa: E402

ARCH_COLORS: dict[str, str] = {name: a.color for name, a in ARCHS.items()}
ARCH_MARKERS: dict[str, str] = {name: a.marker for name, a in ARCHS.items()}
ARCH_ORDER: tuple[str, ...] = ARCHITECTURES
COMPUTE_COLOR = "#4c72b0"
COMM_COLOR = "#dd8452"
EXTRA_COLORS = ("#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
# Legend entry of bars drawn from one run's own step times (no repetitions to spread over).
WITHIN_RUN_BARS = "bars: within-run step p10-p90, single repetition"

STYLE: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",  # text stays text in the SVG
}


def arch_color(arch: str, index: int = 0) -> str:
    return ARCH_COLORS.get(arch, EXTRA_COLORS[index % len(EXTRA_COLORS)])


def arch_marker(arch: str) -> str:
    return ARCH_MARKERS.get(arch, "o")


arch_sort_key = sort_key  # the architectures' order is common/archs.py's


def series_color(index: int) -> str:
    return EXTRA_COLORS[index % len(EXTRA_COLORS)]


def wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width=max(width, 20))) or text


def new_figure(
    panels: int, ncols: int | None = None, panel_size: tuple[float, float] = (4.6, 3.4)
) -> tuple[Figure, list[Axes]]:
    """A grid big enough for `panels` axes (unused cells removed), constrained layout."""
    plt.rcParams.update(STYLE)
    ncols = max(1, min(ncols or panels, panels))
    nrows = int(np.ceil(panels / ncols))
    fig, grid = plt.subplots(
        nrows,
        ncols,
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.6),
        squeeze=False,
        layout="constrained",
    )
    axes = list(grid.ravel())
    for extra in axes[panels:]:
        extra.remove()
    return fig, axes[:panels]


def set_title(fig: Figure, title: str) -> None:
    """The figure's title states its finding; wrapped to the figure's width."""
    width_in = fig.get_size_inches()[0]
    fig.suptitle(wrap(title, int(width_in * 11)), fontsize=11, fontweight="bold")


def panel_title(ax: Axes, text: str) -> None:
    width_in = ax.get_position().width * ax.figure.get_size_inches()[0]
    ax.set_title(wrap(text, int(max(width_in, 3.0) * 12)))


def save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write `<stem>.png` and `<stem>.svg` under out_dir; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix in ("png", "svg"):
        path = out_dir / f"{stem}.{suffix}"
        fig.savefig(path, bbox_inches="tight", metadata=_metadata(suffix))
        paths.append(path)
    plt.close(fig)
    return paths


def _metadata(suffix: str) -> dict[str, Any]:
    # Without a date the same records give byte-identical SVGs.
    return {"Date": None} if suffix == "svg" else {}


def category_labels(ax: Axes, labels: list[str]) -> None:
    """Tick labels for categories, rotated (on one line) when they would not fit side by side."""
    ax.set_xticks(np.arange(len(labels)))
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    width_in = ax.get_position().width * ax.figure.get_size_inches()[0]
    # About 13 characters of 9-pt text per inch; leave a gap between neighbours.
    room_per_label = 13 * width_in / max(len(labels), 1)
    if longest + 2 > room_per_label:
        flat = [label.replace("\n", " · ") for label in labels]
        ax.set_xticklabels(flat, rotation=35, ha="right", rotation_mode="anchor")
    else:
        ax.set_xticklabels(labels)


def legend_outside(fig: Figure, axes: list[Axes], ncol: int | None = None) -> None:
    """One legend for the whole figure, below the panels, without duplicate entries."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if not handles:
        return
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncol=ncol or min(len(handles), 5),
        frameon=False,
    )


def bar_legend_entry(ax: Axes, label: str) -> None:
    """A legend entry (a black error bar) that says what a figure's error bars are."""
    ax.errorbar([], [], yerr=[], fmt="none", ecolor="black", capsize=3, label=label)


def finish_figure(
    fig: Figure,
    axes: list[Axes],
    title: str,
    out_dir: Path,
    stem: str,
    caption: str,
    legend_columns: int | None = None,
) -> FigureFile:
    """The end of every figure: one legend below the panels, the finding as its title, and
    `<stem>.png` + `<stem>.svg` written under out_dir."""
    legend_outside(fig, axes, ncol=legend_columns)
    set_title(fig, title)
    return FigureFile(stem, caption, save(fig, out_dir, stem))
