"""Small statistics shared by the figures: per-configuration summaries, ratios with their
uncertainty, best configurations and one-way effect sizes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

BOOTSTRAP_RESAMPLES = 2000


def per_config(
    frame: pd.DataFrame, keys: list[str], metric: str, extra: Sequence[str] = ()
) -> pd.DataFrame:
    """Mean, std (ddof=1; NaN for one repetition) and count of `metric` per configuration.

    `extra` metrics are averaged alongside (their `<name>` and `<name>_std`).
    """
    data = frame.dropna(subset=[metric])
    if data.empty:
        columns = [*keys, "config", "mean", "std", "n"]
        return pd.DataFrame(columns=columns)
    group_keys = [*keys, "config"]
    grouped = data.groupby(group_keys, dropna=False, sort=True)
    summary = grouped[metric].agg(["mean", "std", "count"]).rename(columns={"count": "n"})
    for name in extra:
        summary[name] = grouped[name].mean()
        summary[f"{name}_std"] = grouped[name].std()
    return summary.reset_index()


def best_per_group(
    summary: pd.DataFrame, group_keys: list[str], higher_is_better: bool
) -> pd.DataFrame:
    """The configuration with the best mean in each group (ties: the first by config label)."""
    if summary.empty:
        return summary
    ordered = summary.sort_values(
        [*group_keys, "mean", "config"],
        ascending=[True] * len(group_keys) + [not higher_is_better, True],
    )
    return ordered.groupby(group_keys, dropna=False, sort=True).head(1).reset_index(drop=True)


def ratio_of_means(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """mean(a)/mean(b), its std propagated from the standard errors, and a bootstrap 95% CI.

    With a single repetition on either side, the uncertainty is NaN (nothing to estimate it from).
    """
    a_values = np.asarray([x for x in a if not math.isnan(x)], dtype=float)
    b_values = np.asarray([x for x in b if not math.isnan(x)], dtype=float)
    if not len(a_values) or not len(b_values) or b_values.mean() == 0:
        return {"ratio": math.nan, "ratio_std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    ratio = float(a_values.mean() / b_values.mean())
    if len(a_values) < 2 or len(b_values) < 2:
        return {"ratio": ratio, "ratio_std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    se_a = a_values.std(ddof=1) / math.sqrt(len(a_values))
    se_b = b_values.std(ddof=1) / math.sqrt(len(b_values))
    ratio_std = ratio * math.hypot(se_a / a_values.mean(), se_b / b_values.mean())
    # Fixed seed: the same records give the same report.
    rng = np.random.default_rng(0)
    boot_a = rng.choice(a_values, size=(BOOTSTRAP_RESAMPLES, len(a_values))).mean(axis=1)
    boot_b = rng.choice(b_values, size=(BOOTSTRAP_RESAMPLES, len(b_values))).mean(axis=1)
    boot = boot_a / boot_b
    low, high = np.percentile(boot, [2.5, 97.5])
    return {"ratio": ratio, "ratio_std": ratio_std, "ci_low": float(low), "ci_high": float(high)}


def mean_ci_halfwidth(std: float, n: float, level: float = 0.95) -> float:
    """Half-width of the Student-t confidence interval of a mean from its std (ddof=1) and its
    count; NaN with fewer than two values."""
    if n is None or math.isnan(n) or n < 2 or std is None or math.isnan(std):
        return math.nan
    return float(scipy_stats.t.ppf(0.5 + level / 2, n - 1) * std / math.sqrt(n))


def propagated_ratio_std(num: float, num_std: float, den: float, den_std: float) -> float:
    """Std of num/den from the two (independent) stds; NaN when either is unknown."""
    if den == 0 or any(math.isnan(x) for x in (num, num_std, den, den_std)):
        return math.nan
    return abs(num / den) * math.hypot(num_std / num if num else 0.0, den_std / den)


def eta_squared(values: pd.Series, levels: pd.Series) -> dict[str, float]:
    """One-way ANOVA of `values` by `levels`: eta² (share of variance explained) and its p."""
    data = pd.DataFrame({"y": values.astype(float), "level": levels}).dropna()
    groups = [g["y"].to_numpy() for _, g in data.groupby("level", sort=False)]
    if len(groups) < 2 or len(data) < 3:
        return {"eta_sq": math.nan, "p_value": math.nan, "n": float(len(data))}
    grand = data["y"].mean()
    ss_total = float(((data["y"] - grand) ** 2).sum())
    ss_between = float(sum(len(g) * (g.mean() - grand) ** 2 for g in groups))
    eta = ss_between / ss_total if ss_total > 0 else 0.0
    p_value = math.nan
    if len(data) > len(groups) and all(len(g) > 0 for g in groups):
        with np.errstate(all="ignore"):
            result = scipy_stats.f_oneway(*groups)
        p_value = float(result.pvalue) if result.pvalue == result.pvalue else math.nan
    return {"eta_sq": eta, "p_value": p_value, "n": float(len(data))}


def correlations(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation with p-values; NaN with fewer than 3 pairs or no spread."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    nan = {"pearson_r": math.nan, "pearson_p": math.nan, "spearman_rho": math.nan}
    nan["spearman_p"] = math.nan
    if len(xs) < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return nan
    pearson = scipy_stats.pearsonr(xs, ys)
    spearman = scipy_stats.spearmanr(xs, ys)
    return {
        "pearson_r": float(pearson.statistic),
        "pearson_p": float(pearson.pvalue),
        "spearman_rho": float(spearman.statistic),
        "spearman_p": float(spearman.pvalue),
    }


def top_fraction_count(n: int, fraction: float = 0.10) -> int:
    """How many configurations make the top `fraction` of n (at least one)."""
    return max(1, math.ceil(fraction * n - 1e-9))
