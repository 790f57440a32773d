"""Shared data pipelines: every architecture reads the same samples in the same global order.

Sync semantics: epoch e has one seeded permutation of the training set; global batch s is
samples perm[s*W*b:(s+1)*W*b], and worker r trains on slice r (b samples) of it. A W-worker run
and a single process with batch W*b therefore see exactly the same samples per step.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from archbench.common.errors import DamagedDataFile, UsageError
from archbench.workloads.files import readable_file_problem
from archbench.workloads.user_data import load_user_data, parse_user_data
from archbench.workloads.words import tokenize, windows

# settings that shape a user's samples (archbench.workloads.user_data)
USER_DATA_SETTINGS = (
    "loss",
    "label_column",
    "feature_columns",
    "test_fraction",
    "window",
    "horizon",
)

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
TEXT_VOCAB = 256  # bytes
TEXT_CORPUS_BYTES = 4 * 1024 * 1024
TEXT_TEST_FRACTION = 0.1


@dataclass
class ArrayDataset:
    """Training and test arrays held in memory, as stored (uint8 images, int labels)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    scale: float  # inputs are multiplied by this (1/255 for images, 1 for token ids)
    source: str
    vocab_size: int | None = None  # token ids the inputs hold (the embedding's rows), text only
    documents: np.ndarray | None = field(default=None, repr=False)  # per training sample

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def train_size(self) -> int:
        return int(self.x_train.shape[0])


# --------------------------------------------------------------------------- IDX (MNIST family)


def _open_maybe_gz(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


_IDX_READ_ERRORS = (OSError, EOFError, zlib.error, struct.error)


def read_idx(path: str) -> np.ndarray:
    """Reads an IDX file (the MNIST format), plain or gzip-compressed."""
    try:
        with _open_maybe_gz(path) as handle:
            dims = _idx_dims(path, handle)
            payload = handle.read()
    except _IDX_READ_ERRORS as exc:
        # Past the up-front check (header, size), so the damage is inside the compressed data.
        raise DamagedDataFile(f"{path}: damaged while reading it ({_reason(exc)})") from None
    expected = int(np.prod(dims))
    if len(payload) != expected:
        raise UsageError(f"{path}: truncated IDX file ({len(payload)} of {expected} bytes)")
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, gzip.BadGzipFile):
        return "not gzip data"
    if isinstance(exc, EOFError | zlib.error):
        return f"damaged gzip data: {exc}"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _idx_dims(path: str, handle) -> tuple[int, ...]:
    header = handle.read(4)
    if len(header) != 4 or header[0] != 0 or header[1] != 0:
        raise UsageError(f"{path}: not an IDX file (its first bytes are not an IDX header)")
    if header[2] != 0x08:
        raise UsageError(f"{path}: IDX element type {header[2]:#x} is not unsigned byte")
    ndim = header[3]
    sizes = handle.read(4 * ndim)
    if ndim == 0 or len(sizes) != 4 * ndim:
        raise UsageError(f"{path}: IDX header cut short ({4 + len(sizes)} bytes)")
    return struct.unpack(f">{ndim}I", sizes)


def idx_shape(path: str) -> tuple[int, ...]:
    """The dimensions an IDX file declares, checked against its size without reading the data
    (a .gz file against the uncompressed size its trailer records); UsageError naming the file."""
    try:
        with _open_maybe_gz(path) as handle:
            dims = _idx_dims(path, handle)
        expected = 4 + 4 * len(dims) + int(np.prod(dims, dtype=np.int64))
        if path.endswith(".gz"):
            with open(path, "rb") as raw:
                raw.seek(-4, os.SEEK_END)
                (recorded,) = struct.unpack("<I", raw.read(4))
            if recorded != expected % 2**32:
                raise UsageError(
                    f"{path}: gzip data cut short or wrong size (holds {recorded} bytes "
                    f"uncompressed, the IDX header needs {expected})"
                )
        elif os.path.getsize(path) != expected:
            raise UsageError(
                f"{path}: {os.path.getsize(path)} bytes, the IDX header {dims} needs {expected}"
            )
    except _IDX_READ_ERRORS as exc:
        raise UsageError(f"{path}: cannot be read as an IDX file ({_reason(exc)})") from None
    return dims


