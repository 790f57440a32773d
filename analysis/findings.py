"""Data-driven sentences: every finding is computed from the tables, with its numbers.

Each `*_headline` gives a figure its title (one sentence); `collect` gathers the list at the
top of the report. Nothing here is written in advance of the data: a sentence whose numbers
are missing is simply not produced.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from archbench.analysis.load import Study, format_level
from archbench.analysis.section import Section

FACETS = ("link", "batch_size")


def num(value: float, digits: int = 3) -> str:
    """3 significant digits, thousands separated: 11300 -> '11,300', 0.01234 -> '0.0123'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    return f"{value:,.{decimals}f}"


def p_value(value: float) -> str:
    if value is None or math.isnan(value):
        return "p n/a"
    return "p < 0.001" if value < 0.001 else f"p = {num(value, 2)}"


def pct(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.0f}%"


def plus_minus(mean: float, std: float, unit: str = "") -> str:
    text = num(mean)
    if std is not None and not math.isnan(std):
        text += f" ± {num(std, 2)}"
    return f"{text}{unit}"


def _facets(table: pd.DataFrame) -> list[str]:
    return [c for c in FACETS if c in table.columns]


def _setting(row: pd.Series, facets: list[str], with_workload: bool = True) -> str:
    parts = [str(row["workload"])] if with_workload else []
    for column in facets:
        value = format_level(row[column])
        parts.append(f"link {value}" if column == "link" else f"batch {value}/worker")
    return ", ".join(parts)


def _largest_worker_winners(table: pd.DataFrame) -> list[pd.Series]:
    """Per setting (workload × facets): the fastest distributed entry at the most workers."""
    facets = _facets(table)
    distributed = table[(table["arch"] != "single") & table["samples_per_s"].notna()]
    winners = []
    for _, part in distributed.groupby(["workload", *facets], dropna=False, sort=True):
        top = part[part["workers"] == part["workers"].max()]
        winners.append(top.loc[top["samples_per_s"].idxmax()])
    return winners


# --- throughput and scaling ---------------------------------------------------------------


def scaling_headline(table: pd.DataFrame) -> str | None:
    winners = _largest_worker_winners(table)
    if not winners:
        return None
    if len(winners) == 1:
        best = winners[0]
        text = (
            f"At {format_level(best['workers'])} workers {best['arch']} is fastest: "
            f"{num(best['samples_per_s'])} samples/s"
        )
        if not math.isnan(best["speedup"]):
            text += f", {num(best['speedup'])}× single ({pct(best['efficiency'])} efficiency)"
        return text
    archs = pd.Series([w["arch"] for w in winners]).value_counts()
    if len(archs) == 1:
        speedups = [w["speedup"] for w in winners if not math.isnan(w["speedup"])]
        text = f"{archs.index[0]} is fastest at the largest worker count in all {len(winners)} settings"
        if speedups:
            text += f" (up to {num(max(speedups))}× single)"
        return text
    counts = ", ".join(f"{arch} in {n}" for arch, n in archs.items())
    return f"The fastest architecture at the largest worker count depends on the setting: {counts} of {len(winners)}"


def efficiency_headline(table: pd.DataFrame) -> str | None:
    data = table[(table["arch"] != "single") & table["efficiency"].notna()]
    if data.empty:
        return None
    most = data[data["workers"] == data["workers"].max()]
    best = most.loc[most["efficiency"].idxmax()]
    worst = most.loc[most["efficiency"].idxmin()]
    facets = _facets(table)
    multi = data["workload"].nunique() > 1 or bool(facets)
    where_best = f" ({_setting(best, facets)})" if multi else ""
    where_worst = f" ({_setting(worst, facets)})" if multi else ""
    text = (
        f"Scaling efficiency at {format_level(best['workers'])} workers: "
        f"{best['arch']} {pct(best['efficiency'])}{where_best}"
    )
    if worst.name != best.name:
        text += f" vs {worst['arch']} {pct(worst['efficiency'])}{where_worst}"
    return text


