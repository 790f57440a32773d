"""Models shared by every architecture, built identically on every rank from the seed."""

from __future__ import annotations

import os

import numpy as np

from archbench.common.errors import UsageError
from archbench.workloads.model_source import ModelSource, build_user_model, parse_model

IMAGE_MODELS = ("mlp", "cnn", "resnet20", "wide_mlp")
TEXT_MODELS = ("charlm", "wordlm")
# each text model reads one data set, and only it reads that data set
TEXT_DATASET_OF = {"charlm": "text", "wordlm": "words"}
WORD_EMBEDDING_DIM = 64
# tf.keras.applications constructors (weights=None): for synthetic data and GPU clusters
KERAS_APPLICATIONS = {
    "resnet50": "ResNet50",
    "resnet101": "ResNet101",
    "resnet152": "ResNet152",
    "resnet50v2": "ResNet50V2",
    "vgg16": "VGG16",
    "vgg19": "VGG19",
    "mobilenet": "MobileNet",
    "mobilenetv2": "MobileNetV2",
    "densenet121": "DenseNet121",
    "inceptionv3": "InceptionV3",
    "xception": "Xception",
    "efficientnetb0": "EfficientNetB0",
    "nasnetmobile": "NASNetMobile",
}
WIDE_MLP_UNITS = 4096
MODEL_NAMES_HELP = (
    f"one of {', '.join(IMAGE_MODELS + TEXT_MODELS)}, a tf.keras.applications "
    f"network ({', '.join(KERAS_APPLICATIONS)}), or your own: FILE.py:FUNCTION or "
    "package.module:FUNCTION (called as FUNCTION(input_shape, num_outputs), returns a "
    "tf.keras.Model), or a saved model FILE.keras / FILE.h5 (trained from its weights)"
)


BUILTIN_MODELS = IMAGE_MODELS + TEXT_MODELS + tuple(KERAS_APPLICATIONS)


def model_source(spec: str) -> ModelSource:
    """Where a `--model` value's model comes from (a built-in name or a user's model);
    UsageError when it is of no known form."""
    return parse_model(spec, BUILTIN_MODELS)


def check_model_name(model: str, dataset: str) -> None:
    """Raises UsageError when the model is unknown or cannot read this data set (a user's model
    is checked for its form here, and its file by archbench.workloads.model_source)."""
    source = model_source(model)
    if source.user:
        if source.path is not None and not os.path.isfile(source.path):
            raise UsageError(f"--model {model}: no such file {source.path}")
        if dataset in TEXT_DATASET_OF.values():
            raise UsageError(
                f"dataset {dataset!r} goes with its own model only ({', '.join(TEXT_MODELS)})"
            )
        return
    user_data = ":" in str(dataset)
    if user_data and model not in TEXT_MODELS:
        return
    if TEXT_DATASET_OF.get(model) != dataset and (
        model in TEXT_MODELS or dataset in TEXT_DATASET_OF.values()
    ):
        raise UsageError(
            f"model {model!r} does not train on dataset {dataset!r} "
            "(charlm goes with --dataset text and wordlm with --dataset words, and only there)"
        )
    if model in KERAS_APPLICATIONS and dataset not in ("synthetic", "cifar10") and not user_data:
        raise UsageError(
            f"model {model!r} needs --dataset synthetic or cifar10 "
            "(use --synthetic-shape 224x224x3 for ImageNet-shaped inputs)"
        )