def check_idx_files(paths: dict[str, str]) -> list[str]:
    """Every problem of the four IDX files, one line each: headers, sizes, agreeing counts."""
    problems, shapes = [], {}
    for key, path in paths.items():
        try:
            shapes[key] = idx_shape(path)
        except UsageError as exc:
            problems.append(str(exc))
    for part in ("train", "test"):
        images, labels = shapes.get(f"x_{part}"), shapes.get(f"y_{part}")
        if images is not None and len(images) != 3:
            problems.append(
                f"{paths[f'x_{part}']}: images must be N x rows x columns, got {images}"
            )
        if labels is not None and len(labels) != 1:
            problems.append(
                f"{paths[f'y_{part}']}: labels must be one number per image, got {labels}"
            )
        if images and labels and images[0] != labels[0]:
            problems.append(
                f"{paths[f'y_{part}']}: {labels[0]} labels for the {images[0]} images of "
                f"{paths[f'x_{part}']}"
            )
    return problems


def _find_idx_files(folder: str) -> dict[str, str] | list[str]:
    """Paths of the four IDX files (plain or .gz), or the list of names that are missing."""
    found, missing = {}, []
    for key, stem in IDX_FILES.items():
        for candidate in (stem, stem + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                found[key] = path
                break
        else:
            missing.append(stem + "[.gz]")
    return found if not missing else missing


def load_idx_dataset(name: str, folder: str) -> ArrayDataset:
    paths = _find_idx_files(folder)
    if isinstance(paths, list):
        raise UsageError(
            f"{name}: missing {', '.join(paths)} in {folder} (put the IDX files there or pass --data-dir)"
        )
    arrays = {key: read_idx(path) for key, path in paths.items()}
    x_train, x_test = arrays["x_train"][..., None], arrays["x_test"][..., None]
    return ArrayDataset(
        name,
        x_train,
        arrays["y_train"].astype(np.int32),
        x_test,
        arrays["y_test"].astype(np.int32),
        10,
        1.0 / 255.0,
        folder,
    )


# --------------------------------------------------------------------------- CIFAR-10


def _cifar_folder(data_dir: str) -> str:
    nested = os.path.join(data_dir, CIFAR10_FOLDER)
    return nested if os.path.isdir(nested) else data_dir


def _read_cifar_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int32).reshape(-1)
    except Exception as exc:  # noqa: BLE001 - any failure to unpickle means a damaged file
        raise DamagedDataFile(
            f"{path}: not a CIFAR-10 python batch ({type(exc).__name__}: {_reason(exc)})"
        ) from None
    if len(labels) != len(data):
        raise DamagedDataFile(f"{path}: {len(labels)} labels for {len(data)} images")
    return data.transpose(0, 2, 3, 1), labels