def scaling_findings(table: pd.DataFrame, limit: int = 4) -> list[str]:
    facets = _facets(table)
    sentences = []
    distributed = table[(table["arch"] != "single") & table["samples_per_s"].notna()]
    for winner in _largest_worker_winners(table)[:limit]:
        same = distributed
        for column in ["workload", *facets]:
            same = same[same[column].map(str) == str(winner[column])]
        same = same[same["workers"] == winner["workers"]].sort_values(
            "samples_per_s", ascending=False
        )
        text = (
            f"{_setting(winner, facets)}, {format_level(winner['workers'])} workers: "
            f"{winner['arch']} is fastest with "
            f"{plus_minus(winner['samples_per_s'], winner['samples_per_s_std'])} samples/s"
        )
        if not math.isnan(winner["speedup"]):
            text += (
                f", {num(winner['speedup'])}× the single-process baseline "
                f"({pct(winner['efficiency'])} scaling efficiency)"
            )
        if len(same) > 1:
            runner = same.iloc[1]
            text += (
                f"; next is {runner['arch']} at "
                f"{num(runner['samples_per_s'] / winner['samples_per_s'])}× its throughput"
            )
        sentences.append(text + ".")
    return sentences


# --- where the time goes ------------------------------------------------------------------


def timesplit_headline(table: pd.DataFrame) -> str | None:
    data = table[(table["arch"] != "single") & table["comm_share"].notna()]
    if data.empty:
        return None
    most = data.loc[data["comm_share"].idxmax()]
    least = data.loc[data["comm_share"].idxmin()]
    text = (
        f"Communication not hidden by compute is {pct(most['comm_share'])} of the step for "
        f"{_where(most)}"
    )
    if least.name != most.name:
        text += f", {pct(least['comm_share'])} for {_where(least)}"
    return text


def _where(row: pd.Series) -> str:
    text = f"{row['arch']} at {format_level(row['workers'])} workers"
    if "link" in row.index and row["link"] is not None and str(row["link"]) != "nan":
        text += f" on {format_level(row['link'])}"
    return text


def timesplit_findings(table: pd.DataFrame) -> list[str]:
    headline = timesplit_headline(table)
    if headline is None:
        return []
    data = table[(table["arch"] != "single") & table["comm_share"].notna()]
    most = data.loc[data["comm_share"].idxmax()]
    text = (
        f"{headline} ({most['workload']}): {num(1000 * most['exposed_comm_s'])} ms exposed "
        f"communication beside {num(1000 * most['compute_s'])} ms compute "
        f"(measured median step {num(1000 * most['step_s'])} ms)."
    )
    if most["compute_s"] > 1.5 * most["step_s"]:
        text += (
            " The split is unreliable there: the compute measured on probe steps exceeds the "
            "median step."
        )
    if "link" in data.columns and data["link"].map(str).nunique() > 1:
        text += " " + _link_sentence(data)
    return [text]


def _link_sentence(data: pd.DataFrame) -> str:
    """How much the step grows from the fastest to the slowest link, per architecture."""
    from archbench.analysis.load import level_sort_key

    parts = []
    for arch, rows in data.groupby("arch"):
        links = sorted(rows["link"].unique(), key=level_sort_key)
        if len(links) < 2:
            continue
        step = rows["compute_s"] + rows["exposed_comm_s"]
        slow = step[rows["link"] == links[0]].mean()
        fast = step[rows["link"] == links[-1]].mean()
        if fast > 0:
            parts.append(f"{arch} {num(slow / fast)}×")
    if not parts:
        return ""
    return "Going from the fastest to the slowest link lengthens the mean step by: " + (
        ", ".join(parts) + "."
    )


# --- parameter-server placement ------------------------------------------------------------


def _ratio_text(row: pd.Series) -> str:
    text = f"{num(row['ratio'])}×"
    if not math.isnan(row["ci_low"]):
        text += f" (95% CI {num(row['ci_low'])}–{num(row['ci_high'])})"
    return text


