"""What the starter study trains: Fashion-MNIST where its files are readable here (Debian's
dataset-fashion-mnist, or --data-dir), else generated data of the same shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from archbench.errors import UsageError

# The models that read 28x28 images, cheapest first; the starter trains the first, and its
# comments name the others.
IMAGE_MODELS = ("mlp", "cnn", "resnet20", "wide_mlp")


@dataclass
class Workload:
    fixed: dict[str, object]  # the spec's fixed settings for the data and the model
    found: str  # a sentence for the comments: what was found and where
    other_models: list[str] = field(default_factory=list)


def find(data_dir: str | None = None) -> Workload:
    # deferred: archbench.data loads numpy, which `archbench init --help` does not need
    from archbench.data import FASHION_MNIST_DIR, check_available

    folder = data_dir or FASHION_MNIST_DIR
    try:
        check_available(SimpleNamespace(dataset="fashion_mnist", data_dir=data_dir))
    except UsageError as exc:
        if data_dir:  # asked for: a folder that does not hold the files is bad input
            raise
        fixed: dict[str, object] = {
            "dataset": "synthetic",
            "synthetic_shape": "28x28x1",
            "synthetic_classes": 10,
            "model": IMAGE_MODELS[0],
        }
        why = str(exc).splitlines()[0]
        return Workload(fixed, f"generated data (Fashion-MNIST not readable here: {why})",
                        list(IMAGE_MODELS[1:]))  # fmt: skip
    fixed = {"dataset": "fashion_mnist", "model": IMAGE_MODELS[0], "eval_samples": 2000}
    if data_dir:
        fixed["data_dir"] = data_dir
    return Workload(fixed, f"Fashion-MNIST in {folder}", list(IMAGE_MODELS[1:]))
