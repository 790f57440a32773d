"""Writes small real data sets that ship inside Python packages into a folder, in the forms
archbench reads (nothing is downloaded):

- `wine.csv`: scikit-learn's copy of the UCI wine table (178 wines, 13 measurements, 3 cultivars):
  a table for `--dataset csv:wine.csv` (label column `cultivar`);
- `sunspots.csv`: statsmodels' yearly sunspot numbers 1700-2008: a series for
  `--dataset series:sunspots.csv --feature-columns SUNACTIVITY --loss mse`;
- `fashion-small.npz`: 6,000 training and 1,000 test images of Debian's Fashion-MNIST as
  `x_train, y_train, x_test, y_test`, for `--dataset npz:fashion-small.npz`.

    python examples/datasets.py OUT_FOLDER
"""

import os
import shutil
import sys

import numpy as np


def main(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    from sklearn.datasets import load_wine

    wine = load_wine(as_frame=True).frame.rename(columns={"target": "cultivar"})
    wine["cultivar"] = wine["cultivar"].map(dict(enumerate(load_wine().target_names)))
    wine.to_csv(os.path.join(folder, "wine.csv"), index=False)

    import statsmodels.datasets.sunspots as sunspots

    shutil.copyfile(
        os.path.join(os.path.dirname(sunspots.__file__), "sunspots.csv"),
        os.path.join(folder, "sunspots.csv"),
    )

    from archbench.workloads.data import FASHION_MNIST_DIR, load_idx_dataset

    images = load_idx_dataset("fashion_mnist", FASHION_MNIST_DIR)
    np.savez(
        os.path.join(folder, "fashion-small.npz"),
        x_train=images.x_train[:6000],
        y_train=images.y_train[:6000],
        x_test=images.x_test[:1000],
        y_test=images.y_test[:1000],
    )
    print(f"wrote wine.csv, sunspots.csv and fashion-small.npz in {folder}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/datasets.py OUT_FOLDER")
    main(sys.argv[1])
