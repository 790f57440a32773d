"""Figures of the performance model: predicted vs measured, and what-if scaling curves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archbench.perfmodel.fit.fitting import Scored

ARCH_STYLE = {
    "ring": ("tab:blue", "o"),
    "p2p": ("tab:orange", "s"),
    "ps": ("tab:green", "^"),
    "single": ("tab:gray", "D"),
}


def _pyplot():
    # deferred: matplotlib loads only when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    # deferred: pyplot loads after the Agg backend is chosen
    import matplotlib.pyplot as plt

    return plt


def save(fig, stem: Path) -> list[Path]:
    """PNG (for reading) and SVG (for papers) side by side."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    return paths


def predicted_vs_measured(rows: Sequence[Scored], title: str, stem: Path) -> list[Path]:
    """Scatter of held-out configurations on log axes, y = x and +-15% bands."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    values = [r.measured_s for r in rows] + [r.predicted_s for r in rows]
    low, high = min(values) / 1.5, max(values) * 1.5
    ax.plot([low, high], [low, high], color="black", linewidth=1, label="prediction = measurement")
    for factor, style in ((1.15, "--"),):
        ax.plot(
            [low, high],
            [low * factor, high * factor],
            "k" + style,
            linewidth=0.7,
            alpha=0.6,
            label="±15%",
        )
        ax.plot([low, high], [low / factor, high / factor], "k" + style, linewidth=0.7, alpha=0.6)
    for arch in sorted({r.arch for r in rows}):
        color, marker = ARCH_STYLE.get(arch, ("black", "x"))
        mine = [r for r in rows if r.arch == arch]
        ax.scatter(
            [r.measured_s for r in mine], [r.predicted_s for r in mine],
            color=color, marker=marker, label=f"{arch} ({len(mine)})", zorder=3,
        )  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("measured median step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    paths = save(fig, stem)
    plt.close(fig)
    return paths


def whatif_grid(
    curves: dict[tuple[str, str], dict[str, list[tuple[int, float]]]],
    models: Sequence[str],
    bandwidths: Sequence[str],
    title: str,
    stem: Path,
) -> list[Path]:
    """One panel per (model, bandwidth): predicted samples/s against workers, one line per
    architecture."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(models), len(bandwidths), figsize=(4.0 * len(bandwidths), 3.2 * len(models)),
        squeeze=False, sharex=True,
    )  # fmt: skip
    for i, model in enumerate(models):
        for j, bandwidth in enumerate(bandwidths):
            ax = axes[i][j]
            for label, points in curves[(model, bandwidth)].items():
                family = label.split(" ")[0]
                color, marker = ARCH_STYLE.get(family, ("black", "x"))
                # the reference lines dashed: one PS beside the best K; the dense ring beside
                # the sparse one
                style = "--" if "1 PS" in label or "dense" in label else "-"
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, color=color, marker=marker, markersize=3, label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{model}, {bandwidth}", fontsize=9)
            if i == len(models) - 1:
                ax.set_xlabel("workers (one per host)")
            if j == 0:
                ax.set_ylabel("predicted samples/s")
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    paths = save(fig, stem)
    plt.close(fig)
    return paths
