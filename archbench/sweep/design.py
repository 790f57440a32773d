"""Designs of experiments: which combinations of factor levels a study measures.

Each function returns design points (factor name -> level) in a deterministic order for a given
seed; the runner shuffles the run order separately.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from archbench.common.errors import UsageError
from archbench.runtime.settings import setting
from archbench.sweep.limits import MAX_DESIGN_POINTS
from archbench.sweep.spec import Design, Levels, NumericRange

Point = dict[str, Any]


def full_factorial(factors: dict[str, list[Any]]) -> list[Point]:
    """Every combination of every level."""
    names = list(factors)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*factors.values())]


def random_design(factors: dict[str, Levels], n: int, rng: random.Random) -> list[Point]:
    """n points: distinct combinations when every factor is a list, else independent draws."""
    names = list(factors)
    if all(isinstance(levels, list) for levels in factors.values()):
        sizes = [len(levels) for levels in factors.values()]  # type: ignore[arg-type]
        total = math.prod(sizes)
        if n > total:
            raise UsageError(
                f"design random: n={n} is more than the {total} distinct combinations; "
                "use full_factorial"
            )
        points = []
        for index in sorted(rng.sample(range(total), n)):
            point = {}
            for name, size in zip(reversed(names), reversed(sizes), strict=True):
                index, digit = divmod(index, size)
                point[name] = factors[name][digit]  # type: ignore[index]
            points.append({name: point[name] for name in names})
        return points
    return [
        {name: _draw(levels, rng.random(), rng) for name, levels in factors.items()}
        for _ in range(n)
    ]


def _draw(levels: Levels, fraction: float, rng: random.Random) -> Any:
    if isinstance(levels, NumericRange):
        return levels.at(fraction)
    return levels[rng.randrange(len(levels))]


def latin_hypercube(factors: dict[str, Levels], n: int, rng: random.Random) -> list[Point]:
    """n points stratified over every numeric factor, crossed with every categorical combination.

    Each numeric factor's range (or its sorted list of levels) is cut into n equal strata and every
    stratum is used exactly once; columns are permuted independently.
    """
    numeric = {
        name: levels
        for name, levels in factors.items()
        if isinstance(levels, NumericRange) or setting(name).numeric
    }
    categorical = {name: levels for name, levels in factors.items() if name not in numeric}
    columns: dict[str, list[Any]] = {}
    for name, levels in numeric.items():
        strata = list(range(n))
        rng.shuffle(strata)
        fractions = [(stratum + rng.random()) / n for stratum in strata]
        if isinstance(levels, NumericRange):
            columns[name] = [levels.at(f) for f in fractions]
        else:
            ordered = sorted(levels)
            columns[name] = [
                ordered[min(len(ordered) - 1, int(f * len(ordered)))] for f in fractions
            ]
    samples = [{name: columns[name][i] for name in numeric} for i in range(n)]
    crossed = full_factorial(categorical) if categorical else [{}]  # type: ignore[arg-type]
    return [
        {name: {**combo, **sample}[name] for name in factors}
        for combo in crossed
        for sample in samples
    ]


def one_at_a_time(factors: dict[str, list[Any]], base: Point) -> list[Point]:
    """The base point, then each factor moved through its other levels with the rest at base."""
    points = [dict(base)]
    for name, levels in factors.items():
        for level in levels:
            if level != base[name]:
                points.append({**base, name: level})
    return points


def count(design: Design, factors: dict[str, Levels]) -> int:
    """How many points `expand` gives, computed without building them."""
    if not factors:
        return 1
    if design.kind == "random":
        return design.n
    if design.kind == "one_at_a_time":
        return 1 + sum(len(levels) - 1 for levels in factors.values())  # type: ignore[arg-type]
    sizes = [
        len(levels)  # type: ignore[arg-type]
        for name, levels in factors.items()
        if design.kind == "full_factorial"
        or not (isinstance(levels, NumericRange) or setting(name).numeric)
    ]
    return math.prod(sizes) * (design.n if design.kind == "latin_hypercube" else 1)


def expand(design: Design, factors: dict[str, Levels], seed: int) -> list[Point]:
    """The design points of a study (no factors: one empty point, i.e. the fixed settings alone);
    UsageError, before any is built, when there would be more than MAX_DESIGN_POINTS."""
    points = count(design, factors)
    if points > MAX_DESIGN_POINTS:
        raise UsageError(
            f"design {design.kind} gives {points:,} design points; a study has at most "
            f"{MAX_DESIGN_POINTS:,} (fewer levels, or a random or latin_hypercube design)"
        )
    if not factors:
        return [{}]
    rng = random.Random(f"design:{seed}")
    if design.kind == "full_factorial":
        return full_factorial(factors)  # type: ignore[arg-type]
    if design.kind == "random":
        return random_design(factors, design.n, rng)
    if design.kind == "latin_hypercube":
        return latin_hypercube(factors, design.n, rng)
    if design.kind == "one_at_a_time":
        return one_at_a_time(factors, design.base)  # type: ignore[arg-type]
    raise UsageError(f"unknown design {design.kind!r}")
