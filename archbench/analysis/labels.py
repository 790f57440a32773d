"""How the report names a run's model and data set: by a short label, never by a long path.

A built-in model or data set is its name (`mlp`, `fashion_mnist`). A user's model is the label its
record holds (`model_stats.label`: `transformer:build`, `pretrained.keras`), a user's data set its
form and file name (`csv:wine.csv`). Where two different files share a label (two `net.py` in two
folders, or one file edited between runs), each is also named by the start of its sha256
(`net:build#1a2b3c4d`), so their runs are never mixed.

Only the records are read: the labels come from the spec strings they hold, parsed for their form;
no model file is imported and no data file opened (`report` and `compare` must not run a user's
code).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from archbench.common.errors import UsageError
from archbench.workloads.model_source import parse_model
from archbench.workloads.user_data import parse_user_data

SHA_SHOWN = 8  # hex digits of a sha256 that tell two files of one label apart


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def model_label(spec: Any) -> Any:
    """A `--model` value's short label ('dir/transformer.py:build' -> 'transformer:build'); a
    built-in name, or anything of no user form, as it is."""
    if _missing(spec):
        return spec
    try:
        # no built-in names: a built-in name then fails to parse and is shown as it is
        return parse_model(str(spec), ()).label
    except UsageError:
        return str(spec)


def data_label(spec: Any) -> Any:
    """A `--dataset` value's short label ('csv:/tmp/x/wine.csv' -> 'csv:wine.csv')."""
    if _missing(spec):
        return spec
    try:
        found = parse_user_data(str(spec))
    except UsageError:
        return str(spec)
    return str(spec) if found is None else found.label


def short_names(specs: Sequence[Any], labels: Sequence[Any], digests: Sequence[Any]) -> list[Any]:
    """Each run's model (or data set) by its label; where runs of one label used different files
    (told apart by their sha256, or by the spec where a run holds no digest), by its label and
    the start of its digest (or, without one, by the spec as given)."""
    known: dict[str, set[str]] = {}
    for spec, digest in zip(specs, digests, strict=True):
        if not _missing(spec) and isinstance(digest, str) and digest:
            known.setdefault(str(spec), set()).add(digest)
    # A run with no digest (one that failed before hashing) used the file its spec's other
    # runs hashed, where they all hashed the same one.
    identities: list[tuple[str, str] | None] = []
    for spec, digest in zip(specs, digests, strict=True):
        if _missing(spec):
            identities.append(None)
            continue
        if not (isinstance(digest, str) and digest):
            seen = known.get(str(spec), set())
            digest = next(iter(seen)) if len(seen) == 1 else None
        identities.append(("sha256", digest) if digest else ("spec", str(spec)))
    per_label: dict[Any, set[tuple[str, str]]] = {}
    for label, identity in zip(labels, identities, strict=True):
        if identity is not None:
            per_label.setdefault(label, set()).add(identity)
    names: list[Any] = []
    for label, identity in zip(labels, identities, strict=True):
        if identity is None or len(per_label[label]) == 1:
            names.append(label)
        elif identity[0] == "sha256":
            names.append(f"{label}#{identity[1][:SHA_SHOWN]}")
        else:
            names.append(identity[1])
    return names


def record_model_labels(specs: Sequence[Any], stats_labels: Sequence[Any]) -> list[Any]:
    """The label each record's model writer gave (`model_stats.label`), else one parsed from its
    spec (a failed run's record may lack it; a built-in model has none)."""
    return [
        label if isinstance(label, str) and label else model_label(spec)
        for spec, label in zip(specs, stats_labels, strict=True)
    ]
