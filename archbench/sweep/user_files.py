"""The user's model and data files a study reads: which they are (the hosts must hold the same
bytes; a model function's file is code the user chose to run), and whether one changed since the
study's records were made, which would mix two models or two data sets in one study."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from archbench.common.errors import UsageError
from archbench.runtime.settings import SETTINGS
from archbench.sweep.plan import PlannedRun
from archbench.workloads.files import sha256_of, short_digest


def _levels(runs: Iterable[PlannedRun], name: str) -> list[str]:
    # a setting left unset is None in a run's config: the registry's default then
    return list(dict.fromkeys(str(run.config.get(name) or SETTINGS[name].default) for run in runs))


def user_models(runs: Iterable[PlannedRun]) -> list[str]:
    """The --model values of the runs that name a user's model, in run order."""
    # deferred: archbench.workloads.models loads numpy; a sweep needs it only once it has a plan
    from archbench.workloads.models import model_source

    return [spec for spec in _levels(runs, "model") if model_source(spec).user]


def user_data(runs: Iterable[PlannedRun]) -> list[str]:
    """The --dataset values of the runs that name a user's data, in run order."""
    # deferred: the user's data forms load numpy
    from archbench.workloads.user_data import parse_user_data

    return [spec for spec in _levels(runs, "dataset") if parse_user_data(spec) is not None]


def imported_files(runs: Iterable[PlannedRun]) -> list[str]:
    """The Python files the runs import to build their models (a module's file as found here)."""
    # deferred: archbench.workloads.models loads numpy; a sweep needs it only once it has a plan
    from archbench.workloads.models import model_source

    found = []
    for spec in user_models(runs):
        source = model_source(spec)
        if source.kind == "function":
            try:
                found.append(source.file or str(source.module))
            except UsageError:
                found.append(str(source.module))  # not found here: its runs will say why
    return list(dict.fromkeys(found))


def _now(path: str | None) -> str | None:
    """The file's sha256 now; None when it cannot be read (its runs will say why)."""
    try:
        return sha256_of(path) if path and os.path.exists(path) else None
    except OSError:
        return None


def _recorded(records: Iterable[dict[str, Any]], name: str, spec: str, key: str) -> list[str]:
    """The digests the records of runs with `name` = `spec` keep under `key` (section.field)."""
    section, field = key.split(".")
    found = []
    for record in records:
        if (record.get("config") or {}).get(name) != spec:
            continue
        digest = (record.get(section) or {}).get(field)
        if isinstance(digest, str) and digest:
            found.append(digest)
    return found


def _refuse(file: str, flag: str, spec: str, old: list[str], now: str) -> UsageError:
    before = next(digest for digest in reversed(old) if digest != now)
    return UsageError(
        f"{file} changed since this study's earlier runs (--{flag} {spec}: sha256 "
        f"{short_digest(before)} in {sum(d != now for d in old)} of its records, "
        f"{short_digest(now)} now): restore the file, or run the study into a new folder (a new "
        "study: name, or the spec in another folder), so that one study never mixes two versions"
    )


def check_unchanged(runs: Sequence[PlannedRun], records: Iterable[dict[str, Any]]) -> None:
    """UsageError (one line) when a user's model or data file the runs read has another sha256
    now than in the study's records of runs that read it."""
    # deferred: the model and data forms load numpy
    from archbench.workloads.models import model_source
    from archbench.workloads.user_data import data_facts, parse_user_data

    records = list(records)
    if not records:
        return
    for spec in user_models(runs):
        try:
            file = model_source(spec).file
        except UsageError:
            continue  # a module not found here: its runs will say why
        now = _now(file)
        old = _recorded(records, "model", spec, "model_stats.sha256")
        if now is not None and any(digest != now for digest in old):
            raise _refuse(str(file), "model", spec, old, now)
    for spec in user_data(runs):
        data = parse_user_data(spec)
        if data is None or _now(data.path) is None:
            continue
        now = data_facts(spec)["dataset_sha256"]  # the digest the records keep, as they keep it
        old = _recorded(records, "dataset", spec, "config.dataset_sha256")
        if any(digest != now for digest in old):
            raise _refuse(data.path, "dataset", spec, old, now)
