"""What a cluster is asked to be: validated name, node names, bandwidth and slots."""

from __future__ import annotations

import re
from dataclasses import dataclass

from archbench.errors import UsageError

DEFAULT_NAME = "emulated"
DEFAULT_PREFIX = "node"
DEFAULT_BANDWIDTH = "1gbit"
MAX_NODES = 64

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_PREFIX_RE = re.compile(r"^[a-z][a-z-]{0,9}$")
_BANDWIDTH_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_BITS_PER_UNIT = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
# tbf below ~1 mbit makes ssh and MPI start-up crawl; above 100 gbit the shaping means nothing.
_MIN_BITS_PER_S = 1e6
_MAX_BITS_PER_S = 100e9


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    nodes: int
    bandwidth: str
    prefix: str = DEFAULT_PREFIX
    slots: int = 1

    @property
    def node_names(self) -> list[str]:
        return [f"{self.prefix}{k}" for k in range(1, self.nodes + 1)]


def bandwidth_bits_per_s(bandwidth: str) -> float:
    """Bits per second of a tc rate string such as `200mbit` (decimal units, as tc reads them)."""
    match = _BANDWIDTH_RE.match(bandwidth)
    if match is None:
        raise UsageError(
            f"bandwidth {bandwidth!r} is not a rate like 100mbit or 1gbit (units: bit, kbit, mbit, gbit)"
        )
    return float(match.group(1)) * _BITS_PER_UNIT[match.group(2)]


def make_spec(name: str, nodes: int, bandwidth: str, prefix: str, slots: int) -> ClusterSpec:
    """Validate the `cluster up` arguments; raise UsageError naming the first bad one."""
    if not _NAME_RE.match(name):
        raise UsageError(
            f"cluster name {name!r} must be 1-40 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
        )
    if not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"--nodes {nodes} is out of range 1..{MAX_NODES}")
    if not _PREFIX_RE.match(prefix):
        raise UsageError(f"node prefix {prefix!r} must be 1-10 lower-case letters or '-'")
    if not 1 <= slots <= 64:
        raise UsageError(f"--slots {slots} is out of range 1..64")
    bandwidth = bandwidth.strip().lower()
    bits = bandwidth_bits_per_s(bandwidth)
    if not _MIN_BITS_PER_S <= bits <= _MAX_BITS_PER_S:
        raise UsageError(f"bandwidth {bandwidth} is out of range 1mbit..100gbit")
    return ClusterSpec(name=name, nodes=nodes, bandwidth=bandwidth, prefix=prefix, slots=slots)