def placement_findings(table: pd.DataFrame | None, comparison: str) -> list[str]:
    if table is None or table.empty:
        return []
    data = table[table["ratio"].notna()]
    if data.empty:
        return []
    geo = float(math.exp(data["ratio"].map(math.log).mean()))
    if comparison == "placement":
        subject = "a dedicated PS host"
        against = "a PS co-located with a worker"
    else:
        subject = "asynchronous PS training"
        against = "synchronous"
    extremes = data.loc[[data["ratio"].idxmin(), data["ratio"].idxmax()]].drop_duplicates()
    cases = "; ".join(f"{row['setting']}: {_ratio_text(row)}" for _, row in extremes.iterrows())
    text = (
        f"{subject[0].upper()}{subject[1:]} gives {num(geo)}× the throughput of {against} "
        f"(geometric mean over {len(data)} matched setting(s); {cases})."
    )
    with_ci = data[data["ci_low"].notna()]
    if len(with_ci):
        clear = int(((with_ci["ci_low"] > 1) | (with_ci["ci_high"] < 1)).sum())
        text += (
            f" The 95% CI excludes 1× in {clear} of {len(with_ci)} setting(s) with repetitions"
            + (": not distinguishable from no difference." if clear == 0 else ".")
        )
    sentences = [text]
    if comparison == "sync" and "accuracy_diff" in data.columns:
        diff = data["accuracy_diff"].dropna()
        if len(diff):
            sentences.append(
                "Asynchronous PS ends at a test accuracy "
                f"{'+' if diff.mean() >= 0 else '−'}{num(abs(100 * diff.mean()))} points "
                "from synchronous on average."
            )
    return sentences


def placement_headline(table: pd.DataFrame | None, comparison: str) -> str | None:
    sentences = placement_findings(table, comparison)
    if not sentences:
        return None
    headline = sentences[0].split(" (geometric")[0]
    if "not distinguishable" in sentences[0]:
        headline += ", not distinguishable from 1× at 95% confidence"
    return headline


# --- time to accuracy ----------------------------------------------------------------------


def accuracy_headline(table: pd.DataFrame) -> str | None:
    reached = table[table["time_to_target_s"].notna()]
    if reached.empty:
        if table["final_accuracy"].notna().any():
            best = table.loc[table["final_accuracy"].idxmax()]
            target = table["target_accuracy"].dropna()
            prefix = (
                f"No architecture reached {pct(target.iloc[0])} test accuracy; best"
                if len(target)
                else "Best"
            )
            return f"{prefix} final accuracy: {best['arch']} {pct(best['final_accuracy'])}"
        return None
    parts = []
    for workload, rows in reached.groupby("workload", sort=True):
        rows = rows.sort_values("time_to_target_s")
        first = rows.iloc[0]
        text = (
            f"{first['arch']} reaches {pct(first['target_accuracy'])} first "
            f"({num(first['time_to_target_s'])} s"
        )
        if len(rows) > 1:
            second = rows.iloc[1]
            text += f"; {second['arch']} {num(second['time_to_target_s'])} s"
        text += ")"
        parts.append(f"{workload}: {text}" if reached["workload"].nunique() > 1 else text)
    return "; ".join(parts)


def accuracy_findings(table: pd.DataFrame) -> list[str]:
    headline = accuracy_headline(table)
    if headline is None:
        return []
    sentences = [headline + "."]
    missed = table[table["time_to_target_s"].isna() & table["target_accuracy"].notna()]
    if len(missed) and len(missed) < len(table):
        names = ", ".join(f"{r['arch']} ({r['workload']})" for _, r in missed.iterrows())
        sentences.append(f"Not reaching the target accuracy at all: {names}.")
    return sentences


# --- factor effects ------------------------------------------------------------------------

RESPONSE_NAMES = {"epoch_s": "time per epoch", "test_accuracy": "final test accuracy"}


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


SIGNIFICANCE = 0.05


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


# --- optima and transfer ---------------------------------------------------------------------


