r"""The data of the logistic-regression tuning problem: loading, featurizing and splitting.

``load_logistic_data`` returns a ``LogisticData`` (train / validation / test splits in
float64, every row scaled to norm 1) of scikit-learn's breast-cancer data, featurized with
the PUBLISHED feature ranges only (``breast_cancer_ranges``), or of a simulated logistic
model (``synthetic_logistic``). Nothing is fitted on the examples, so the featurization
costs no privacy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.privacy.checks import check_choice, check_positive, check_positive_int
from botorch_dp.utils import child_seeds

__all__ = [
    "LOGISTIC_DATASETS",
    "LogisticData",
    "breast_cancer_ranges",
    "load_logistic_data",
    "synthetic_logistic",
    "unit_rows",
]

#: The data sets ``load_logistic_data`` knows: scikit-learn's bundled breast-cancer data
#: and a synthetic high-dimensional logistic model (Synthetic-L-like).
LOGISTIC_DATASETS: tuple[str, ...] = ("breast_cancer", "synthetic")


@dataclass
class LogisticData:
    r"""Train / validation / test splits for binary logistic regression (float64, unit rows).

    Every row has norm 1 (``unit_rows``), so the public feature bound is ``R = 1`` and,
    with a bias feature, ``‖x̃‖ = √2``.

    Attributes:
        X_train, y_train: ``m x p`` features and ``m`` labels in {0, 1}: what AMP and
            DP-SGD train on (SENSITIVE, training side, add/remove one record).
        X_val, y_val: ``n x p`` and ``n``: the validation users (SENSITIVE, validation
            side, replace one user).
        X_test, y_test: The test split, only for NON-PRIVATE diagnostics.
        name: A label for reports.
        preprocessing: How the features were made (public).
    """

    X_train: Tensor
    y_train: Tensor
    X_val: Tensor
    y_val: Tensor
    X_test: Tensor
    y_test: Tensor
    name: str = "data"
    preprocessing: str = ""

    @property
    def num_features(self) -> int:
        return self.X_train.shape[1]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.y_train), "validation": len(self.y_val), "test": len(self.y_test)}

    def to_classification_data(self) -> ClassificationData:
        r"""The same splits as a ``ClassificationData`` (float32 features, long labels) for
        ``TorchModelTuningObjective`` / Opacus."""
        f = lambda X: X.to(torch.float32)
        lab = lambda y: y.to(torch.long)
        return ClassificationData(
            f(self.X_train),
            lab(self.y_train),
            f(self.X_val),
            lab(self.y_val),
            f(self.X_test),
            lab(self.y_test),
            num_classes=2,
            name=self.name,
        )


def unit_rows(X: Tensor | np.ndarray) -> Tensor:
    r"""Each row divided by its Euclidean norm (a zero row stays zero): a per-record map.

    Args:
        X: An ``m x p`` array of finite features.

    Returns:
        The ``m x p`` float64 tensor with rows of norm 1 (or 0).
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    norms = torch.linalg.vector_norm(X, dim=1, keepdim=True)
    return X / torch.where(norms > 0, norms, torch.ones_like(norms))


def breast_cancer_ranges() -> tuple[np.ndarray, np.ndarray]:
    r"""The published minimum and maximum of each of the 30 breast-cancer features.

    Read from the "Summary Statistics" table of the data set's documentation
    (``load_breast_cancer().DESCR``), not computed from the examples: public knowledge
    about the feature ranges, as a data analyst would have it.

    Returns:
        ``(lower, upper)``, two float64 arrays of length 30 in feature order.
    """
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    rows = re.findall(r"^([a-z ]+ \([a-z ]+\)):\s+([0-9.]+)\s+([0-9.]+)\s*$", bunch.DESCR, flags=re.MULTILINE)
    if len(rows) != len(bunch.feature_names):
        raise RuntimeError(f"Expected {len(bunch.feature_names)} published feature ranges, found {len(rows)}.")
    lower = np.array([float(r[1]) for r in rows])
    upper = np.array([float(r[2]) for r in rows])
    return lower, upper


