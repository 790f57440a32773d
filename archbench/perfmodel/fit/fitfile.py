"""The saved result of `archbench model fit`: parameters, calibration and what was fitted."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from archbench.common.errors import UsageError
from archbench.common.jsonl import JsonProblem, read_json
from archbench.perfmodel.measure.calibration import Calibration, ComputeLine, load_calibration
from archbench.perfmodel.model.predictor import ModelParams

FIT_SCHEMA = "archbench.perfmodel.fit/1"
FIT_NAME = "perfmodel_fit.json"
# A fit is a few KiB per model and architecture; a larger file is not one.
MAX_FIT_BYTES = 16 << 20
# where `archbench microbench` writes by default: predict, whatif and optimize read it when no
# --calibration is given and it exists
DEFAULT_CALIBRATION = Path("runs/microbench/results.jsonl")


def default_calibration(path: str | Path | None) -> str | None:
    """The calibration named, else this folder's microbench results when they exist."""
    if path is not None:
        return str(path)
    return str(DEFAULT_CALIBRATION) if DEFAULT_CALIBRATION.is_file() else None


def parse_compute_ms(text: str | None, models: list[str]) -> dict[str, float]:
    """--compute-ms: one number for every model, or MODEL=MS,... per model (milliseconds per
    step of one worker alone at the batch size asked for)."""
    if text is None:
        return {}
    out: dict[str, float] = {}
    for item in (part.strip() for part in str(text).split(",") if part.strip()):
        name, sep, value = item.rpartition("=")
        try:
            ms = float(value)
        except ValueError:
            raise UsageError(
                f"--compute-ms must be milliseconds or MODEL=MS,..., got {text!r}"
            ) from None
        if not math.isfinite(ms) or ms < 0:
            raise UsageError(f"--compute-ms must be a finite number >= 0, got {value!r}")
        if sep:
            if name not in models:
                raise UsageError(f"--compute-ms names {name!r}, which is not among {models}")
            out[name] = ms
        else:
            out.update({model: ms for model in models})
    return out


def override_compute(
    params: ModelParams,
    models: list[str],
    compute_ms: dict[str, float],
    compute_from: str | Path | None,
) -> str | None:
    """Per-step compute measured elsewhere replaces the calibrated or fitted one: a fixed time
    per model (--compute-ms, at the batch asked for), or the compute lines of another machine's
    microbench records (--compute-from). Returns what was used, for the output."""
    if compute_from is not None:
        if not Path(compute_from).is_file():
            raise UsageError(
                f"--compute-from {compute_from} does not exist (another machine's "
                "runs/microbench/results.jsonl)"
            )
        other = load_calibration(compute_from)
        missing = [m for m in models if m not in other.compute and m not in compute_ms]
        if missing:
            have = ", ".join(sorted(other.compute)) or "none"
            raise UsageError(
                f"{compute_from} has no compute measurement of {', '.join(missing)} "
                f"(it has: {have}); give --compute-ms instead"
            )
        for model in models:
            if model in other.compute:
                params.compute[model] = other.compute[model]
    for model, ms in compute_ms.items():
        params.compute[model] = ComputeLine(fixed_s=ms / 1e3, per_sample_s=0.0)
    given = set(compute_ms) | (set(models) if compute_from is not None else set())
    for key in [k for k in params.compute if k.rpartition(":")[2] in given and ":" in k]:
        del params.compute[key]  # a fit's line of one architecture no longer applies
    if compute_ms:
        return "given: " + ", ".join(f"{m} {ms:g} ms/step" for m, ms in compute_ms.items())
    if compute_from is not None:
        return f"from {compute_from}"
    return None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_fit(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"fit file {path} does not exist (run `archbench model fit` first)")
    try:
        data = read_json(path, max_bytes=MAX_FIT_BYTES)
    except OSError as exc:
        raise UsageError(f"fit file {path}: {exc.strerror or exc}") from None
    except JsonProblem as exc:
        raise UsageError(f"fit file {path} is not a fit: {exc}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != FIT_SCHEMA:
        raise UsageError(f"{path} is not a performance-model fit (schema {schema!r})")
    return data


def model_inputs(
    fit_path: str | Path | None, calibration_path: str | Path | None
) -> tuple[ModelParams, Calibration]:
    """Parameters (fitted, or the defaults) and calibration (explicit file > the fit's own >
    defaults).

    An explicit calibration also wins over the fit for what it measured itself: the compute
    line of each model it timed and the shared-core slow-down (the fit's came from its own
    study's runs, which may have used other threads or another machine).
    """
    params = ModelParams()
    calib = load_calibration(calibration_path) if calibration_path else Calibration()
    if fit_path:
        data = read_fit(fit_path)
        params = ModelParams.from_json(data["params"])
        if not calibration_path and data.get("calibration"):
            calib = Calibration.from_json(data["calibration"])
        elif calibration_path:
            for key in list(params.compute):
                if key.rpartition(":")[2] in calib.compute:  # MODEL or ARCH:MODEL
                    params.compute.pop(key)
            if calib.cpu_contention:
                params.cpu_contention = None
    return params, calib
