"""Factor effects: a main-effects plot per response and a ranking of factors by one-way
ANOVA eta² (the share of the response's variance that the factor's levels explain); the factor
that explains the most of each response, or that none clearly does, is its finding."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from archbench.analysis import plotting
from archbench.analysis.fmt import num, p_value
from archbench.analysis.load import Study, factor_column, format_level, level_sort_key
from archbench.analysis.section import Column, FigureFile, Section, Table
from archbench.analysis.stats import eta_squared

KEY, TITLE = "effects", "Factor effects"

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
    scale: float = 1.0  # shown as value × scale
    # relative to a workload's mean as a difference (a score) rather than a ratio (a time)
    difference: bool = False
    # a test quality: shown only where some run recorded it (a study's runs are classification
    # or regression runs, and the other metric is null by design)
    quality: bool = False


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
        scale=100.0,
        difference=True,
        quality=True,
    ),
    # regression runs (--loss mse): their test RMSE, lower is better
    Response(
        "test_rmse",
        "final test RMSE",
        "lower is better",
        "difference from workload mean, lower is better",
        "main_effects_rmse",
        difference=True,
        quality=True,
    ),
)
RESPONSE_NAMES = {response.column: response.name for response in RESPONSES}
COLUMNS = [
    Column("response", "response", lambda v: RESPONSE_NAMES.get(v, str(v))),
    Column("factor", "factor"),
    Column("levels", "levels"),
    Column("eta_sq", "η²"),
    Column("p_value", "p (F test)"),
    Column("n", "runs"),
]
SIGNIFICANCE = 0.05


def analysis_values(study: Study, response: Response) -> tuple[pd.DataFrame, str]:
    """The response per run on the scale the effects use, and that scale's axis label."""
    data = study.ok.dropna(subset=[response.column]).copy()
    multi = data["workload"].nunique() > 1
    if response.difference:
        data["y"] = response.scale * data[response.column]
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
        effects_sentence(ranking, response.column) or f"Main effects on {response.name}",
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
                text += f"  ({p_value(p)})"
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
    headline = (
        effects_sentence(ranking, "epoch_s")
        or effects_sentence(ranking, "test_accuracy")
        or effects_sentence(ranking, "test_rmse")
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


# --- findings ------------------------------------------------------------------------------


def effects_headline(ranking: pd.DataFrame, response: str) -> str | None:
    data = ranking[(ranking["response"] == response) & ranking["eta_sq"].notna()]
    if data.empty:
        return None
    data = data.sort_values("eta_sq", ascending=False)
    top = data.iloc[0]
    text = (
        f"{top['factor']} explains the most variation in "
        f"{RESPONSE_NAMES.get(response, response)} (η² = {num(top['eta_sq'], 2)})"
    )
    if len(data) > 1:
        second = data.iloc[1]
        text += f", then {second['factor']} (η² = {num(second['eta_sq'], 2)})"
    return text


def effects_sentence(ranking: pd.DataFrame, response: str) -> str | None:
    """The largest effect on a response, or that none is clear (F test p >= 0.05)."""
    data = ranking[(ranking["response"] == response) & ranking["eta_sq"].notna()]
    if data.empty:
        return None
    top = data.sort_values("eta_sq").iloc[-1]
    p = top["p_value"]
    if not math.isnan(p) and p >= SIGNIFICANCE:
        return (
            f"No factor has a clear effect on {RESPONSE_NAMES.get(response, response)}: the "
            f"largest is {top['factor']} (η² = {num(top['eta_sq'], 2)}, one-way ANOVA "
            f"{p_value(p)})"
        )
    tail = f"; one-way ANOVA {p_value(p)}" if not math.isnan(p) else ""
    return f"{effects_headline(ranking, response)}{tail}"


def effects_findings(ranking: pd.DataFrame | None) -> list[str]:
    if ranking is None or ranking.empty:
        return []
    sentences = [effects_sentence(ranking, response) for response in RESPONSE_NAMES]
    return [f"{s}." for s in sentences if s]


def build(study: Study, fig_dir: Path) -> Section:
    section = Section(KEY, TITLE, how_to_read=HOW_TO_READ)
    ok = study.ok
    if len(ok) < 3:
        return section.skip(TITLE, f"only {len(ok)} successful run(s); need 3 or more")
    ranking = ranking_table(study)
    if ranking.empty:
        return section.skip(TITLE, "no factor took two or more levels among the successful runs")
    section.tables.append(Table("effect_ranking", "Factors ranked by eta²", ranking, COLUMNS))
    section.tables.append(
        Table("main_effects", "Mean response per level", main_effects_table(study), shown=False)
    )
    section.findings += effects_findings(ranking)
    recorded = [r for r in RESPONSES if r.quality and ok[r.column].notna().any()]
    for response in RESPONSES:
        if response.quality and recorded and response not in recorded:
            continue  # the study's runs measure their quality by the other metric
        if response.quality and not recorded and response.column != "test_accuracy":
            continue  # nothing measured either: one line (accuracy's) says so
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
