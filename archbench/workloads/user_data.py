"""Data a user brings, read into the same `ArrayDataset` the built-in data sets fill, so the global
sample order and the workers' slices (`archbench.workloads.data.BatchPlan`) are the same as theirs.

Forms of `--dataset`:
- `npz:FILE`: arrays `x_train`, `y_train`, `x_test`, `y_test` in one NumPy archive (read into
  memory);
- `npy:FOLDER`: `x_train.npy`, `y_train.npy`, `x_test.npy`, `y_test.npy` opened memory-mapped,
  so a data set larger than memory trains (a batch reads its own rows);
- `csv:FILE`: a table, one sample a row (UCI style): `--label-column` the column to predict
  (default the last), `--feature-columns` the inputs (default every other column); text columns
  are one-hot encoded, numeric ones standardised with the training rows' mean and deviation; a
  seeded `--test-fraction` of the rows (default 0.2, the same rows for every run) is held out;
- `series:FILE`: a time series, one time step a row: each sample is `--window` consecutive rows of
  the feature columns (default every numeric column), its label the label column (default the
  last numeric one) `--horizon` rows after the window; the last `--test-fraction` of the time
  steps are held out (no shuffle across the cut).

Labels are classes for `--loss crossentropy` (integers from 0 in arrays; any values in a table,
numbered in sorted order) and values for `--loss mse` (a table's or a series' standardised with
the training rows' mean and deviation, so an RMSE below 1 beats predicting the mean). Inputs are
used as stored, cast to float32 (uint8 arrays scaled by 1/255, as the built-in images are).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from archbench.common.errors import UsageError
from archbench.workloads.files import readable_file_problem, sha256_of
from archbench.workloads.task import is_regression

FORMS = ("npz", "npy", "csv", "series")
ARRAY_KEYS = ("x_train", "y_train", "x_test", "y_test")
MAX_CLASSES = 1_000_000
_SPLIT_SEED = 0  # the held-out rows of a table: the same for every run and every seed
_SCAN_ELEMENTS = 1 << 24  # a finiteness check reads arrays this many elements at a time


@dataclass(frozen=True)
class UserData:
    """A `--dataset` value of a user's form."""

    form: str
    path: str

    @property
    def label(self) -> str:
        return f"{self.form}:{os.path.basename(os.path.normpath(self.path))}"

    def files(self) -> list[str]:
        """The files the data is read from (what must be the same on every host)."""
        if self.form == "npy":
            return [os.path.join(self.path, f"{key}.npy") for key in ARRAY_KEYS]
        return [self.path]


def parse_user_data(spec: str) -> UserData | None:
    """The user's data a `--dataset` value names, or None for a built-in name."""
    form, colon, path = str(spec).partition(":")
    if not colon:
        return None
    if form not in FORMS:
        raise UsageError(
            f"--dataset {spec}: unknown form {form!r} (use {', '.join(f + ':PATH' for f in FORMS)})"
        )
    if not path:
        raise UsageError(f"--dataset {spec}: give the path after '{form}:'")
    return UserData(form, path)


def data_facts(spec: str) -> dict:
    """What the record's `config` keeps of a user's data: its files' sha256 (one digest over
    them), so two versions of a file are never mixed unnoticed."""

    data = parse_user_data(spec)
    if data is None:
        return {}
    return {"dataset_sha256": sha256_of(data.path)}


def check_files(data: UserData) -> None:
    """The files are there and readable: UsageError naming the first that is not."""
    if data.form == "npy" and not os.path.isdir(data.path):
        what = "no such folder" if not os.path.lexists(data.path) else "not a folder"
        raise UsageError(f"--dataset npy:{data.path}: {what} (a folder of x_train.npy, ...)")
    for path in data.files():
        problem = readable_file_problem(path)
        if problem:
            where = "" if path == data.path else f"{path}: "
            raise UsageError(f"--dataset {data.form}:{data.path}: {where}{problem}")


