"""Unions, intersections and differences of time intervals [start, end)."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering exactly the given ones."""
    merged: list[list[float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The intersection of two disjoint sorted lists (as `union` returns them)."""
    result, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            result.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return result


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of `a` outside `b` (both disjoint and sorted)."""
    result = []
    for start, end in a:
        cursor = start
        for low, high in b:
            if high <= cursor or low >= end:
                continue
            if low > cursor:
                result.append((cursor, low))
            cursor = max(cursor, high)
        if cursor < end:
            result.append((cursor, end))
    return result


def length(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def clip(intervals: Iterable[Interval], low: float, high: float) -> list[Interval]:
    return [(max(s, low), min(e, high)) for s, e in intervals if min(e, high) > max(s, low)]