def transfer_headline(pairs: pd.DataFrame) -> str | None:
    if pairs is None or pairs.empty:
        return None
    row = pairs.iloc[0]
    if len(pairs) > 1:
        rho = pairs["spearman_rho"].dropna()
        if len(rho):
            return (
                f"Configuration rankings across {len(pairs)} workload pairs: Spearman ρ from "
                f"{num(rho.min(), 2)} to {num(rho.max(), 2)}"
            )
    rho = row["spearman_rho"]
    ranking = (
        f"rankings agree (Spearman ρ = {num(rho, 2)})"
        if not math.isnan(rho) and rho >= 0.7
        else f"rankings differ (Spearman ρ = {num(rho, 2)})"
        if not math.isnan(rho)
        else "too few matched configurations to correlate"
    )
    return (
        f"{row['workload_a']} → {row['workload_b']}: {ranking}; {row['workload_a']}'s best "
        f"configuration ranks {int(row['a_best_rank_in_b'])} of {int(row['matched'])} on "
        f"{row['workload_b']}, {num(row['a_best_slowdown_in_b'])}× its best"
    )


def transfer_findings(best: pd.DataFrame | None, pairs: pd.DataFrame | None) -> list[str]:
    sentences = []
    if best is not None and not best.empty:
        parts = [
            f"{row['workload']}: {row['config']} ({plus_minus(row['epoch_s'], row['epoch_s_std'], ' s')} per epoch)"
            for _, row in best.iterrows()
        ]
        sentences.append("Fastest configuration per workload — " + "; ".join(parts) + ".")
    if pairs is not None:
        for _, row in pairs.iterrows():
            rho, r = row["spearman_rho"], row["pearson_r"]
            corr = (
                f"times per epoch correlate with Pearson r = {num(r, 2)} and Spearman "
                f"ρ = {num(rho, 2)} over {int(row['matched'])} matched configurations"
                if not math.isnan(rho)
                else f"only {int(row['matched'])} matched configuration(s), too few to correlate"
            )
            sentences.append(
                f"{row['workload_a']} vs {row['workload_b']}: {corr}; their top-"
                f"{int(row['top_k'])} sets share {int(row['top_overlap'])}; "
                f"{row['workload_a']}'s optimum ranks {int(row['a_best_rank_in_b'])} on "
                f"{row['workload_b']} ({num(row['a_best_slowdown_in_b'])}× its optimum's time) "
                f"and {row['workload_b']}'s optimum ranks {int(row['b_best_rank_in_a'])} on "
                f"{row['workload_a']} ({num(row['b_best_slowdown_in_a'])}×)."
            )
    return sentences


# --- the list at the top ---------------------------------------------------------------------


def data_findings(study: Study) -> list[str]:
    frame = study.frame
    ok = study.ok
    text = f"{len(ok)} of {len(frame)} runs finished"
    if len(frame) - len(ok):
        counts = study.not_ok["status"].value_counts()
        text += " (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
    if len(ok):
        reps = ok.groupby(["workload", "config"]).size()
        text += (
            f"; {len(reps)} configurations × {num(reps.mean(), 2)} repetitions on average "
            f"over {ok['workload'].nunique()} workload(s)"
        )
    return [text + "."]


def collect(study: Study, sections: Iterable[Section]) -> list[str]:
    """The findings list, in the order of the report's sections."""
    by_key: dict[str, Any] = {s.key: s for s in sections}
    sentences: list[str] = []

    def table(key: str, name: str) -> pd.DataFrame | None:
        section = by_key.get(key)
        return section.table(name) if section else None

    scaling = table("scaling", "scaling")
    if scaling is not None:
        sentences += scaling_findings(scaling)
    timesplit = table("timesplit", "timesplit")
    if timesplit is not None:
        sentences += timesplit_findings(timesplit)
    sentences += placement_findings(table("placement", "placement_ratio"), "placement")
    sentences += placement_findings(table("placement", "sync_ratio"), "sync")
    accuracy = table("accuracy", "time_to_target")
    if accuracy is not None:
        sentences += accuracy_findings(accuracy)
    sentences += effects_findings(table("effects", "effect_ranking"))
    sentences += transfer_findings(table("transfer", "best_config"), table("transfer", "transfer"))
    from archbench.analysis import claims

    sentences += claims.findings(table("claims", "claims"))
    sentences += data_findings(study)
    return sentences
