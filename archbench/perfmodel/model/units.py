"""The emulated links' token bucket, and number lists from flags (rates: archbench.bandwidth)."""

from __future__ import annotations

from archbench.errors import UsageError


def emulated_burst_bytes(link: str | None) -> float:
    """The tc tbf bucket of the emulated cluster's links at this rate (0 when unknown)."""
    if not link:
        return 0.0
    try:
        from archbench.cluster.network import tbf_burst_bytes
    except ImportError:
        return 0.0
    try:
        return float(tbf_burst_bytes(str(link)))
    except Exception:  # noqa: BLE001 - a rate the cluster module cannot read has no bucket
        return 0.0


def positive_ints(text: str, flag: str) -> list[int]:
    """A comma-separated list of positive integers from a command-line flag."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(
            f"{flag} must be a comma-separated list of integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{flag} must list positive integers, got {text!r}")
    return values
