"""Link bandwidth: the one reader of rates as users, `tc` and run records write them.

tc(8) units: the "bit" suffixes are bits per second, the "bps" suffixes BYTES per second. The
emulated cluster (and a study's `bandwidth` level, which becomes its tc rate) takes only tc's
bit forms, within the range its shaping means something; a prediction also reads spelled-out
forms such as "10 Gbit/s".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from archbench.common.errors import UsageError

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
_PATTERN = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z/]*)\s*")
_TC_RATE = re.compile(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)")
# tbf below ~1 mbit makes ssh and MPI start-up crawl; above 100 gbit the shaping means nothing.
EMULATED_MIN_BITS = 1e6
EMULATED_MAX_BITS = 100e9
MAX_BITS = 1e15  # 1 Pbit/s: beyond any link a prediction or a record may name
# What a record's `cluster.link` says when the run had no shaped link.
UNSHAPED = frozenset({"", "none", "loopback", "localhost", "local", "unshaped"})


@dataclass(frozen=True, order=True)
class Bandwidth:
    """A link rate in bits per second, with the text it was written as."""

    bits_per_s: float
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.text or format_bits(self.bits_per_s)

    @classmethod
    def parse(cls, text: str | float | int) -> Bandwidth:
        """'200mbit', '1gbit', '10 Gbit/s', '1g' or a number (bit/s); UsageError otherwise."""
        if isinstance(text, int | float) and not isinstance(text, bool):
            _check_bits(float(text), text)
            return cls(float(text), str(text))
        match = _PATTERN.fullmatch(str(text).lower())
        if not match or match.group(2) not in _BITS_PER_UNIT:
            raise UsageError(
                f"cannot read bandwidth {text!r} (examples: 200mbit, 1gbit, 10gbit/s, 1e9)"
            )
        value = float(match.group(1)) * _BITS_PER_UNIT[match.group(2)]
        _check_bits(value, text)
        return cls(value, str(text))

    @classmethod
    def tc_rate(cls, text: str, check_range: bool = True) -> Bandwidth:
        """A rate the emulated cluster can shape: tc's bit forms, 1mbit..100gbit."""
        text = str(text).strip().lower()
        match = _TC_RATE.fullmatch(text)
        if match is None:
            raise UsageError(
                f"bandwidth {text!r} is not a rate like 100mbit or 1gbit (units: bit, kbit, mbit, gbit)"
            )
        bits = float(match.group(1)) * _BITS_PER_UNIT[match.group(2)]
        if check_range and not EMULATED_MIN_BITS <= bits <= EMULATED_MAX_BITS:
            raise UsageError(f"bandwidth {text} is out of range 1mbit..100gbit")
        return cls(bits, text)

    @classmethod
    def of_link(cls, link: Any) -> Bandwidth | None:
        """The rate of a record's `cluster.link` (a string like '200mbit', a number, or a dict
        with a bandwidth entry); None when the run had no shaped link."""
        if link is None or (isinstance(link, str) and link.lower() in UNSHAPED):
            return None
        if isinstance(link, dict):
            for key in ("bandwidth_bits", "bandwidth_bps", "rate_bits", "bandwidth", "rate"):
                if link.get(key) not in (None, ""):
                    return cls.parse(link[key])
            return None
        return cls.parse(link)


def _check_bits(bits: float, text: object) -> None:
    # `1e999` reads as inf and NaN passes `<= 0`: neither is a rate ("inf Gbit/s")
    if not (math.isfinite(bits) and 0 < bits <= MAX_BITS):
        raise UsageError(
            f"bandwidth must be a finite rate above 0 and at most 1 Pbit/s, got {text!r}"
        )


def parse_bandwidth(text: str | float | int) -> float:
    """Bits per second of a rate (see Bandwidth.parse)."""
    return Bandwidth.parse(text).bits_per_s


def bits_or_none(text: Any) -> float | None:
    """Bits per second of a rate, or None when `text` is not one (for sorting mixed levels)."""
    try:
        return Bandwidth.parse(text).bits_per_s if isinstance(text, str) else None
    except UsageError:
        return None


def link_bandwidth_bits(link: Any) -> float | None:
    """Bits per second of a record's `cluster.link`; None when unshaped."""
    rate = Bandwidth.of_link(link)
    return rate.bits_per_s if rate is not None else None


def format_bits(bits_per_s: float | None) -> str:
    if bits_per_s is None:
        return "loopback"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:g} {unit}"
    return f"{bits_per_s:g} bit/s"
