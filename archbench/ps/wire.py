"""What the tasks of a parameter-server job send each other as bytes over TensorFlow's gRPC
(a worker's report to the chief, the allgather of small values when the cluster comes from
TF_CONFIG): JSON, never pickle.

A task's gRPC port takes connections from anyone who reaches it (TensorFlow's servers have no
authentication), and unpickling a value runs whatever code its bytes name. JSON decodes to plain
values only: numbers, strings, lists and objects. What archbench sends is already such values
(counts, hostnames, digests, medians, timeline spans and clock readings); NumPy numbers and arrays
are sent as the Python numbers and lists they hold, tuples arrive as lists. See README.md's "The
gRPC port" for what remains of the trust boundary.
"""

from __future__ import annotations

import json
from typing import Any

from archbench.common.jsonl import JsonProblem, loads

# A report is a few KiB; a timeline's spans a few MiB. Past this, bytes are not ours.
MAX_WIRE_BYTES = 256 << 20


class WireError(ValueError):
    """Bytes received that are not a value a task of this job sent (one line)."""


def _plain(value: Any) -> Any:
    # NumPy's numbers and arrays, which session.run returns, as the Python values they hold
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not sent between tasks (plain values only)")


def dumps(value: Any) -> bytes:
    """`value` as bytes for the wire (TypeError for a value that is not plain data)."""
    return json.dumps(value, default=_plain, separators=(",", ":")).encode()


def loads_wire(blob: bytes) -> Any:
    """The value `dumps` sent; WireError for bytes that are not one (never runs anything)."""
    if len(blob) > MAX_WIRE_BYTES:
        raise WireError(f"a message of {len(blob):,} bytes, more than {MAX_WIRE_BYTES:,}")
    try:
        return loads(blob, allow_nan=True)  # a median may be NaN
    except JsonProblem as exc:
        raise WireError(f"a message that is not archbench's ({exc})") from None
