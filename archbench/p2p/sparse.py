"""Sparse gradient shards for p2p top-k: cutting a selection by owner, packing a message, and
the owner's dense average.

A worker's top-k selection (indices ascending over the flat vector, values) is cut at the shard
bounds; the part an owner holds travels to it as one message of int32 words: the m values'
float32 bits, then the m indices relative to the owner's shard (8 m bytes; m may be 0). The
owner sums the W contributions to its shard in rank order (its own included) into a dense
vector and divides by W: with every entry kept this is bit for bit the dense exchange's
average.
"""

from __future__ import annotations

import numpy as np


def owner_slices(indices: np.ndarray, bounds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """For each owner's [start, stop) range, the [first, last) positions of `indices` (sorted
    ascending) that fall in it."""
    starts = np.searchsorted(indices, [start for start, _ in bounds], side="left")
    stops = np.searchsorted(indices, [stop for _, stop in bounds], side="left")
    return [(int(a), int(b)) for a, b in zip(starts, stops)]


def pack(values: np.ndarray, local_indices: np.ndarray, out: np.ndarray) -> np.ndarray:
    """values' float32 bits then the indices, in `out` (int32, at least 2 m long): the message."""
    m = len(values)
    out[:m] = values.view(np.int32)
    out[m : 2 * m] = local_indices
    return out[: 2 * m]


def unpack(message: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
    """(local indices, values) of a message of `words` int32 words."""
    m = words // 2
    return message[m : 2 * m], message[:m].view(np.float32)


def dense_message(values: np.ndarray, local_indices: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The selection as a dense shard in `out` (int32 words, as long as the shard): the values'
    float32 bits at their indices, zeros elsewhere. Sent where the sparse message would be no
    shorter; the receiver knows it by its length."""
    dense = out.view(np.float32)
    dense.fill(0.0)
    dense[local_indices] = values
    return out


def unpack_any(
    message: np.ndarray, words: int, length: int, unpack
) -> tuple[np.ndarray, np.ndarray]:
    """(local indices, values) of a message for a shard of `length` entries: a dense one (exactly
    `length` words; a sparse one is always shorter) gives its nonzero entries, which add to a
    sum the bits its selection would (adding a zero changes no sum that starts at +0), else
    `unpack` reads it."""
    if words == length:
        dense = message[:length].view(np.float32)
        nonzero = np.flatnonzero(dense).astype(np.int32)
        return nonzero, dense[nonzero]
    return unpack(message, words)


def sparse_mean(contributions: list[tuple[np.ndarray, np.ndarray]], out: np.ndarray) -> None:
    """`out` = the sum of the (indices, values) contributions in the order given (rank order),
    divided by their number. Indices are unique within one contribution."""
    out.fill(0.0)
    for indices, values in contributions:
        out[indices] += values
    np.divide(out, np.float32(len(contributions)), out=out)


def union(index_sets: list[np.ndarray], length: int) -> np.ndarray:
    """The ascending int32 indices in [0, length) that appear in any of `index_sets` (marked in
    a mask: linear in `length`, where sorting the sets would cost several times more)."""
    mask = np.zeros(length, dtype=bool)
    for indices in index_sets:
        mask[indices] = True
    return np.flatnonzero(mask).astype(np.int32)


# --- row shards (--sparse-exchange sparse): indices sent as runs ---------------------------------
# An embedding's touched rows are runs of consecutive entries (a row each) and a dense variable is
# one run, so a message of rows carries run starts and lengths instead of one index per entry:
# [r] [the m values' float32 bits] [r run starts] [r run lengths], int32 words (1 + m + 2 r).


def runs_of(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of the runs of consecutive values in ascending `indices`."""
    if len(indices) == 0:
        return indices[:0], indices[:0]
    breaks = np.flatnonzero(np.diff(indices) != 1) + 1
    firsts = np.concatenate(([0], breaks))
    lengths = np.diff(np.concatenate((firsts, [len(indices)])))
    return indices[firsts], lengths.astype(indices.dtype)


def pack_runs(values: np.ndarray, local_indices: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The message of one owner's rows in `out` (int32, at least 1 + 3 m long)."""
    m = len(values)
    starts, lengths = runs_of(local_indices)
    r = len(starts)
    out[0] = r
    out[1 : 1 + m] = values.view(np.int32)
    out[1 + m : 1 + m + r] = starts
    out[1 + m + r : 1 + m + 2 * r] = lengths
    return out[: 1 + m + 2 * r]


def unpack_runs(message: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
    """(local indices, values) of a message of `words` int32 words made by `pack_runs`."""
    r = int(message[0])
    m = words - 1 - 2 * r
    starts = message[1 + m : 1 + m + r]
    lengths = message[1 + m + r : 1 + m + 2 * r]
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return np.arange(m, dtype=np.int32) + shift.astype(np.int32), message[1 : 1 + m].view(
        np.float32
    )
