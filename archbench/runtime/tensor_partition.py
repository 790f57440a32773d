"""Tensor partitioning and priority scheduling (`--partition-mb S`, `--priority on|off`).

What the two settings mean, shared by the `p2p` and `ps` trainers and the record:

- partitioning: every message of parameters or gradients larger than S MB (1 MB = 2^20 bytes,
  as `--fusion-threshold-mb`) is cut into pieces of at most S MB, each sent on its own as soon as
  it is ready (p2p: one non-blocking message per piece, the owner applying each piece once all
  workers' contributions to it are in; ps: more, smaller shards of a variable on the same
  server, each pushed, updated and pulled by its own ops);
- priority: pieces ordered by their position in the model, first layers first, so that the
  parameters the next forward pass needs first arrive first (p2p: the order the pieces are
  sent in; ps: the pulls chained in layer order by control dependencies).

Both off (no S, priority off) is today's exchange, bit for bit. Partitioned or not, each
element is averaged and updated by the same float32 operations, so the parameters are the same
bits either way; only the timing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archbench.common.archs import uses_horovod

MB = 1024 * 1024
PRIORITIES = ("off", "on")
APPLIES_TO = frozenset({"p2p", "ps"})


@dataclass(frozen=True)
class PartitionSpec:
    max_bytes: int | None = None  # None: messages are not cut
    priority: bool = False

    @classmethod
    def from_config(cls, config: Any) -> PartitionSpec:
        size = getattr(config, "partition_mb", None)
        return cls(
            max_bytes=None if size is None else max(1, int(size * MB)),
            priority=getattr(config, "priority", "off") == "on",
        )

    @property
    def active(self) -> bool:
        """Whether the exchange differs from today's (otherwise the old code path runs)."""
        return self.max_bytes is not None or self.priority

    def max_elements(self, itemsize: int = 4) -> int | None:
        return None if self.max_bytes is None else max(1, self.max_bytes // itemsize)

    def record(self, pieces_per_part: list[int]) -> dict[str, Any]:
        """The record fields every engine shares: the piece size, the priority, and how many
        pieces each part (a p2p shard, a ps variable) was cut into, in all."""
        return {
            "partition_bytes": self.max_bytes,
            "priority": "on" if self.priority else "off",
            "piece_count": sum(pieces_per_part),
            "partitioned": any(n > 1 for n in pieces_per_part),
        }


def cut_range(start: int, stop: int, max_elements: int | None) -> list[tuple[int, int]]:
    """[start, stop) as consecutive pieces of at most `max_elements` (one piece when None)."""
    if max_elements is None or stop - start <= max_elements:
        return [(start, stop)]
    return [(low, min(low + max_elements, stop)) for low in range(start, stop, max_elements)]


def problem(arch: str | None, values: dict[str, Any]) -> str | None:
    """A combination of these settings that no trainer runs, as one line, or None."""
    size, priority = values.get("partition_mb"), values.get("priority")
    asked = [
        flag
        for flag, given in (
            (f"--partition-mb {size:g}" if size is not None else "", size is not None),
            ("--priority on", priority == "on"),
        )
        if given
    ]
    if not asked or arch is None:
        return None
    if arch not in APPLIES_TO:
        hint = " (Horovod fuses and orders its own allreduces: --fusion-threshold-mb)"
        return (
            f"{' and '.join(asked)} applies to --arch p2p and ps only, not {arch}"
            f"{hint if uses_horovod(arch) else ''}"
        )
    if values.get("compression") in ("topk", "powersgd", "fp16"):
        return (
            f"{' and '.join(asked)} with --compression {values['compression']} is not supported: "
            "partitioning cuts the dense exchange; use --compression none"
        )
    if values.get("sparse_exchange") == "sparse":
        return (
            f"{' and '.join(asked)} with --sparse-exchange sparse is not supported: partitioning "
            "cuts the dense exchange; use --sparse-exchange dense"
        )
    return None
