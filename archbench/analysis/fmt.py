"""How numbers and placements read in the report: in its sentences (findings, figure titles) and
in the cells of its tables. One spelling everywhere: 3 significant digits, thousands separated,
n/a for nothing; a placement by its label below."""

from __future__ import annotations

import math
from typing import Any

# How the report names a parameter server's placement for a reader, by the value that records,
# settings and the report's frames and comparisons hold (archbench.runtime.settings.SERVER_PLACEMENTS,
# archbench.record.schema.PLACEMENTS). The one table of these labels: every table cell, figure
# label and sentence that shows a placement level takes it from here. A value not listed is
# shown as it is.
PLACEMENT_LABELS = {"colocated": "co-located"}


def placement_label(value: Any) -> str:
    """A placement as the report prints it: 'colocated' -> 'co-located', 'dedicated' as it is."""
    return PLACEMENT_LABELS.get(value, value) if isinstance(value, str) else str(value)


def num(value: float, digits: int = 3) -> str:
    """3 significant digits, thousands separated: 11300 -> '11,300', 0.01234 -> '0.0123'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    return f"{value:,.{decimals}f}"


def p_value(value: float) -> str:
    if value is None or math.isnan(value):
        return "p n/a"
    return "p < 0.001" if value < 0.001 else f"p = {num(value, 2)}"


def pct(value: float) -> str:
    """A share in a sentence: 0.456 -> '46%'."""
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.0f}%"


def plus_minus(mean: float, std: float, unit: str = "") -> str:
    text = num(mean)
    if std is not None and not math.isnan(std):
        text += f" ± {num(std, 2)}"
    return f"{text}{unit}"


# --- table cells --------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def plain(value: Any) -> str:
    """A cell as it is: numbers to 3 significant digits (whole numbers whole), n/a for nothing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return num(value) if not value.is_integer() or abs(value) >= 1e4 else str(int(value))
    return str(value)


def in_ms(value: Any) -> str:
    """Seconds shown as milliseconds."""
    return num(1000 * value) if _is_number(value) else "n/a"


def as_percent(value: Any) -> str:
    """A share in a cell: 0.456 -> '45.6%'."""
    return f"{100 * value:.1f}%" if _is_number(value) else "n/a"


def as_points(value: Any) -> str:
    """A difference of shares, in percentage points: 0.012 -> '+1.2'."""
    return f"{100 * value:+.1f}" if _is_number(value) else "n/a"


def as_signed(value: Any) -> str:
    """A difference of plain numbers (e.g. of test RMSEs): 0.0123 -> '+0.0123'."""
    if not _is_number(value):
        return "n/a"
    return ("+" if value >= 0 else "−") + num(abs(value))


def as_times(value: Any) -> str:
    """A ratio: 1.5 -> '1.5×'."""
    return f"{num(value)}×" if _is_number(value) else "n/a"
