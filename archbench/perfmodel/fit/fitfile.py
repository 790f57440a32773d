"""The saved result of `archbench model fit`: parameters, calibration and what was fitted."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from archbench.errors import UsageError
from archbench.perfmodel.measure.calibration import Calibration, load_calibration
from archbench.perfmodel.model.predictor import ModelParams

FIT_SCHEMA = "archbench.perfmodel.fit/1"
FIT_NAME = "perfmodel_fit.json"


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
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"fit file {path} is not valid JSON: {exc}") from None
    if data.get("schema") != FIT_SCHEMA:
        raise UsageError(f"{path} is not a performance-model fit (schema {data.get('schema')!r})")
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
            for model in calib.compute:
                params.compute.pop(model, None)
            if calib.cpu_contention:
                params.cpu_contention = None
    return params, calib
