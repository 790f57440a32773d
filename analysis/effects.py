"""Factor effects: a main-effects plot per response and a ranking of factors by one-way
ANOVA eta² (the share of the response's variance that the factor's levels explain)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import findings, plotting
from archbench.analysis.load import Study, factor_column, format_level, level_sort_key
from archbench.analysis.section import FigureFile, Section, Table
from archbench.analysis.stats import eta_squared

HOW_TO_READ = (
    "Main effects: each panel is one factor; the points are the mean response at each of its "
    "levels over all successful runs at that level (bars: standard error of that mean), the "
    "dashed line the overall mean. A steep panel is a factor that matters. Where the study has "
    "several workloads, each gets its own line and the response is taken relative to that "
    "workload's mean, so workloads of different size compare. Speed is time per epoch (the "
    "data set's samples at the median step's throughput), never a run's raw training time: "
    "runs with more workers process more samples in the same number of steps. The ranking "
    "orders factors by "
    "eta², the share of the response's variance explained by the factor alone (one-way ANOVA; "
    "p-values from the F test). Factors that apply to some architectures only (e.g. sync for "
    "PS) are measured over the runs they apply to, and factors varied together with the "
    "architecture carry part of its effect."
)


@dataclass(frozen=True)
class Response:
    column: str
    name: str
    unit: str
    relative_unit: str
    stem: str


RESPONSES = (
    # Time per epoch, not the run's training time: runs of a study share `steps`, so a run with
    # more workers processes more samples; only time for the same data ranks fairly.
    Response("epoch_s", "time per epoch", "s", "× workload mean", "main_effects_time"),
    Response(
        "test_accuracy",
        "final test accuracy",
        "%",
        "points from workload mean",
        "main_effects_accuracy",
    ),
)


def analysis_values(study: Study, response: Response) -> tuple[pd.DataFrame, str]:
    """The response per run on the scale the effects use, and that scale's axis label."""
    data = study.ok.dropna(subset=[response.column]).copy()
    multi = data["workload"].nunique() > 1
    if response.column == "test_accuracy":
        data["y"] = 100 * data[response.column]
        if multi:
            data["y"] -= data.groupby("workload")["y"].transform("mean")
    else:
        data["y"] = data[response.column]
        if multi:
            data["y"] /= data.groupby("workload")["y"].transform("mean")
    unit = response.relative_unit if multi else response.unit
    return data, f"{response.name}\n({unit})"


def effect_factors(study: Study, data: pd.DataFrame) -> list[str]:
    multi = data["workload"].nunique() > 1
    names = []
    for name in study.factors:
        if multi and name in study.workload_factors:
            continue  # workloads differ by design; their effect is not a configuration choice
        if data[factor_column(name)].dropna().nunique() > 1:
            names.append(name)
    return names


def ranking_table(study: Study) -> pd.DataFrame:
    rows = []
    for response in RESPONSES:
        data, _ = analysis_values(study, response)
        for name in effect_factors(study, data):
            levels = data[factor_column(name)]
            stats = eta_squared(data["y"], levels)
            rows.append(
                {
                    "response": response.column,
                    "factor": name,
                    "levels": int(levels.dropna().nunique()),
                    **stats,
                }
            )
    table = pd.DataFrame(rows, columns=["response", "factor", "levels", "eta_sq", "p_value", "n"])
    return table.sort_values(["response", "eta_sq"], ascending=[True, False]).reset_index(drop=True)


def main_effects_table(study: Study) -> pd.DataFrame:
    rows = []
    for response in RESPONSES:
        data, _ = analysis_values(study, response)
        for name in effect_factors(study, data):
            column = factor_column(name)
            for level, part in data.dropna(subset=[column]).groupby(column, sort=False):
                rows.append(
                    {
                        "response": response.column,
                        "factor": name,
                        "level": format_level(level),
                        "mean": part["y"].mean(),
                        "std": part["y"].std(),
                        "n": len(part),
                    }
                )
    return pd.DataFrame(rows, columns=["response", "factor", "level", "mean", "std", "n"])


