"""What the starter study trains: the model and data set asked for (`--model`, `--dataset`: a
built-in name or the user's own), else mlp on Fashion-MNIST where its files are readable here
(Debian's dataset-fashion-mnist, or --data-dir), else on generated data of the same shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from archbench.common.errors import UsageError

# The models that read 28x28 images, cheapest first; the starter trains the first unless asked
# for another, and its comments name the others.
IMAGE_MODELS = ("mlp", "cnn", "resnet20", "wide_mlp")
# The built-in models that take samples of any shape (they flatten them first).
FLAT_MODELS = ("mlp", "wide_mlp")
DEFAULT_BATCH = 32  # per worker, where the training set holds the largest global batch


@dataclass
class Workload:
    fixed: dict[str, object]  # the spec's fixed settings for the data and the model
    found: str  # a sentence for the comments: what was found and where
    other_models: list[str] = field(default_factory=list)
    title: str = ""  # "model on data", short names for the spec's description
    train_size: int | None = None  # training samples, where known

    def batch_size(self, workers: int) -> int:
        """The per-worker batch: DEFAULT_BATCH, or the largest power of two whose global batch
        at `workers` workers the training set still holds (a user's small table)."""
        if self.train_size is None or self.train_size >= DEFAULT_BATCH * workers:
            return DEFAULT_BATCH
        batch = 1
        while batch * 2 * workers <= self.train_size:
            batch *= 2
        if batch * workers > self.train_size:
            raise UsageError(
                f"--dataset {self.fixed['dataset']}: {self.train_size} training samples cannot "
                f"give each of {workers} workers a batch (give more rows, or fewer hosts)"
            )
        return batch


def find(
    data_dir: str | None = None,
    model: str | None = None,
    dataset: str | None = None,
    shaping: dict[str, Any] | None = None,
) -> Workload:
    """The starter's workload; UsageError naming the first problem (a model or data set that is
    not there, data that does not load, a model that does not fit the data)."""
    # deferred: archbench.workloads.models and the user's data forms load numpy, which
    # `archbench init --help` does not need
    from archbench.workloads.models import model_source
    from archbench.workloads.user_data import parse_user_data

    source = model_source(model or IMAGE_MODELS[0])
    user_data = parse_user_data(dataset) if dataset else None
    given = {name: value for name, value in (shaping or {}).items() if value is not None}
    if given and user_data is None:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(f"{flags}: shape your own data (--dataset csv:FILE, series:FILE, ...)")
    if user_data is not None:
        return _user_data(source, user_data, given)
    if dataset not in (None, "fashion_mnist"):
        raise UsageError(
            f"--dataset {dataset}: init writes a starter for fashion_mnist or your own data "
            "(npz:FILE, npy:FOLDER, csv:FILE, series:FILE); for the other built-in data sets "
            "write the spec by hand (docs/studies.md)"
        )
    return _fashion_mnist(source, data_dir, asked=dataset is not None)


def _fashion_mnist(source, data_dir: str | None, asked: bool) -> Workload:
    # deferred: archbench.workloads.data loads numpy
    from archbench.workloads.data import FASHION_MNIST_DIR, check_available
    from archbench.workloads.models import check_model_name

    check_model_name(source.spec, "fashion_mnist")
    others = [name for name in IMAGE_MODELS if name != source.spec]
    folder = data_dir or FASHION_MNIST_DIR
    try:
        check_available(SimpleNamespace(dataset="fashion_mnist", data_dir=data_dir))
    except UsageError as exc:
        if data_dir or asked:  # asked for: a folder that does not hold the files is bad input
            raise
        fixed: dict[str, object] = {
            "dataset": "synthetic",
            "synthetic_shape": "28x28x1",
            "synthetic_classes": 10,
            "model": source.spec,
        }
        if source.user:
            _fits(source.spec, (28, 28, 1), 10)
        why = str(exc).splitlines()[0]
        return Workload(fixed, f"generated data (Fashion-MNIST not readable here: {why})",
                        others, f"{source.label} on generated 28x28 images")  # fmt: skip
    fixed = {"dataset": "fashion_mnist", "model": source.spec, "eval_samples": 2000}
    if data_dir:
        fixed["data_dir"] = data_dir
    if source.user:
        _fits(source.spec, (28, 28, 1), 10)
    return Workload(
        fixed, f"Fashion-MNIST in {folder}", others, f"{source.label} on Fashion-MNIST", 60000
    )


def _user_data(source, data, shaping: dict[str, Any]) -> Workload:
    """The user's data set, read as training reads it, and the model built for it."""
    # deferred: the model's facts load the data (numpy, pandas) and build the model (TensorFlow)
    from archbench.perfmodel.model.modelinfo import user_data_facts
    from archbench.workloads.models import check_model_name

    spec = f"{data.form}:{data.path}"
    check_model_name(source.spec, spec)
    shape, outputs, train_size = user_data_facts({"dataset": spec, **shaping})
    params = _fits(source.spec, shape, outputs)
    flat = FLAT_MODELS if len(shape) != 3 else IMAGE_MODELS
    what = "target value" if shaping.get("loss") == "mse" else "class"
    found = (
        f"your data {spec}: {train_size} training samples of shape {'x'.join(map(str, shape))}, "
        f"{outputs} {what}{'' if outputs == 1 else 'es' if what == 'class' else 's'}; "
        f"{source.label} has {params:,} parameters"
    )
    fixed = {"dataset": spec, **shaping, "model": source.spec}
    others = [name for name in flat if name != source.spec]
    return Workload(fixed, found, others, f"{source.label} on {data.label}", train_size)


def _fits(model: str, shape: tuple[int, ...], outputs: int) -> int:
    """The model's trainable parameters, built for the data as training builds it; UsageError
    naming what does not fit."""
    # deferred: building the model loads TensorFlow
    from archbench.perfmodel.model.modelinfo import variable_shapes

    count = 0
    for dims, _ in variable_shapes(model, tuple(shape), outputs):
        size = 1
        for dim in dims:
            size *= dim
        count += size
    return count
