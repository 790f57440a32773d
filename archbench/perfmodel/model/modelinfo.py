"""Sizes of a model's trainable variables, in creation order (what a PS shard plan places)."""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace
from typing import Any

from archbench.common.errors import UsageError
from archbench.record.schema import built_in_train_size
from archbench.runtime.settings import SETTINGS

# Input shape and class count of each data set, as archbench.workloads.data loads them.
DATASET_SHAPES: dict[str, tuple[tuple[int, ...], int]] = {
    "fashion_mnist": ((28, 28, 1), 10),
    "mnist": ((28, 28, 1), 10),
    "cifar10": ((32, 32, 3), 10),
}
TEXT_VOCAB = 256
# The settings that shape a user's samples: archbench.workloads.data.USER_DATA_SETTINGS, named here so that
# a command's flags register without loading numpy (a test holds the two lists equal).
USER_DATA_INPUTS = ("loss", "label_column", "feature_columns", "test_fraction", "window", "horizon")
# Every setting that decides a model's input shape and outputs (predict's and whatif's flags).
INPUT_SETTINGS = (
    "dataset", "synthetic_shape", "synthetic_classes", "seq_len", "vocab_size", *USER_DATA_INPUTS,
)  # fmt: skip


def input_spec(config: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """(input shape, classes) of a run's configuration: what `archbench train` builds the model
    for (synthetic data: --synthetic-shape and --synthetic-classes, the registry's defaults
    when not given; a user's data: its samples' shape and outputs, read as training reads it).
    UsageError naming the problem when a user's data cannot be read."""

    dataset = str(config.get("dataset") or "fashion_mnist")
    user = user_data_facts(config)
    if user is not None:
        return user[0], user[1]
    if dataset in DATASET_SHAPES:
        return DATASET_SHAPES[dataset]
    if dataset == "synthetic":
        shape = config.get("synthetic_shape") or SETTINGS["synthetic_shape"].default
        if isinstance(shape, str):
            shape = tuple(int(d) for d in shape.lower().split("x"))
        classes = config.get("synthetic_classes") or SETTINGS["synthetic_classes"].default
        return tuple(int(d) for d in shape), int(classes)
    if dataset == "text":
        return (int(config.get("seq_len") or 64),), TEXT_VOCAB
    if dataset == "words":
        # deferred: archbench.workloads.words loads numpy
        from archbench.workloads.words import WORD_OUTPUT_CLASSES

        seq_len = int(config.get("seq_len") or SETTINGS["seq_len"].default)
        return (seq_len,), min(WORD_OUTPUT_CLASSES, vocab_of(config) or 0)
    return DATASET_SHAPES["fashion_mnist"]


def user_data_facts(config: dict[str, Any]) -> tuple[tuple[int, ...], int, int] | None:
    """(sample shape, outputs, training samples) of a user's data set (`npz:`, `npy:`, `csv:`,
    `series:`), None for a built-in one. Loaded through archbench.workloads.data, so a table's one-hot
    columns and a series' windows come out as training sees them; kept per version of its files."""
    dataset = str(config.get("dataset") or "")
    if ":" not in dataset:
        return None
    # deferred: the user's data forms load numpy
    from archbench.workloads.user_data import parse_user_data

    data = parse_user_data(dataset)
    if data is None:
        return None
    shaping = tuple(
        (name, SETTINGS[name].default if config.get(name) is None else config.get(name))
        for name in USER_DATA_INPUTS
    )
    versions = []
    for path in data.files():
        try:
            stat = os.stat(path)
        except OSError:
            continue  # the loader names what is missing
        versions.append((path, stat.st_size, stat.st_mtime_ns))
    return _loaded_facts(dataset, shaping, tuple(versions))


@functools.lru_cache(maxsize=16)
def _loaded_facts(
    dataset: str, shaping: tuple[tuple[str, Any], ...], versions: tuple
) -> tuple[tuple[int, ...], int, int]:
    # deferred: archbench.workloads.data loads numpy (and pandas for a table)
    from archbench.workloads.data import load_dataset

    data = load_dataset(SimpleNamespace(dataset=dataset, **dict(shaping)))
    return tuple(int(d) for d in data.input_shape), int(data.num_classes), int(data.train_size)


def vocab_of(config: dict[str, Any]) -> int | None:
    """The input vocabulary a word model's embedding has rows for (None for other data sets).
    The corpus may hold fewer distinct words than asked; the model is priced at the size asked."""

    if str(config.get("dataset") or "") != "words":
        return None
    return int(config.get("vocab_size") or SETTINGS["vocab_size"].default)


@functools.lru_cache(maxsize=16)
def keras_model(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
):
    """archbench.workloads.models.build_model's network (built once per shape and kept)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # deferred: archbench.workloads.models loads numpy (and TensorFlow when it builds)
    from archbench.workloads.models import build_model

    return build_model(model, input_shape, num_classes, seed=0, vocab_size=vocab_size)


@functools.lru_cache(maxsize=64)
def variable_shapes(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
) -> tuple[tuple[tuple[int, ...], int], ...]:
    """(shape, bytes per element) of each trainable variable of archbench.workloads.models.build_model,
    in creation order."""
    return tuple(
        (tuple(int(d) for d in v.shape), int(v.dtype.size))
        for v in keras_model(model, input_shape, num_classes, vocab_size).trainable_variables
    )


def shapes_only(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
) -> tuple:
    """The shape of each trainable variable, in creation order (what PowerSGD factors)."""
    return tuple(shape for shape, _ in variable_shapes(model, input_shape, num_classes, vocab_size))


@functools.lru_cache(maxsize=64)
def embedding_shape(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
) -> tuple[int, int] | None:
    """(rows, width) of the model's embedding, the variable whose gradient is row-sparse
    (`archbench.runtime.sparse_rows`); None for a model without one."""
    # deferred: archbench.runtime.sparse_rows loads numpy
    from archbench.runtime.sparse_rows import embedding_variables

    embeddings = embedding_variables(keras_model(model, input_shape, num_classes, vocab_size))
    if not embeddings:
        return None
    rows, width = (int(d) for d in embeddings[0].shape)
    return rows, width


def variable_bytes(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
) -> tuple[float, ...]:
    """Byte size of each trainable variable, in creation order."""
    sizes = []
    for shape, itemsize in variable_shapes(model, input_shape, num_classes, vocab_size):
        count = 1
        for dim in shape:
            count *= dim
        sizes.append(float(count * itemsize))
    return tuple(sizes)


@functools.lru_cache(maxsize=64)
def ps_plan(
    model: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    num_ps: int,
    sharding: str,
    vocab_size: int | None = None,
):
    """The shard plan the PS trainer builds for this model (archbench.ps.sharding's planner,
    the one the model prices)."""
    # deferred: the PS shard planner loads only when a plan is priced
    from archbench.ps.sharding import plan_for_model

    return plan_for_model(
        keras_model(model, input_shape, num_classes, vocab_size), num_ps, sharding
    )


def variable_bytes_for(record: dict[str, Any]) -> tuple[float, ...] | None:
    """Variable sizes of the model a record trained; None when the model cannot be built here."""
    config = record.get("config") or {}
    try:
        shape, classes = input_spec(config)
        return variable_bytes(str(config.get("model")), shape, classes, vocab_of(config))
    except Exception:  # noqa: BLE001 - an unknown model only loses the exact shard plan
        return None


def train_size(config: dict[str, Any]) -> int | None:
    """Training samples of the configured data set (a user's read from its files; None when
    they cannot be read, or when only loading a built-in one would tell)."""
    try:
        user = user_data_facts(config)
    except UsageError:
        return None
    if user is not None:
        return user[2]
    return built_in_train_size(config)


def steps_per_epoch(config: dict[str, Any], workers: int) -> int | None:
    """Steps of one epoch under the sync semantics (train size // global batch)."""
    size = train_size(config)
    batch = int(config.get("batch_size") or 0)
    if not size or not batch:
        return None
    return max(1, size // (batch * max(workers, 1)))


@functools.lru_cache(maxsize=64)
def variable_flops(
    model: str, input_shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None
) -> tuple[float, ...]:
    """Multiply-adds of each trainable variable's layer per sample, in creation order: its
    elements times the positions of its layer's output (a convolution kernel is applied at
    every output pixel, a dense kernel once). What the backward pass spends on a layer is in
    proportion (the layer-order overlap schedule, formulas.gradient_ready_s)."""
    network = keras_model(model, input_shape, num_classes, vocab_size)
    positions: dict[int, float] = {}
    for layer in network.layers:
        try:
            shape = tuple(layer.output.shape)
        except (AttributeError, ValueError):
            shape = ()
        spatial = 1.0
        for dim in shape[1:-1]:
            spatial *= float(dim or 1)
        for weight in layer.trainable_weights:
            positions[id(weight)] = spatial
    flops = []
    for weight in network.trainable_variables:
        count = 1.0
        for dim in weight.shape:
            count *= float(dim)
        flops.append(count * positions.get(id(weight), 1.0))
    return tuple(flops)