def synthetic_logistic(
    num_examples: int, num_features: int, *, seed: int, signal: float = 5.0
) -> tuple[Tensor, Tensor]:
    r"""A synthetic logistic model with Gaussian features (Synthetic-L-like).

    ``z_i ~ N(0, I_p)``, ``x_i = z_i/‖z_i‖`` (unit rows); a unit direction ``w*`` drawn
    uniformly from the sphere; ``y_i ~ Bernoulli(sigmoid(signal·√p·x_iᵀw*))``, so the
    logit has standard deviation about ``signal`` whatever ``p``.

    Args:
        num_examples: ``m``.
        num_features: ``p``.
        seed: Seed of the generator (the data are simulated, hence public given it).
        signal: Standard deviation of the true logit.

    Returns:
        ``(X, y)``: ``m x p`` float64 features and ``m`` float64 labels in {0, 1}.
    """
    m = check_positive_int(num_examples, "num_examples")
    p = check_positive_int(num_features, "num_features")
    signal = check_positive(signal, "signal", allow_inf=False)
    gen = torch.Generator().manual_seed(child_seeds([int(seed), 1], 1)[0])
    direction = torch.randn(p, generator=gen, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction)
    X = unit_rows(torch.randn(m, p, generator=gen, dtype=torch.float64))
    prob = torch.sigmoid(signal * math.sqrt(p) * (X @ direction))
    y = (torch.rand(m, generator=gen, dtype=torch.float64) < prob).to(torch.float64)
    return X, y


def load_logistic_data(
    name: str = "breast_cancer",
    *,
    seed: int = 0,
    val_fraction: float = 0.3,
    test_fraction: float = 0.2,
    num_examples: int = 20_000,
    num_features: int = 100,
    signal: float = 5.0,
) -> LogisticData:
    r"""A binary classification data set with unit rows, split (stratified) by ``seed``.

    - ``"breast_cancer"`` (569 x 30, scikit-learn's bundled copy): each feature is mapped
      to ``[−1, 1]`` with the PUBLISHED ranges (``breast_cancer_ranges``; values outside,
      from rounding in the table, are clamped), then each row to norm 1. Nothing is
      fitted on the examples, so the preprocessing costs no privacy.
    - ``"synthetic"``: ``synthetic_logistic(num_examples, num_features, signal)`` drawn
      from ``seed`` (unit rows already).

    Args:
        name: One of ``LOGISTIC_DATASETS``.
        seed: Seed of the split (and of the synthetic data).
        val_fraction: Fraction of all examples that become validation users.
        test_fraction: Fraction held out for the test split.
        num_examples, num_features, signal: Shape and signal of ``"synthetic"``.

    Returns:
        The ``LogisticData``.
    """
    from sklearn.model_selection import train_test_split

    check_choice(name, "name", LOGISTIC_DATASETS)
    if not (0 < val_fraction and 0 < test_fraction and val_fraction + test_fraction < 1):
        raise ValueError("val_fraction and test_fraction must be positive and sum to less than 1.")
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        lower, upper = breast_cancer_ranges()
        X = 2.0 * (np.clip(X, lower, upper) - lower) / (upper - lower) - 1.0
        X, y = unit_rows(X).numpy(), y.astype(np.float64)
        how = "published feature ranges (DESCR) mapped to [-1, 1], then rows scaled to norm 1"
    else:
        X_t, y_t = synthetic_logistic(num_examples, num_features, seed=seed, signal=signal)
        X, y = X_t.numpy(), y_t.numpy()
        how = f"Gaussian features on the unit sphere (p = {num_features}), logistic labels with logit sd {signal:g}"
    split_seed = child_seeds([int(seed), 2], 1)[0] % (2**32)
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=test_fraction, random_state=split_seed, stratify=y
    )
    X_train, X_val, y_train, y_val = train_test_split(
        X_rest, y_rest, test_size=val_fraction / (1 - test_fraction), random_state=split_seed, stratify=y_rest
    )
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)
    return LogisticData(t(X_train), t(y_train), t(X_val), t(y_val), t(X_test), t(y_test), name=name, preprocessing=how)
