"""Parsing of link bandwidths as users and `tc` write them, and of number lists from flags."""

from __future__ import annotations

import re
from typing import Any

from archbench.errors import UsageError

# tc(8) units: "bit" suffixes are bits per second, "bps" suffixes are BYTES per second.
_BITS_PER_UNIT = {
    "": 1.0,
    "bit": 1.0,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "bps": 8.0,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
    "tbps": 8e12,
    # spelled-out forms ("10 Gbit/s", "100mbit/s", "1g")
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "t": 1e12,
    "bit/s": 1.0,
    "kbit/s": 1e3,
    "mbit/s": 1e6,
    "gbit/s": 1e9,
    "tbit/s": 1e12,
    "kb/s": 1e3,
    "mb/s": 1e6,
    "gb/s": 1e9,
}

_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z/]*)\s*$")


def parse_bandwidth(text: str | float | int) -> float:
    """Bits per second from '200mbit', '1gbit', '10 Gbit/s', '1g' or a number (bit/s).

    Raises UsageError naming the text when it cannot be read.
    """
    if isinstance(text, int | float):
        if text <= 0:
            raise UsageError(f"bandwidth must be positive, got {text}")
        return float(text)
    match = _PATTERN.match(str(text).lower())
    if not match or match.group(2) not in _BITS_PER_UNIT:
        raise UsageError(
            f"cannot read bandwidth {text!r} (examples: 200mbit, 1gbit, 10gbit/s, 1e9)"
        )
    value = float(match.group(1)) * _BITS_PER_UNIT[match.group(2)]
    if value <= 0:
        raise UsageError(f"bandwidth must be positive, got {text!r}")
    return value


def link_bandwidth_bits(link: Any) -> float | None:
    """Bandwidth of a record's `cluster.link` (a string like '200mbit', a number, or a dict
    with a bandwidth entry); None when the run had no shaped link (localhost)."""
    if link is None or link == "" or link == "none":
        return None
    if isinstance(link, dict):
        for key in ("bandwidth_bits", "bandwidth_bps", "rate_bits", "bandwidth", "rate"):
            if link.get(key) not in (None, ""):
                return parse_bandwidth(link[key])
        return None
    if isinstance(link, str) and link.lower() in {"loopback", "localhost", "local", "unshaped"}:
        return None
    return parse_bandwidth(link)


def format_bandwidth(bits_per_s: float | None) -> str:
    if bits_per_s is None:
        return "loopback"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:g} {unit}"
    return f"{bits_per_s:g} bit/s"


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