def _cifar_header_problem(path: str) -> str | None:
    """A cheap look at a batch before any process loads it: a pickle starts with its protocol."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror})"
    if len(head) < 2 or head[0] != 0x80 or not 2 <= head[1] <= 5:
        return f"{path}: not a CIFAR-10 python batch (not a pickle file)"
    return None


def load_cifar10(data_dir: str) -> ArrayDataset:
    folder = _cifar_folder(data_dir)
    names = (*CIFAR10_TRAIN, CIFAR10_TEST)
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        raise UsageError(
            f"cifar10: missing {', '.join(missing)} in {folder} "
            f"(put the CIFAR-10 python batches in --data-dir/{CIFAR10_FOLDER})"
        )
    parts = [_read_cifar_batch(os.path.join(folder, n)) for n in CIFAR10_TRAIN]
    x_test, y_test = _read_cifar_batch(os.path.join(folder, CIFAR10_TEST))
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    return ArrayDataset("cifar10", x_train, y_train, x_test, y_test, 10, 1.0 / 255.0, folder)


# --------------------------------------------------------------------------- synthetic


def make_synthetic(
    shape: tuple[int, ...], num_classes: int, samples: int, seed: int
) -> ArrayDataset:
    """Random uint8 inputs and labels held in memory (the benchmarks' small fixed sets); training
    runs use SyntheticData, which holds none."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(samples, *shape), dtype=np.uint8)
    y = rng.integers(0, num_classes, size=samples, dtype=np.int32)
    test = max(1, samples // 8)
    return ArrayDataset(
        "synthetic",
        x,
        y,
        x[:test],
        y[:test],
        num_classes,
        1.0 / 255.0,
        f"generated {'x'.join(map(str, shape))}",
    )


@dataclass
class SyntheticData:
    """Random inputs in [0, 1) and random labels, generated batch by batch as training asks for
    them (seeded by seed, step and worker), so no process ever holds the data set: a throughput
    workload costs what one batch costs. `samples` only sets the length of an epoch."""

    input_shape: tuple[int, ...]
    num_classes: int
    samples: int
    seed: int
    name: str = "synthetic"
    scale: float = 1.0  # generated as float32 already

    @property
    def source(self) -> str:
        return f"generated per batch {'x'.join(map(str, self.input_shape))}"

    @property
    def train_size(self) -> int:
        return self.samples

    @property
    def x_train(self) -> np.ndarray:
        """No samples: only the inputs' shape and dtype, which trainers read."""
        return np.empty((0, *self.input_shape), dtype=np.float32)

    @property
    def test_size(self) -> int:
        return max(1, self.samples // 8)


# Streams of synthetic batches: training and test never share a batch.
_TRAIN_STREAM, _TEST_STREAM = 0, 1


def synthetic_batch(data: SyntheticData, stream: int, counter, size: int):
    """One batch (x, y) of `size` samples, a pure function of (seed, stream, counter)."""
    # deferred: TensorFlow; `archbench init` and doctor's probe read this module without it
    import tensorflow as tf

    counter = tf.cast(counter, tf.int64)
    base = tf.stack([tf.constant(data.seed, tf.int64), counter * 2 + stream])
    x = tf.random.stateless_uniform((size, *data.input_shape), seed=base, dtype=tf.float32)
    label_seed = tf.stack([tf.constant(data.seed, tf.int64), -1 - (counter * 2 + stream)])
    y = tf.random.stateless_uniform(
        (size,), seed=label_seed, minval=0, maxval=data.num_classes, dtype=tf.int32
    )
    return x, y


# --------------------------------------------------------------------------- text


def default_corpus_files() -> list[str]:
    """The standard library's own Python sources: present wherever Python is."""
    stdlib = os.path.dirname(os.__file__)
    return sorted(os.path.join(stdlib, name) for name in os.listdir(stdlib) if name.endswith(".py"))


def read_corpus(text_file: str | None, limit: int = TEXT_CORPUS_BYTES) -> tuple[bytes, str]:
    documents, source = read_documents(text_file, limit)
    return b"".join(documents), source


def read_documents(
    text_file: str | None, limit: int = TEXT_CORPUS_BYTES
) -> tuple[list[bytes], str]:
    """The corpus as its documents (one per source file), `limit` bytes in all, and its name."""
    if text_file is not None:
        check_text_file(text_file)
        with open(text_file, "rb") as handle:
            return [handle.read(limit)], text_file
    documents, total = [], 0
    for path in default_corpus_files():
        with open(path, "rb") as handle:
            chunk = handle.read(limit - total)
        documents.append(chunk)
        total += len(chunk)
        if total >= limit:
            break
    return documents, f"python{sys.version_info[0]}.{sys.version_info[1]} standard library sources"


def check_text_file(path: str) -> None:
    """A corpus must be a readable plain file: a folder or a device is named as what it is."""
    problem = readable_file_problem(path)
    if problem:
        raise UsageError(f"--text-file {path}: {problem}")


def make_text_dataset(text_file: str | None, seq_len: int) -> ArrayDataset:
    """Windows of seq_len bytes -> the next byte (a character language model's data)."""
    corpus, source = read_corpus(text_file)
    tokens = np.frombuffer(corpus, dtype=np.uint8)
    stride = seq_len
    count = (len(tokens) - seq_len - 1) // stride
    if count < 16:
        raise UsageError(f"text corpus {source}: too short for --seq-len {seq_len}")
    starts = np.arange(count) * stride
    x = np.stack([tokens[s : s + seq_len] for s in starts]).astype(np.int32)
    y = tokens[starts + seq_len].astype(np.int32)
    split = int(count * (1 - TEXT_TEST_FRACTION))
    return ArrayDataset("text", x[:split], y[:split], x[split:], y[split:], TEXT_VOCAB, 1.0, source)


def make_word_dataset(text_file: str | None, seq_len: int, vocab_size: int) -> ArrayDataset:
    """Windows of seq_len words -> the next word (`archbench.workloads.words`), with each training
    window's document."""

    documents, source = read_documents(text_file)
    if not any(document.strip() for document in documents):
        raise UsageError(f"text corpus {source}: empty (no words to train on)")
    corpus = tokenize(documents, vocab_size)
    cut = windows(corpus, seq_len, vocab_size, source)
    split = int(len(cut.x) * (1 - TEXT_TEST_FRACTION))
    return ArrayDataset(
        "words",
        cut.x[:split],
        cut.y[:split],
        cut.x[split:],
        cut.y[split:],
        cut.output_classes,
        1.0,
        f"{source}, {len(corpus.ids):,} words, {corpus.distinct_tokens:,} distinct",
        vocab_size=vocab_size,
        documents=cut.documents[:split],
    )


# --------------------------------------------------------------------------- entry point


# The last data set this process loaded, under what it was loaded from: the runs of a warm group
# (archbench.runtime.warmgroup) read the same files, and reading them again cost 0.3-0.9 s of each run.
# Its arrays are read-only, so no run can change what the next one trains on.
_LOADED: tuple[tuple, ArrayDataset] | None = None


def load_dataset(config) -> ArrayDataset | SyntheticData:
    """Loads the configured data set; raises UsageError naming missing files. A data set is read
    from its files again only when they or its settings changed since this process last read it."""
    global _LOADED
    if config.dataset == "synthetic":  # generated batch by batch: nothing to keep
        return _load(config)
    key = _source_key(config)
    if _LOADED is not None and _LOADED[0] == key:
        return _LOADED[1]
    data = _load(config)
    for array in (data.x_train, data.y_train, data.x_test, data.y_test, data.documents):
        if array is not None:
            array.flags.writeable = False
    _LOADED = (key, data)
    return data


def _source_key(config) -> tuple:
    """What a loaded data set depends on: its settings, and each of its files' size and time."""
    user = parse_user_data(config.dataset)
    if user is not None:
        # the file's version and every setting that shapes the samples
        shaping = tuple(getattr(config, name, None) for name in USER_DATA_SETTINGS)
        return (config.dataset, shaping), tuple(_file_versions(user.files()))
    folder = config.data_dir or (FASHION_MNIST_DIR if config.dataset == "fashion_mnist" else None)
    paths = [config.text_file] if config.text_file else []
    if folder and os.path.isdir(folder):
        for root in (folder, os.path.join(folder, CIFAR10_FOLDER)):
            if os.path.isdir(root):
                paths += [os.path.join(root, name) for name in sorted(os.listdir(root))]
    settings = (config.dataset, folder, config.text_file, config.seq_len, config.vocab_size)
    return settings, tuple(_file_versions(paths))


def _file_versions(paths: list[str]) -> list[tuple]:
    files = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        files.append((path, stat.st_size, stat.st_mtime_ns))
    return files


def _load(config) -> ArrayDataset | SyntheticData:
    user = parse_user_data(config.dataset)
    if user is not None:
        found = load_user_data(user, config)
        return ArrayDataset(
            found.name,
            found.x_train,
            found.y_train,
            found.x_test,
            found.y_test,
            found.outputs,
            found.scale,
            found.source,
        )
    if config.dataset == "fashion_mnist":
        return load_idx_dataset("fashion_mnist", config.data_dir or FASHION_MNIST_DIR)
    if config.dataset == "mnist":
        if not config.data_dir:
            raise UsageError(
                "mnist: pass --data-dir with train-images-idx3-ubyte[.gz] and the other three IDX files"
            )
        return load_idx_dataset("mnist", config.data_dir)
    if config.dataset == "cifar10":
        if not config.data_dir:
            raise UsageError(
                f"cifar10: pass --data-dir with the python batches ({CIFAR10_FOLDER}/data_batch_1..5, test_batch)"
            )
        return load_cifar10(config.data_dir)
    if config.dataset == "synthetic":
        return SyntheticData(
            tuple(config.synthetic_shape),
            config.synthetic_classes,
            config.synthetic_samples,
            config.seed,
        )
    if config.dataset == "text":
        return make_text_dataset(config.text_file, config.seq_len)
    if config.dataset == "words":
        return make_word_dataset(config.text_file, config.seq_len, config.vocab_size)
    raise UsageError(f"unknown dataset {config.dataset!r}")


def check_available(config) -> None:
    """Fails fast (before any process starts work) when the data set's files are missing or
    damaged: one line per problem."""
    if parse_user_data(config.dataset) is not None:
        load_dataset(config)  # read and checked once; the run then finds it loaded
        return
    if config.dataset in ("fashion_mnist", "mnist"):
        folder = config.data_dir or (
            FASHION_MNIST_DIR if config.dataset == "fashion_mnist" else None
        )
        if folder is None:
            raise UsageError(
                "mnist: pass --data-dir with train-images-idx3-ubyte[.gz] and the other three IDX files"
            )
        paths = _find_idx_files(folder)
        if isinstance(paths, list):
            hint = (
                " (apt-get install dataset-fashion-mnist, or pass --data-dir)"
                if config.dataset == "fashion_mnist"
                else ""
            )
            raise UsageError(f"{config.dataset}: missing {', '.join(paths)} in {folder}{hint}")
        problems = check_idx_files(paths)
        if problems:
            raise UsageError("\n".join(problems))
    elif config.dataset == "cifar10":
        load_cifar10_check(config.data_dir)
    elif config.dataset in ("text", "words") and config.text_file:
        check_text_file(config.text_file)
        if os.path.getsize(config.text_file) == 0:
            raise UsageError(f"--text-file {config.text_file}: empty (no text to train on)")


def load_cifar10_check(data_dir: str | None) -> None:
    if not data_dir:
        raise UsageError(
            f"cifar10: pass --data-dir with the python batches ({CIFAR10_FOLDER}/data_batch_1..5, test_batch)"
        )
    folder = _cifar_folder(data_dir)
    names = (*CIFAR10_TRAIN, CIFAR10_TEST)
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        raise UsageError(f"cifar10: missing {', '.join(missing)} in {folder}")
    problems = [_cifar_header_problem(os.path.join(folder, n)) for n in names]
    if any(problems):
        raise UsageError("\n".join(p for p in problems if p))


# --------------------------------------------------------------------------- global order


@dataclass(frozen=True)
class BatchPlan:
    """Which samples each worker trains on, step by step: the sync semantics, or with `parts`
    (a data partition, `archbench.runtime.partition`) each worker's own samples in a seeded order per
    epoch, an epoch as long as the smallest part allows."""

    train_size: int
    batch_size: int  # per worker
    num_workers: int
    seed: int
    parts: tuple | None = field(default=None, compare=False)  # per worker, its sample indices

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.num_workers

    @property
    def steps_per_epoch(self) -> int:
        if self.parts is not None:
            return min(len(part) for part in self.parts) // self.batch_size
        return self.train_size // self.global_batch

    def epoch_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.train_size)

    def worker_indices(self, epoch: int, worker: int) -> np.ndarray:
        """(steps_per_epoch, batch_size) sample indices of this worker's slices in this epoch."""
        steps = self.steps_per_epoch
        if self.parts is not None:
            own = np.random.default_rng([self.seed, epoch, worker]).permutation(self.parts[worker])
            return own[: steps * self.batch_size].reshape(steps, self.batch_size)
        order = self.epoch_order(epoch)[: steps * self.global_batch]
        return order.reshape(steps, self.num_workers, self.batch_size)[:, worker, :]


def train_batches(
    data: ArrayDataset | SyntheticData,
    plan: BatchPlan,
    epoch: int,
    worker: int,
    first_step: int = 0,
) -> Iterator[tuple]:
    """This worker's (x, y) batches for one epoch, from `first_step` on, as tensors.

    Made in the calling thread when asked for, not by a tf.data pipeline: a pipeline's threads
    share the worker's virtual core on a time-dilated node, and stopping one (at the end of each
    epoch) took seconds there. A batch is a gather of a few rows: microseconds, nothing to
    overlap with a step. The values are a pipeline's, bit for bit (the same gather, cast and
    float32 scaling, or the same stateless draws)."""
    # deferred: TensorFlow; `archbench init` and doctor's probe read this module without it
    import tensorflow as tf

    if isinstance(data, SyntheticData):
        # Batch k of worker w is drawn from counter k*W + w: the same on every run, never stored.
        first = epoch * plan.steps_per_epoch + first_step
        for step in range(first, (epoch + 1) * plan.steps_per_epoch):
            yield synthetic_batch(
                data, _TRAIN_STREAM, step * plan.num_workers + worker, plan.batch_size
            )
        return

    scale = np.float32(data.scale)
    for batch_indices in plan.worker_indices(epoch, worker)[first_step:]:
        x = as_model_input(data.x_train[batch_indices], scale)
        yield tf.convert_to_tensor(x), tf.convert_to_tensor(data.y_train[batch_indices])


def test_arrays(data: ArrayDataset, samples: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Test inputs ready for the model (scaled), optionally the first `samples` only."""
    x, y = data.x_test, data.y_test
    if samples:
        x, y = x[:samples], y[:samples]
    return as_model_input(x, np.float32(data.scale)), np.asarray(y)


def as_model_input(x: np.ndarray, scale: np.float32) -> np.ndarray:
    """Samples as the model takes them: scaled to float32 (images), other floats as float32,
    integers (token ids) as stored."""
    if scale != 1.0:
        return x.astype(np.float32) * scale
    if x.dtype.kind == "f" and x.dtype != np.float32:
        return x.astype(np.float32)
    return np.asarray(x)


def test_batches(
    data: ArrayDataset | SyntheticData, samples: int, batch_size: int
) -> Iterator[tuple]:
    """The evaluation set in batches of at most `batch_size`: the (first `samples`) test arrays,
    or for synthetic data the same generated test batches at every evaluation."""
    if isinstance(data, SyntheticData):
        total = samples or data.test_size
        for index, start in enumerate(range(0, total, batch_size)):
            yield synthetic_batch(data, _TEST_STREAM, index, min(batch_size, total - start))
        return
    x, y = test_arrays(data, samples)
    for start in range(0, len(x), batch_size):
        yield x[start : start + batch_size], y[start : start + batch_size]
