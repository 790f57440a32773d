"""Where a run's model comes from: a built-in name (`archbench.workloads.models`), a function the user wrote
(`path/to/file.py:build` or `package.module:build`), or a saved Keras model with its weights
(`path/to/model.keras` or `.h5`).

A user's function is called as `build(input_shape, num_outputs)`: `input_shape` a tuple of ints
(one sample's shape, without the batch), `num_outputs` an int (the classes of a classification
data set, the target values of a regression one). It returns a `tf.keras.Model` whose output is
(batch, num_outputs): logits (no softmax) for classification, values for regression. It is called
on every rank after `tf.keras.utils.set_random_seed(seed)`, so every rank builds the same initial
weights. A model file is code the user chose to run, as a training script is: archbench imports
it in every training process, and `report` and `compare` never do.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
import zipfile
from collections.abc import Collection
from dataclasses import dataclass

from archbench.common.errors import UsageError
from archbench.common.jsonl import loads
from archbench.workloads.files import readable_file_problem, sha256_of

SAVED_SUFFIXES = (".keras", ".h5")
FORMS = "FILE.py:FUNCTION, package.module:FUNCTION, or a saved model FILE.keras / FILE.h5"


@dataclass(frozen=True)
class ModelSource:
    """A `--model` value, parsed (its form only: nothing is opened)."""

    spec: str  # as given
    kind: str  # builtin | function | saved
    path: str | None = None  # the Python file or the saved model
    module: str | None = None  # package.module
    function: str | None = None

    @property
    def user(self) -> bool:
        return self.kind != "builtin"

    @property
    def label(self) -> str:
        """A short name for tables and figures."""
        if self.kind == "builtin":
            return self.spec
        if self.kind == "saved":
            return os.path.basename(self.path or "")
        owner = (
            os.path.splitext(os.path.basename(self.path))[0]
            if self.path
            else str(self.module).rsplit(".", 1)[-1]
        )
        return f"{owner}:{self.function}"

    @property
    def file(self) -> str | None:
        """The file whose bytes make the model (a module's file once it is found)."""
        if self.path is not None:
            return self.path
        if self.module is not None:
            found = _find_module(self.module, self.spec)
            return found.origin if found is not None else None
        return None


def parse_model(spec: str, builtin_names: Collection[str]) -> ModelSource:
    """The source a `--model` value names (`builtin_names`: archbench.workloads.models's); UsageError when
    it is of no known form."""
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("--model is empty: give a built-in name or " + FORMS)
    if spec in builtin_names:
        return ModelSource(spec, "builtin")
    if spec.lower().endswith(SAVED_SUFFIXES):
        return ModelSource(spec, "saved", path=spec)
    owner, colon, function = spec.rpartition(":")
    if colon and owner and function.isidentifier():
        if owner.endswith(".py"):
            return ModelSource(spec, "function", path=owner, function=function)
        if all(part.isidentifier() for part in owner.split(".")):
            return ModelSource(spec, "function", module=owner, function=function)
    raise UsageError(
        f"unknown model {spec!r}: give a built-in name ({', '.join(builtin_names)}) or {FORMS}"
    )


def check_model_file(source: ModelSource) -> None:
    """The model's file is there and readable, its function defined: UsageError naming it.
    Imports a function's file (the user's code); opens nothing else."""
    if source.kind == "builtin":
        return
    if source.path is not None:
        _check_regular_file(source.path)
    if source.kind == "saved":
        _saved_architecture(source.path)  # a file that is not a saved model fails here
        return
    module = load_module(source)
    if not callable(getattr(module, source.function, None)):
        where = source.path or source.module
        raise UsageError(f"--model {source.spec}: {where} defines no function {source.function!r}")


def _check_regular_file(path: str) -> None:
    problem = readable_file_problem(path)
    if problem:
        raise UsageError(f"--model {path}: {problem}")


def _find_module(name: str, spec: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"--model {spec}: cannot find module {name} ({exc})") from None


_MODULES: dict[tuple, object] = {}


def load_module(source: ModelSource):
    """The user's module, imported once per version of its file; its errors as UsageError naming
    the user's file and line."""
    if source.path is not None:
        stat = os.stat(source.path)
        key = (os.path.abspath(source.path), stat.st_size, stat.st_mtime_ns)
        if key not in _MODULES:
            name = f"archbench_user_model_{len(_MODULES)}"
            found = importlib.util.spec_from_file_location(name, source.path)
            module = importlib.util.module_from_spec(found)
            sys.modules[name] = module  # dataclasses and pickling look a module up by name
            try:
                found.loader.exec_module(module)
            except BaseException as exc:  # noqa: BLE001 - the user's code: any error is theirs
                del sys.modules[name]
                raise UsageError(
                    f"--model {source.spec}: importing it failed: {user_error(exc, source.path)}"
                ) from None
            _MODULES[key] = module
        return _MODULES[key]
    if _find_module(source.module, source.spec) is None:
        raise UsageError(f"--model {source.spec}: no module named {source.module!r}")
    try:
        return importlib.import_module(source.module)
    except BaseException as exc:  # noqa: BLE001 - the user's code
        file = getattr(_find_module(source.module, source.spec), "origin", None)
        raise UsageError(
            f"--model {source.spec}: importing it failed: {user_error(exc, file)}"
        ) from None


def user_error(exc: BaseException, file: str | None) -> str:
    """`file, line N: Type: message` for the innermost frame of the user's file (or the error
    alone where no frame is theirs), on one line."""
    # TensorFlow's errors run to pages: their first line says what went wrong
    message = " ".join(str(exc).strip().split("\n", 1)[0].split())[:300] or type(exc).__name__
    where = None
    if isinstance(exc, SyntaxError) and exc.filename:
        where = (exc.filename, exc.lineno)
    elif file is not None:
        target = os.path.realpath(file)
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.realpath(frame.filename) == target:
                where = (file, frame.lineno)
    if where is None:
        return f"{type(exc).__name__}: {message}"
    return f"{where[0]}, line {where[1]}: {type(exc).__name__}: {message}"


# --------------------------------------------------------------------------- saved models


def _saved_architecture(path: str) -> dict:
    """The saved model's architecture (Keras's config), read from the file without TensorFlow."""
    try:
        if path.lower().endswith(".keras"):
            with zipfile.ZipFile(path) as archive:
                config = loads(archive.read("config.json"))
        else:
            # deferred: h5py comes with TensorFlow and loads only for an .h5 model
            import h5py

            with h5py.File(path, "r") as handle:
                text = handle.attrs.get("model_config")
                if text is None:
                    raise KeyError("model_config")
                config = loads(text)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise UsageError(
            f"--model {path}: not a saved Keras model ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); save one with model.save('{path}')"
        ) from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise UsageError(f"--model {path}: not a saved Keras model (no model configuration)")
    return config


# --------------------------------------------------------------------------- building


def build_user_model(
    source: ModelSource, input_shape: tuple[int, ...], num_outputs: int, seed: int
):
    """The user's model for this data, initialised from `seed` (a function's) or from the saved
    weights; UsageError naming what does not fit."""
    # deferred: TensorFlow; validation reads this module without it
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    # Keras numbers unnamed layers per process: start every build from the same names, so a
    # warm launch's runs and every rank name (and servers shard) the same variables alike.
    tf.keras.backend.reset_uids()
    eager = tf.executing_eagerly()
    if source.kind == "saved":
        model = _load_saved(tf, source.path, with_weights=eager)
    else:
        module = load_module(source)
        function = getattr(module, source.function, None)
        if not callable(function):
            raise UsageError(f"--model {source.spec}: defines no function {source.function!r}")
        try:
            model = function(tuple(input_shape), int(num_outputs))
        except BaseException as exc:  # noqa: BLE001 - the user's code
            hint = (
                ""
                if eager
                else " (a parameter server's worker builds the model in a TensorFlow graph: "
                "combine Keras tensors with Keras layers such as layers.Add, not TensorFlow ops)"
            )
            raise UsageError(
                f"--model {source.spec}: {source.function}{(tuple(input_shape), num_outputs)} "
                f"raised {user_error(exc, source.file)}{hint}"
            ) from None
        if not isinstance(model, tf.keras.Model):
            raise UsageError(
                f"--model {source.spec}: {source.function} returned {type(model).__name__}, "
                "not a tf.keras.Model"
            )
    _check_fit(tf, source, model, tuple(input_shape), int(num_outputs))
    return model


def _load_saved(tf, path: str, with_weights: bool):
    """The saved model; in a graph (a parameter server's worker) its architecture alone: the
    weights reach the servers from the eager copy, and setting them would need a session."""
    try:
        if with_weights:
            return tf.keras.models.load_model(path, compile=False)
        return tf.keras.models.model_from_json(json.dumps(_saved_architecture(path)))
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever Keras says of the file
        raise UsageError(
            f"--model {path}: Keras cannot load it ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]})"
        ) from None


def _check_fit(tf, source: ModelSource, model, input_shape: tuple, num_outputs: int) -> None:
    """The model takes one sample of the data's shape and gives num_outputs values."""
    try:
        if not model.built or not model.inputs:
            model(tf.zeros((1, *input_shape)), training=False)
        expects = tuple(model.inputs[0].shape[1:]) if model.inputs else None
        output = tuple(model.outputs[0].shape) if model.outputs else None
    except Exception as exc:  # noqa: BLE001 - a subclassed model built on a sample
        raise UsageError(
            f"--model {source.spec}: does not take inputs of shape {input_shape}: "
            f"{user_error(exc, source.file)}"
        ) from None
    if (
        expects is not None
        and any(want is not None and want != have for want, have in zip(expects, input_shape))
        or (expects is not None and len(expects) != len(input_shape))
    ):
        raise UsageError(
            f"--model {source.spec}: takes inputs of shape {expects}, the data's samples are "
            f"{input_shape}"
        )
    if output is not None and (len(output) != 2 or output[-1] != num_outputs):
        raise UsageError(
            f"--model {source.spec}: outputs shape {output[1:]}, the data needs ({num_outputs},) "
            f"per sample (one per class, or per target value)"
        )
    last = model.layers[-1] if model.layers else None
    if getattr(getattr(last, "activation", None), "__name__", "") == "softmax":
        raise UsageError(
            f"--model {source.spec}: its last layer applies softmax; archbench trains on logits "
            "(give the last layer activation=None)"
        )


def source_facts(source: ModelSource) -> dict:
    """What the record keeps of a user's model: its label, kind, file and the file's sha256."""

    if not source.user:
        return {}
    file = source.file
    return {
        "label": source.label,
        "source": source.kind,
        "file": file,
        "sha256": sha256_of(file) if file and os.path.isfile(file) else None,
    }