def plot_main_effects(study: Study, response: Response, fig_dir: Path) -> FigureFile | None:
    data, label = analysis_values(study, response)
    names = effect_factors(study, data)
    if not names:
        return None
    ncols = min(len(names), 4)
    fig, axes = plotting.new_figure(len(names), ncols=ncols, panel_size=(3.3, 3.0))
    workloads = sorted(data["workload"].unique())
    grand = data["y"].mean()
    for ax, name in zip(axes, names, strict=True):
        column = factor_column(name)
        subset = data.dropna(subset=[column])
        order = plotting.arch_sort_key if name == "arch" else level_sort_key
        levels = sorted(subset[column].unique(), key=order)
        positions = {level: i for i, level in enumerate(levels)}
        for index, workload in enumerate(workloads):
            part = subset[subset["workload"] == workload]
            stats = part.groupby(column)["y"].agg(["mean", "std", "count"])
            stats = stats.loc[[lv for lv in levels if lv in stats.index]]
            sem = (stats["std"] / np.sqrt(stats["count"])).fillna(0.0)
            ax.errorbar(
                [positions[lv] for lv in stats.index],
                stats["mean"],
                yerr=sem,
                marker="o",
                capsize=3,
                color=plotting.series_color(index) if len(workloads) > 1 else "#333333",
                label=str(workload) if len(workloads) > 1 else "mean ± s.e.",
            )
        ax.axhline(grand, color="grey", linestyle="--", linewidth=1, label="overall mean")
        plotting.category_labels(ax, [format_level(lv) for lv in levels])
        ax.set_xlim(-0.5, len(levels) - 0.5)
        ax.set_xlabel(name)
    # One y scale for all panels, so the steepness of panels compares directly.
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for index, ax in enumerate(axes):
        ax.set_ylim(low, high)
        if index % ncols == 0:
            ax.set_ylabel(label)
        else:
            ax.tick_params(labelleft=False)
    ranking = ranking_table(study)
    return plotting.finish_figure(
        fig,
        axes,
        findings.effects_sentence(ranking, response.column) or f"Main effects on {response.name}",
        fig_dir,
        response.stem,
        f"Main effects on {response.name}",
    )


def plot_ranking(ranking: pd.DataFrame, fig_dir: Path) -> FigureFile | None:
    responses = [r for r in RESPONSES if (ranking["response"] == r.column).any()]
    if not responses:
        return None
    longest = max(int((ranking["response"] == r.column).sum()) for r in responses)
    fig, axes = plotting.new_figure(
        len(responses), ncols=len(responses), panel_size=(4.4, 0.45 * longest + 1.6)
    )
    for ax, response in zip(axes, responses, strict=True):
        part = ranking[ranking["response"] == response.column].sort_values("eta_sq")
        ys = np.arange(len(part))
        ax.barh(ys, part["eta_sq"].fillna(0.0), color="#4c72b0")
        for y, eta, p in zip(ys, part["eta_sq"], part["p_value"], strict=True):
            text = "n/a" if np.isnan(eta) else f"{eta:.2f}"
            if not np.isnan(p):
                text += f"  ({findings.p_value(p)})"
            ax.annotate(
                text,
                (0 if np.isnan(eta) else eta, y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(ys)
        ax.set_yticklabels(part["factor"])
        ax.set_xlim(0, 1.45)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_xlabel("η² (share of variance explained)")
        ax.grid(axis="y", visible=False)
        plotting.panel_title(ax, response.name)
    headline = findings.effects_sentence(ranking, "epoch_s") or findings.effects_sentence(
        ranking, "test_accuracy"
    )
    # Nothing here is labelled, so no legend is added.
    return plotting.finish_figure(
        fig,
        axes,
        headline or "Factor effect ranking",
        fig_dir,
        "effect_ranking",
        "Factors ranked by eta²",
    )


def build(study: Study, fig_dir: Path) -> Section:
    section = Section("effects", "Factor effects", how_to_read=HOW_TO_READ)
    ok = study.ok
    if len(ok) < 3:
        return section.skip("Factor effects", f"only {len(ok)} successful run(s); need 3 or more")
    ranking = ranking_table(study)
    if ranking.empty:
        return section.skip(
            "Factor effects", "no factor took two or more levels among the successful runs"
        )
    section.tables.append(Table("effect_ranking", "Factors ranked by eta²", ranking))
    section.tables.append(
        Table("main_effects", "Mean response per level", main_effects_table(study))
    )
    for response in RESPONSES:
        figure = plot_main_effects(study, response, fig_dir)
        if figure is None:
            section.skip(
                f"Main effects on {response.name}",
                f"no run recorded {response.name}, or no factor varied among those that did",
            )
        else:
            section.figures.append(figure)
    figure = plot_ranking(ranking, fig_dir)
    if figure is not None:
        section.figures.append(figure)
    if ok["workload"].nunique() > 1 and study.workload_factors:
        section.notes.append(
            "The workload factors (" + ", ".join(study.workload_factors) + ") are left out "
            "of the ranking: each workload's response is taken relative to its own mean."
        )
    return section
