"""How well a run's model did on the test data, as the report reads it: test accuracy for a
classification run (`--loss crossentropy`: higher is better, shown as a percentage, with a target
and a time to it) and test RMSE for a regression run (`--loss mse`: lower is better, shown as a
number; records name no target RMSE, so there is no time to target). A regression run's record
holds a null accuracy: every place that reads the test quality asks `metric_of` which of the two
a run (or a workload's runs) has, so a null accuracy never reads as 0%.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from archbench.analysis.fmt import as_percent, num, pct, plain


@dataclass(frozen=True)
class Metric:
    key: str  # the frame's `metric` value: accuracy | rmse
    column: str  # the frame column of its final value (result.*)
    epoch_key: str  # its key in each of timing.epochs' evaluation points
    name: str  # in sentences and headers: 'test accuracy'
    higher_is_better: bool
    scale: float  # plotted as value × scale
    axis_label: str
    cell: Callable[[Any], str]  # a table cell
    text: Callable[[float], str]  # in a sentence

    @property
    def better(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    def sort_value(self, value: float) -> float:
        """A key that sorts the best value first (NaN last)."""
        if value is None or math.isnan(value):
            return math.inf
        return -value if self.higher_is_better else value


ACCURACY = Metric(
    "accuracy",
    "test_accuracy",
    "test_accuracy",
    "test accuracy",
    True,
    100.0,
    "test accuracy (%)",
    as_percent,
    pct,
)
RMSE = Metric(
    "rmse",
    "test_rmse",
    "test_rmse",
    "test RMSE",
    False,
    1.0,
    "test RMSE (lower is better)",
    plain,
    num,
)
METRICS = {metric.key: metric for metric in (ACCURACY, RMSE)}


def run_metric(loss: Any, accuracy: float, rmse: float) -> str:
    """'rmse' for a regression run (`config.loss` mse, or an RMSE and no accuracy recorded),
    else 'accuracy' (records from before --loss are classification runs)."""
    if loss == "mse":
        return RMSE.key
    if isinstance(accuracy, float) and math.isnan(accuracy) and not math.isnan(rmse):
        return RMSE.key
    return ACCURACY.key


def metric_of(runs: pd.DataFrame) -> Metric:
    """The metric of a group of runs (a workload's, a configuration's): RMSE where most of them
    are regression runs (a workload is one task; the loss is one of its factors)."""
    if "metric" not in runs or runs.empty:
        return ACCURACY
    counts = runs["metric"].value_counts()
    return RMSE if counts.get(RMSE.key, 0) > counts.get(ACCURACY.key, 0) else ACCURACY