def _resnet20(tf, inputs, num_classes: int):
    """ResNet-20 for 32x32 images (He et al. 2016, CIFAR variant: 3 stages x 3 blocks)."""
    layers = tf.keras.layers

    def block(x, filters: int, stride: int):
        shortcut = x
        y = layers.Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU()(y)
        y = layers.Conv2D(filters, 3, 1, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        if stride != 1 or shortcut.shape[-1] != filters:
            shortcut = layers.Conv2D(filters, 1, stride, use_bias=False)(shortcut)
            shortcut = layers.BatchNormalization()(shortcut)
        return layers.ReLU()(layers.Add()([y, shortcut]))

    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    for stage, filters in enumerate((16, 32, 64)):
        for index in range(3):
            x = block(x, filters, 2 if stage > 0 and index == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    return layers.Dense(num_classes)(x)


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int,
    vocab_size: int | None = None,
):
    """The Keras model `name`, initialised from `seed` (the same on every rank). Outputs logits.
    `vocab_size`: the token ids a word model's inputs hold (its embedding's rows).

    Layers are named, so variable names (which parameter servers shard by) do not depend on how
    many models the process built before."""
    source = model_source(name)
    if source.user:
        return build_user_model(source, input_shape, num_classes, seed)
    # deferred: TensorFlow; the settings, the sweep's checks and `predict` read this module
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=input_shape)
    if name == "mlp":
        x = layers.Flatten(name="flatten")(inputs)
        x = layers.Dense(128, activation="relu", name="hidden")(x)
        outputs = layers.Dense(num_classes, name="logits")(x)
    elif name == "wide_mlp":
        # Tens of millions of parameters and little compute per byte: communication dominates.
        x = layers.Flatten(name="flatten")(inputs)
        x = layers.Dense(WIDE_MLP_UNITS, activation="relu", name="hidden1")(x)
        x = layers.Dense(WIDE_MLP_UNITS, activation="relu", name="hidden2")(x)
        outputs = layers.Dense(num_classes, name="logits")(x)
    elif name == "cnn":
        if len(input_shape) != 3:
            raise UsageError(
                f"cnn needs image inputs (height x width x channels), got shape {input_shape}"
            )
        x = layers.Conv2D(32, 3, activation="relu", name="conv1")(inputs)
        x = layers.MaxPooling2D(name="pool1")(x)
        x = layers.Conv2D(64, 3, activation="relu", name="conv2")(x)
        x = layers.MaxPooling2D(name="pool2")(x)
        x = layers.Flatten(name="flatten")(x)
        x = layers.Dense(128, activation="relu", name="hidden")(x)
        outputs = layers.Dense(num_classes, name="logits")(x)
    elif name == "resnet20":
        if len(input_shape) != 3:
            raise UsageError(f"resnet20 needs image inputs, got shape {input_shape}")
        outputs = _resnet20(tf, inputs, num_classes)
    elif name == "charlm":
        # Embedding lookups give sparse (IndexedSlices) gradients: only the rows of seen characters.
        x = layers.Embedding(num_classes, 64, name="embedding")(inputs)
        x = layers.Conv1D(128, 5, padding="causal", activation="relu", name="conv1")(x)
        x = layers.Conv1D(
            128, 5, padding="causal", dilation_rate=2, activation="relu", name="conv2"
        )(x)
        x = layers.GlobalAveragePooling1D(name="pool")(x)
        outputs = layers.Dense(num_classes, name="logits")(x)
    elif name == "wordlm":
        # The embedding holds most of the parameters and a batch touches few of its rows.
        if vocab_size is None:
            raise UsageError("wordlm needs --dataset words (its vocabulary sizes the embedding)")
        x = layers.Embedding(vocab_size, WORD_EMBEDDING_DIM, name="embedding")(inputs)
        x = layers.Conv1D(64, 3, padding="causal", activation="relu", name="conv1")(x)
        x = layers.GlobalAveragePooling1D(name="pool")(x)
        outputs = layers.Dense(num_classes, name="logits")(x)
    elif name in KERAS_APPLICATIONS:
        constructor = getattr(tf.keras.applications, KERAS_APPLICATIONS[name])
        try:
            return constructor(
                weights=None,
                input_shape=input_shape,
                classes=num_classes,
                classifier_activation=None,
            )
        except ValueError as exc:
            raise UsageError(f"{name}: {str(exc).splitlines()[0]}") from None
    else:
        raise UsageError(f"unknown model {name!r}")
    return tf.keras.Model(inputs, outputs, name=name)


def build_for_data(name: str, data, seed: int):
    """The model `name` for a loaded data set (its input shape, classes and vocabulary)."""
    return build_model(
        name, data.input_shape, data.num_classes, seed, getattr(data, "vocab_size", None)
    )


def parameter_stats(model) -> dict:
    """Trainable parameter count and bytes: what a gradient exchange moves per step."""
    params = int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))
    param_bytes = int(sum(int(np.prod(v.shape)) * v.dtype.size for v in model.trainable_variables))
    return {"params": params, "param_bytes": param_bytes, "tensors": len(model.trainable_variables)}


def global_norm(arrays) -> float:
    """Global L2 norm of a list of arrays, in float64 so every architecture rounds alike."""
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def parameter_digest(arrays) -> str:
    """A fingerprint of the exact parameter bytes: equal on two ranks only if every bit is."""
    import hashlib

    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]
