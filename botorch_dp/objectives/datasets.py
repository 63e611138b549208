r"""Classification data for tuning: train / validation / test splits, standardized on training data.

The validation split holds the users of DP-GIBO (SENSITIVE); the test split is only for
NON-PRIVATE diagnostics. ``synthetic_like`` draws PUBLIC data of the same shape for pilots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "SKLEARN_DATASETS",
    "ClassificationData",
    "as_features",
    "as_targets",
    "load_sklearn_classification",
    "synthetic_like",
]

SKLEARN_DATASETS = ("digits", "breast_cancer", "wine", "iris")
"""The scikit-learn classification data sets ``load_sklearn_classification`` loads by name."""


def as_features(value: Any, name: str) -> Tensor:
    r"""Features as a tensor: numpy arrays and tensors of any floating dtype keep their dtype
    (the objective casts them to the model's dtype); integer or boolean features become
    torch's default float dtype. A ``ValueError`` names ``name`` otherwise."""
    try:
        tensor = torch.as_tensor(np.asarray(value) if not isinstance(value, Tensor) else value).detach()
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a numpy array or a tensor, got {type(value).__name__}.") from err
    if tensor.is_complex() or tensor.dim() == 0:
        raise ValueError(
            f"{name} must be a real array with one row per example, got {tuple(tensor.shape)} {tensor.dtype}."
        )
    return tensor if tensor.is_floating_point() else tensor.to(torch.get_default_dtype())


def as_targets(value: Any, name: str) -> Tensor:
    r"""Targets as a tensor: integer or boolean class labels become ``torch.long`` (what
    cross-entropy needs); floating targets (regression) keep their dtype."""
    try:
        tensor = torch.as_tensor(np.asarray(value) if not isinstance(value, Tensor) else value).detach()
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a numpy array or a tensor, got {type(value).__name__}.") from err
    if tensor.is_complex() or tensor.dim() == 0:
        raise ValueError(
            f"{name} must be a real array with one entry per example, got {tuple(tensor.shape)} {tensor.dtype}."
        )
    return tensor if tensor.is_floating_point() else tensor.long()


@dataclass
class ClassificationData:
    r"""Train / validation (/ test) splits of a data set, as tensors.

    Features may be numpy arrays or tensors of any floating dtype (kept; the tuning
    objective casts them to the dtype of the model's parameters); integer labels become
    ``torch.long``, floating targets (regression, with a per-example loss such as squared
    error) are kept as they are.

    Attributes:
        X_train, y_train: ``m x p`` features and ``m`` labels the models are trained on.
        X_val, y_val: ``n x p`` and ``n``: the validation users (SENSITIVE).
        X_test, y_test: Optional held-out test split, only for NON-PRIVATE diagnostics.
        num_classes: Number of classes (default: one more than the largest integer label;
            ``None`` for floating targets).
        name: A label for reports.
    """

    X_train: Tensor
    y_train: Tensor
    X_val: Tensor
    y_val: Tensor
    X_test: Tensor | None = None
    y_test: Tensor | None = None
    num_classes: int | None = None
    name: str = "data"

    def __post_init__(self) -> None:
        if (self.X_test is None) != (self.y_test is None):
            raise ValueError("Give both X_test and y_test, or neither.")
        splits = ("train", "val") + (() if self.X_test is None else ("test",))
        for split in splits:
            x_name, y_name = f"X_{split}", f"y_{split}"
            X, y = as_features(getattr(self, x_name), x_name), as_targets(getattr(self, y_name), y_name)
            if X.shape[0] != y.shape[0]:
                raise ValueError(f"{x_name} has {X.shape[0]} rows but {y_name} has {y.shape[0]}.")
            if split != "train" and X.shape[1:] != self.X_train.shape[1:]:
                raise ValueError(
                    f"{x_name} has feature shape {tuple(X.shape[1:])}, X_train {tuple(self.X_train.shape[1:])}."
                )
            if split != "train" and y.is_floating_point() != self.y_train.is_floating_point():
                raise ValueError(f"{y_name} and y_train must both be class labels or both floating targets.")
            setattr(self, x_name, X)
            setattr(self, y_name, y)
        if self.num_classes is None and self.is_classification:
            labels = [t for t in (self.y_train, self.y_val, self.y_test) if t is not None and t.numel()]
            self.num_classes = max(int(t.max()) for t in labels) + 1

    @property
    def is_classification(self) -> bool:
        r"""Integer class labels (rather than floating targets)."""
        return not self.y_train.is_floating_point()

    @property
    def num_features(self) -> int:
        return self.X_train.shape[1]

    def sizes(self) -> dict[str, int]:
        return {
            "train": len(self.y_train),
            "validation": len(self.y_val),
            "test": 0 if self.y_test is None else len(self.y_test),
        }


def _split_and_standardize(
    X: np.ndarray, y: np.ndarray, *, val_fraction: float, test_fraction: float, seed: int, name: str
) -> ClassificationData:
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if not (0 < val_fraction and 0 < test_fraction and val_fraction + test_fraction < 1):
        raise ValueError("val_fraction and test_fraction must be positive and sum to less than 1.")
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=test_fraction, random_state=seed, stratify=y)
    X_train, X_val, y_train, y_val = train_test_split(
        X_rest, y_rest, test_size=val_fraction / (1 - test_fraction), random_state=seed + 1, stratify=y_rest
    )
    scaler = StandardScaler().fit(X_train)  # training statistics only

    def feats(a):
        return torch.as_tensor(scaler.transform(a), dtype=torch.float32)

    def labels(a):
        return torch.as_tensor(a, dtype=torch.long)

    return ClassificationData(
        feats(X_train),
        labels(y_train),
        feats(X_val),
        labels(y_val),
        feats(X_test),
        labels(y_test),
        num_classes=int(len(np.unique(y))),
        name=name,
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
    return _split_and_standardize(X, y, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed, name=name)


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

    if not data.is_classification:
        raise ValueError("synthetic_like draws classification data; data has floating targets.")
    sizes = data.sizes()
    if sizes["test"] == 0:
        raise ValueError("synthetic_like copies the three split sizes; data has no test split.")
    n = sum(sizes.values())
    p, k = data.num_features, data.num_classes
    X, y = make_classification(
        n_samples=n,
        n_features=p,
        n_informative=max(2, min(p, p // 2)),
        n_redundant=0,
        n_classes=k,
        n_clusters_per_class=1,
        class_sep=1.5,
        random_state=seed,
    )
    return _split_and_standardize(
        X, y, val_fraction=sizes["validation"] / n, test_fraction=sizes["test"] / n, seed=seed, name="synthetic"
    )
