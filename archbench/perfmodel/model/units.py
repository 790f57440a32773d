"""The emulated links' token bucket, and numbers and lists from flags (rates:
archbench.common.bandwidth).

Every numeric flag of the performance model's commands (predict, model, microbench, optimize) is
held to a row: the registry's (archbench.runtime.settings) where it sets a setting, else a row of the
command's own, ranged the same way (`own_row`); `check_numbers` holds a command's flags to their
rows before it reads or runs anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from archbench.common.errors import UsageError
from archbench.runtime.settings import ALL, LevelError, Setting


def emulated_burst_bytes(link: str | None, dilation: float | None = None) -> float:
    """The tc tbf bucket of the emulated cluster's links at this virtual rate (0 when unknown);
    on a cluster dilated by D, tc shapes the links to rate / D, and the bucket is that rate's."""
    if not link:
        return 0.0
    try:
        # deferred: inside the ImportError guard for a build without archbench.cluster
        from archbench.cluster.network import tbf_burst_bytes
        from archbench.cluster.state import link_rate
        from archbench.common.bandwidth import Bandwidth
    except ImportError:
        return 0.0
    try:
        rate = Bandwidth.tc_rate(str(link), check_range=False)
        return float(tbf_burst_bytes(link_rate(rate, dilation)))
    except Exception:  # noqa: BLE001 - a rate the cluster module cannot read has no bucket
        return 0.0


# Entries one list flag may hold (--workers 2,4,8: each is priced or measured on its own).
MAX_LIST_ENTRIES = 64


def positive_ints(text: str, flag: str, maximum: int | None = None) -> list[int]:
    """A comma-separated list of at most MAX_LIST_ENTRIES positive integers (each at most
    `maximum`) from a command-line flag."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(
            f"{flag} must be a comma-separated list of integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{flag} must list positive integers, got {text!r}")
    if len(values) > MAX_LIST_ENTRIES:
        raise UsageError(f"{flag} lists {len(values):,} values; at most {MAX_LIST_ENTRIES}")
    if maximum is not None and max(values) > maximum:
        raise UsageError(f"{flag} values must be at most {maximum:,}, got {max(values):,}")
    return values


def names(text: str, flag: str) -> list[str]:
    """A comma-separated list of at most MAX_LIST_ENTRIES names (each once) from a flag."""
    values = list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    if not values:
        raise UsageError(f"{flag} names nothing")
    if len(values) > MAX_LIST_ENTRIES:
        raise UsageError(f"{flag} lists {len(values):,} names; at most {MAX_LIST_ENTRIES}")
    return values


def own_row(
    name: str,
    kind: str,
    minimum: float,
    maximum: float,
    exclusive_minimum: bool = False,
) -> Setting:
    """A command's own numeric input (not a setting of a run), ranged as the registry's rows."""
    return Setting(
        name, kind, None, ALL, scope="perfmodel", minimum=minimum, maximum=maximum,
        exclusive_minimum=exclusive_minimum,
    )  # fmt: skip


def check_numbers(args: argparse.Namespace, rows: Iterable[Setting]) -> None:
    """Each of `rows` given in `args` (by its name) finite and within its range; UsageError
    naming the first flag that is not (NaN passes a `<= 0` check, `1e999` reads as inf)."""
    for row in rows:
        value = getattr(args, row.name, None)
        if value is None or row.kind not in ("int", "float"):
            continue
        try:
            row.check_range(value)
        except LevelError as exc:
            raise UsageError(f"--{row.name.replace('_', '-')} {exc}") from None