@dataclass(frozen=True)
class UserArrays:
    """The user's samples as `archbench.workloads.data.ArrayDataset` holds them."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    outputs: int  # classes, or values a sample
    scale: float
    source: str


def load_user_data(data: UserData, config) -> UserArrays:
    """The user's samples, checked; UsageError naming the first problem."""
    check_files(data)
    loss = getattr(config, "loss", "crossentropy")
    if data.form in ("npz", "npy"):
        arrays = _read_arrays(data)
        x_train, x_test = arrays["x_train"], arrays["x_test"]
        y_train, y_test, outputs = _labels(data, arrays["y_train"], arrays["y_test"], loss)
        source = f"{data.path} ({'memory-mapped ' if data.form == 'npy' else ''}arrays)"
    else:
        frame = _read_table(data)
        cut = _series if data.form == "series" else _table
        x_train, y_train, x_test, y_test, outputs, source = cut(data, frame, config, loss)
    _check_inputs(data, x_train, y_train, x_test, y_test)
    scale = 1.0 / 255.0 if x_train.dtype == np.uint8 else 1.0
    return UserArrays(data.label, x_train, y_train, x_test, y_test, outputs, scale, source)


# --------------------------------------------------------------------------- arrays


def _read_arrays(data: UserData) -> dict[str, np.ndarray]:
    where = f"--dataset {data.form}:{data.path}"
    if data.form == "npy":
        arrays = {}
        for key, path in zip(ARRAY_KEYS, data.files()):
            try:
                arrays[key] = np.load(path, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise UsageError(
                    f"{where}: {path} is not a NumPy .npy array ({_first_line(exc)})"
                ) from None
        return arrays
    try:
        with np.load(data.path, allow_pickle=False) as archive:
            missing = [key for key in ARRAY_KEYS if key not in archive.files]
            if missing:
                raise UsageError(
                    f"{where}: missing array{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)} (it holds {', '.join(archive.files) or 'none'})"
                )
            return {key: archive[key] for key in ARRAY_KEYS}
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, pickle refusal, a cut file
        raise UsageError(f"{where}: not a NumPy .npz archive ({_first_line(exc)})") from None


def _labels(data: UserData, y_train, y_test, loss: str):
    """(y_train, y_test, outputs): class ids (int32) and the class count, or values (float32,
    one column per target) and their count."""
    where = f"--dataset {data.form}:{data.path}"
    for key, y in (("y_train", y_train), ("y_test", y_test)):
        if y.dtype.kind not in "biuf":
            raise UsageError(f"{where}: {key} holds {y.dtype}, not numbers")
    if is_regression(loss):
        y_train, y_test = (np.asarray(y, np.float32) for y in (y_train, y_test))
        y_train, y_test = (y.reshape(len(y), -1) for y in (y_train, y_test))
        if y_train.shape[1:] != y_test.shape[1:]:
            raise UsageError(
                f"{where}: y_train has {y_train.shape[1]} values a sample, y_test {y_test.shape[1]}"
            )
        return y_train, y_test, int(y_train.shape[1])
    ids = []
    for key, y in (("y_train", y_train), ("y_test", y_test)):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise UsageError(
                f"{where}: {key} has shape {y.shape}; class labels are one integer a sample "
                "(for values to predict, use --loss mse)"
            )
        if y.dtype.kind == "f":
            bad = ~np.isfinite(y) | (y != np.round(y))
            if bad.any():
                raise UsageError(
                    f"{where}: {key}[{int(np.argmax(bad))}] is {y[np.argmax(bad)]!r}, not a class "
                    "number (for values to predict, use --loss mse)"
                )
        if len(y) and (y.min() < 0 or y.max() >= MAX_CLASSES):
            at = int(np.argmin(y)) if y.min() < 0 else int(np.argmax(y))
            raise UsageError(
                f"{where}: label {key}[{at}] = {y[at]} is out of range (classes are numbered "
                f"0 to {MAX_CLASSES - 1})"
            )
        ids.append(y.astype(np.int32))
    classes = int(max(int(y.max()) if len(y) else 0 for y in ids)) + 1
    return ids[0], ids[1], classes


def _check_inputs(data: UserData, x_train, y_train, x_test, y_test) -> None:
    where = f"--dataset {data.form}:{data.path}"
    for part, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.ndim < 2:
            raise UsageError(f"{where}: x_{part} has shape {x.shape}; it needs one row a sample")
        if len(x) != len(y):
            raise UsageError(f"{where}: x_{part} holds {len(x)} samples, y_{part} {len(y)}")
        if len(x) == 0:
            raise UsageError(f"{where}: x_{part} holds no samples")
        if x.dtype.kind not in "biuf":
            raise UsageError(f"{where}: x_{part} holds {x.dtype}, not numbers")
        for key, array in ((f"x_{part}", x), (f"y_{part}", y)):
            bad = first_non_finite(array)
            if bad is not None:
                raise UsageError(
                    f"{where}: {key} holds {bad[1]} at sample {bad[0]} (NaN and Inf cannot train)"
                )
    if x_train.shape[1:] != x_test.shape[1:]:
        raise UsageError(
            f"{where}: x_train's samples have shape {x_train.shape[1:]}, x_test's {x_test.shape[1:]}"
        )


def first_non_finite(array: np.ndarray) -> tuple[int, str] | None:
    """(sample, 'NaN' or 'Inf') of the first non-finite value, read a block at a time (an array
    larger than memory is scanned, not loaded)."""
    if array.dtype.kind != "f" or array.size == 0:
        return None
    per_row = max(1, int(np.prod(array.shape[1:])))
    rows = max(1, _SCAN_ELEMENTS // per_row)
    for start in range(0, len(array), rows):
        block = np.asarray(array[start : start + rows])
        finite = np.isfinite(block).reshape(len(block), -1).all(axis=1)
        if not finite.all():
            row = int(np.argmin(finite))
            value = block[row][~np.isfinite(block[row])].flat[0]
            return start + row, "NaN" if np.isnan(value) else "Inf"
    return None


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


# --------------------------------------------------------------------------- tables


def _read_table(data: UserData):
    # deferred: pandas loads only for a table
    import pandas as pd

    where = f"--dataset {data.form}:{data.path}"
    try:
        frame = pd.read_csv(data.path, skipinitialspace=True, comment="#")
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UsageError(f"{where}: not a CSV table ({_first_line(exc)})") from None
    if frame.shape[0] < 2 or frame.shape[1] < 2:
        raise UsageError(
            f"{where}: {frame.shape[0]} rows of {frame.shape[1]} columns; a table needs a header, 2 columns and 2 rows"
        )
    frame.columns = [str(name).strip() for name in frame.columns]
    return frame


def _column(data: UserData, frame, name: str, setting: str) -> str:
    """A column named by name or by 0-based index."""
    if name in frame.columns:
        return name
    if name.lstrip("-").isdigit() and -len(frame.columns) <= int(name) < len(frame.columns):
        return frame.columns[int(name)]
    raise UsageError(
        f"--dataset {data.form}:{data.path}: {setting} {name!r} is not a column "
        f"(its columns: {', '.join(frame.columns)})"
    )


def _columns(data: UserData, frame, config, label: str, numeric_only: bool) -> list[str]:
    asked = getattr(config, "feature_columns", None)
    if asked:
        columns = [
            _column(data, frame, name.strip(), "--feature-columns") for name in asked.split(",")
        ]
    else:
        columns = [c for c in frame.columns if c != label]
        if numeric_only:
            columns = [c for c in frame.columns if frame[c].dtype.kind in "biuf"]
    if not columns:
        raise UsageError(f"--dataset {data.form}:{data.path}: no feature columns to train on")
    return columns


def _missing_cells(data: UserData, frame, columns: list[str]) -> None:
    for column in columns:
        values = frame[column]
        missing = values.isna().to_numpy().copy()
        if values.dtype.kind == "f":
            missing |= ~np.isfinite(values.to_numpy(dtype=np.float64, na_value=np.nan))
        if missing.any():
            raise UsageError(
                f"--dataset {data.form}:{data.path}: column {column!r} has {int(missing.sum())} "
                f"empty, NaN or Inf cell(s) (the first in data row {int(np.argmax(missing)) + 1})"
            )


def _class_ids(data: UserData, values, label: str):
    classes = (
        sorted(values.astype(str).unique())
        if values.dtype.kind not in "biuf"
        else sorted(values.unique())
    )
    if len(classes) < 2:
        raise UsageError(
            f"--dataset {data.form}:{data.path}: label column {label!r} holds one class only"
        )
    lookup = {value: index for index, value in enumerate(classes)}
    keyed = values.astype(str) if values.dtype.kind not in "biuf" else values
    return keyed.map(lookup).to_numpy(np.int32), len(classes)


def _standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    mean = train.mean(axis=0)
    deviation = train.std(axis=0)
    deviation = np.where(deviation > 0, deviation, 1.0)
    return [((part - mean) / deviation).astype(np.float32) for part in (train, *others)]


def _label_name(data: UserData, frame, config, default: str) -> str:
    asked = getattr(config, "label_column", None)
    return _column(data, frame, asked, "--label-column") if asked else default


def _table(data: UserData, frame, config, loss: str):
    # deferred: pandas loads only for a table
    import pandas as pd

    label = _label_name(data, frame, config, frame.columns[-1])
    columns = _columns(data, frame, config, label, numeric_only=False)
    _missing_cells(data, frame, [*columns, label])
    numeric = [c for c in columns if frame[c].dtype.kind in "biuf"]
    text = [c for c in columns if c not in numeric]
    features = frame[numeric].to_numpy(np.float64)
    if text:
        encoded = pd.get_dummies(frame[text].astype(str), dtype=np.float64).to_numpy()
        features = np.concatenate([features, encoded], axis=1)
    test_rows = _held_out(len(frame), config)
    train_rows = np.setdiff1d(np.arange(len(frame)), test_rows)
    if is_regression(loss):
        if frame[label].dtype.kind not in "biuf":
            raise UsageError(
                f"--dataset {data.form}:{data.path}: label column {label!r} is not numeric (--loss mse predicts numbers)"
            )
        values = frame[label].to_numpy(np.float64)[:, None]
        y_train, y_test = _standardise(values[train_rows], values[test_rows])
        outputs = 1
    else:
        ids, outputs = _class_ids(data, frame[label], label)
        y_train, y_test = ids[train_rows], ids[test_rows]
    x_train, x_test = _standardise(features[train_rows], features[test_rows])
    source = (
        f"{data.path}: {len(frame)} rows, label {label!r}, {len(numeric)} numeric and "
        f"{len(text)} one-hot column(s), {len(test_rows)} held out"
    )
    return x_train, y_train, x_test, y_test, outputs, source


def _held_out(rows: int, config) -> np.ndarray:
    fraction = float(getattr(config, "test_fraction", None) or 0.2)
    count = min(rows - 1, max(1, round(rows * fraction)))
    return np.sort(np.random.default_rng(_SPLIT_SEED).permutation(rows)[:count])


def _series(data: UserData, frame, config, loss: str):
    where = f"--dataset {data.form}:{data.path}"
    numeric = [c for c in frame.columns if frame[c].dtype.kind in "biuf"]
    if not numeric and not getattr(config, "label_column", None):
        raise UsageError(f"{where}: no numeric column to read as a series")
    label = _label_name(data, frame, config, numeric[-1] if numeric else frame.columns[-1])
    columns = _columns(data, frame, config, label, numeric_only=True)
    not_numeric = [c for c in columns if frame[c].dtype.kind not in "biuf"]
    if not_numeric:
        raise UsageError(f"{where}: feature column {not_numeric[0]!r} is not numeric")
    _missing_cells(data, frame, [*columns, label])
    window = int(getattr(config, "window", None) or 32)
    horizon = int(getattr(config, "horizon", None) or 1)
    steps = len(frame)
    cut = int(round(steps * (1 - float(getattr(config, "test_fraction", None) or 0.2))))
    # window i reads rows i .. i+window-1; its label is row i+window+horizon-1
    targets = np.arange(window + horizon - 1, steps)
    starts = targets - (window + horizon - 1)
    train, test = targets < cut, targets >= cut
    if train.sum() < 1 or test.sum() < 1:
        raise UsageError(
            f"{where}: {steps} rows leave {int(train.sum())} training and {int(test.sum())} test "
            f"windows of --window {window} and --horizon {horizon}: shorten the window"
        )
    values = frame[columns].to_numpy(np.float64)
    mean, deviation = values[:cut].mean(axis=0), values[:cut].std(axis=0)
    scaled = ((values - mean) / np.where(deviation > 0, deviation, 1.0)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(scaled, window, axis=0)  # (n, F, window)
    windows = np.ascontiguousarray(np.swapaxes(windows[starts], 1, 2))  # (n, window, F)
    if is_regression(loss):
        if frame[label].dtype.kind not in "biuf":
            raise UsageError(
                f"{where}: label column {label!r} is not numeric (--loss mse predicts numbers)"
            )
        level = frame[label].to_numpy(np.float64)[:, None]
        level_mean, level_dev = level[:cut].mean(axis=0), level[:cut].std(axis=0)
        level = ((level - level_mean) / np.where(level_dev > 0, level_dev, 1.0)).astype(np.float32)
        labels, outputs = level[targets], 1
    else:
        ids, outputs = _class_ids(data, frame[label], label)
        labels = ids[targets]
    source = (
        f"{data.path}: {steps} time steps, {len(columns)} column(s) in windows of {window}, "
        f"label {label!r} {horizon} step(s) ahead, the last {steps - cut} held out"
    )
    return windows[train], labels[train], windows[test], labels[test], outputs, source
