r"""Classification data for tuning: train / validation / test splits, standardized on training data.

The validation split holds the users of DP-GIBO (SENSITIVE); the test split is only for
NON-PRIVATE diagnostics. ``synthetic_like`` draws PUBLIC data of the same shape for pilots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["SKLEARN_DATASETS", "ClassificationData", "load_sklearn_classification", "synthetic_like"]

SKLEARN_DATASETS = ("digits", "breast_cancer", "wine", "iris")


@dataclass
class ClassificationData:
    r"""Train / validation / test splits of a classification data set (float32 features).

    Attributes:
        X_train, y_train: ``m x p`` features and ``m`` labels the models are trained on.
        X_val, y_val: ``n x p`` and ``n``: the validation users (SENSITIVE).
        X_test, y_test: Held-out test split, only for NON-PRIVATE diagnostics.
        num_classes: Number of classes.
        name: A label for reports.
    """

    X_train: Tensor
    y_train: Tensor
    X_val: Tensor
    y_val: Tensor
    X_test: Tensor
    y_test: Tensor
    num_classes: int
    name: str = "data"

    @property
    def num_features(self) -> int:
        return self.X_train.shape[1]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.y_train), "validation": len(self.y_val), "test": len(self.y_test)}


def _split_and_standardize(
    X: np.ndarray, y: np.ndarray, *, val_fraction: float, test_fraction: float, seed: int, name: str
) -> ClassificationData:
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if not (0 < val_fraction and 0 < test_fraction and val_fraction + test_fraction < 1):
        raise ValueError("val_fraction and test_fraction must be positive and sum to less than 1.")
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    X_train, X_val, y_train, y_val = train_test_split(
        X_rest, y_rest, test_size=val_fraction / (1 - test_fraction), random_state=seed + 1,
        stratify=y_rest,
    )
    scaler = StandardScaler().fit(X_train)  # training statistics only

    def feats(a):
        return torch.as_tensor(scaler.transform(a), dtype=torch.float32)

    def labels(a):
        return torch.as_tensor(a, dtype=torch.long)

    return ClassificationData(
        feats(X_train), labels(y_train), feats(X_val), labels(y_val), feats(X_test), labels(y_test),
        num_classes=int(len(np.unique(y))), name=name,
    )


def load_sklearn_classification(
    name: str = "digits", *, val_fraction: float = 0.3, test_fraction: float = 0.2, seed: int = 0
) -> ClassificationData:
    r"""A data set that scikit-learn ships, split (stratified) and standardized.

    The features are standardized with the mean and scale of the TRAINING split only.

    Args:
        name: ``"digits"`` (1797 x 64, 10 classes), ``"breast_cancer"``, ``"wine"`` or
            ``"iris"``.
        val_fraction: Fraction of all examples that become validation users.
        test_fraction: Fraction held out as a test split.
        seed: Seed of the splits.

    Returns:
        The ``ClassificationData``.
    """
    from sklearn import datasets

    loaders = {
        "digits": datasets.load_digits,
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
        "iris": datasets.load_iris,
    }
    if name not in loaders:
        raise ValueError(f"Unknown data set {name!r}; choose from {SKLEARN_DATASETS}.")
    X, y = loaders[name](return_X_y=True)
    return _split_and_standardize(
        X, y, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed, name=name
    )


def synthetic_like(data: ClassificationData, *, seed: int = 0) -> ClassificationData:
    r"""A PUBLIC synthetic data set with the shape of ``data`` (for pilots).

    Uses only public facts about ``data`` (split sizes, number of features and classes),
    never its values: ``sklearn.datasets.make_classification`` draws the examples.

    Args:
        data: The sensitive data whose shape is copied.
        seed: Seed of the generator and the splits.

    Returns:
        A ``ClassificationData`` named ``"synthetic"`` with the same split sizes.
    """
    from sklearn.datasets import make_classification

    sizes = data.sizes()
    n = sum(sizes.values())
    p, k = data.num_features, data.num_classes
    X, y = make_classification(
        n_samples=n, n_features=p, n_informative=max(2, min(p, p // 2)), n_redundant=0,
        n_classes=k, n_clusters_per_class=1, class_sep=1.5, random_state=seed,
    )
    return _split_and_standardize(
        X, y, val_fraction=sizes["validation"] / n, test_fraction=sizes["test"] / n,
        seed=seed, name="synthetic",
    )
