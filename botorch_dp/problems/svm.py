r"""Tuning an RBF support vector regression (ARD length-scales, ε, C, γ) on validation data.

Sopa et al. Example 4.2 / Appendix E.2, short version §4.4: one user per validation point, squared error.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.utils import child_seeds, project_to_box

#: Box of the non-length-scale parameters (Sopa et al. Appendix E.2).
LOG_LENGTHSCALE_BOUNDS = (-2.0, 2.0)
EPSILON_BOUNDS = (0.01, 1.0)
C_BOUNDS = (0.1, 3.0)
GAMMA_BOUNDS = (0.01, 5.0)

_DATASETS = ("friedman1", "breast_cancer", "diabetes")


class _Split(NamedTuple):
    r"""Standardized training and validation data of a ``KernelSVMRegression``."""

    dataset: str
    feature_indices: np.ndarray
    train_indices: np.ndarray
    val_indices: np.ndarray
    train_X: np.ndarray
    train_Y: np.ndarray
    val_X: np.ndarray
    val_Y: np.ndarray


def _load_and_split(
    dataset: str,
    n_train: int | None,
    n_val: int | None,
    num_features: int | None,
    *,
    friedman_noise: float,
    data: tuple[np.ndarray, np.ndarray] | None,
    normalize_by_num_features: bool,
    data_seed: int,
) -> _Split:
    r"""Load or generate the data, split the rows, subsample features and standardize.

    The draws (the ``"friedman1"`` generator's seed, the feature subset, the row
    permutation) come in this order from one ``numpy`` generator seeded with
    ``data_seed``. Features and target are standardized with TRAINING statistics.

    Args:
        dataset: ``"friedman1"``, ``"breast_cancer"`` or ``"diabetes"`` (ignored when
            ``data`` is given).
        n_train: The number of training rows (None: see ``KernelSVMRegression``).
        n_val: The number of validation rows (None: see ``KernelSVMRegression``).
        num_features: The number of features (None: all).
        friedman_noise: The noise std of the ``"friedman1"`` target.
        data: Optional ``(X, y)`` with X an ``N x P`` and y an ``N`` array.
        normalize_by_num_features: Divide the standardized features by √p.
        data_seed: Seed of the data generator.

    Returns:
        The ``_Split`` (dataset name, feature and row indices, standardized arrays).
    """
    from sklearn.datasets import load_breast_cancer, load_diabetes, make_friedman1

    rng = np.random.default_rng(data_seed)
    if data is None:
        if dataset == "friedman1":
            n_train = 1000 if n_train is None else n_train
            n_val = 1000 if n_val is None else n_val
            p = 30 if num_features is None else num_features
            X_all, y_all = make_friedman1(
                n_samples=n_train + n_val, n_features=p, noise=friedman_noise, random_state=int(rng.integers(2**31 - 1))
            )
            num_features = None  # all generated features are used
        elif dataset == "breast_cancer":
            X_all, y_all = load_breast_cancer(return_X_y=True)
        elif dataset == "diabetes":
            X_all, y_all = load_diabetes(return_X_y=True)
        else:
            raise ValueError(f"Unknown dataset {dataset!r}; choose from {_DATASETS}.")
    else:
        X_all, y_all = data
        dataset = "custom"
    X_all = np.asarray(X_all, dtype=np.float64)
    y_all = np.asarray(y_all, dtype=np.float64).reshape(-1)
    if X_all.ndim != 2 or X_all.shape[0] != y_all.shape[0]:
        raise ValueError("data must be an N x P array and an N array.")
    N, P = X_all.shape
    if n_train is None:
        n_train = min(1000, N // 2)
    if n_val is None:
        n_val = min(9000, N - n_train)
    if n_train < 2 or n_val < 1 or n_train + n_val > N:
        raise ValueError(f"Cannot take {n_train} training and {n_val} validation rows from {N}.")
    if num_features is None or num_features >= P:
        features = np.arange(P)
    else:
        features = np.sort(rng.choice(P, size=num_features, replace=False))
    perm = rng.permutation(N)
    train_idx, val_idx = perm[:n_train], perm[n_train : n_train + n_val]

    X_tr, X_va = X_all[np.ix_(train_idx, features)], X_all[np.ix_(val_idx, features)]
    y_tr, y_va = y_all[train_idx], y_all[val_idx]
    x_mean, x_std = X_tr.mean(axis=0), X_tr.std(axis=0)
    x_std = np.where(x_std > 0, x_std, 1.0)
    if normalize_by_num_features:
        # E‖x − x'‖² = 2 for standardized features divided by √p, so the
        # paper's γ ∈ [0.01, 5] spans smooth to wiggly fits for any p; on
        # merely standardized features (E‖x − x'‖² = 2p) the kernel matrix
        # is ≈ I over most of the box and the loss is flat there.
        x_std = x_std * np.sqrt(len(features))
    y_mean, y_std = y_tr.mean(), y_tr.std()
    y_std = y_std if y_std > 0 else 1.0
    return _Split(
        dataset,
        features,
        train_idx,
        val_idx,
        (X_tr - x_mean) / x_std,
        (y_tr - y_mean) / y_std,
        (X_va - x_mean) / x_std,
        (y_va - y_mean) / y_std,
    )


class KernelSVMRegression(PerUserProblem):
    r"""Validation loss of ``sklearn.svm.SVR(kernel="rbf")`` as a function of its hyperparameters.

    θ = (log ℓ_1, ..., log ℓ_p, ε, C, γ) with d = p + 3 (p features). The SVR is
    fit on training features scaled as x_k · exp(−log ℓ_k), so its kernel is
    k(x, x') = exp(−γ Σ_k (x_k − x'_k)² / ℓ_k²). The box (Appendix E.2) is
    log ℓ_k ∈ [-2, 2], ε ∈ [0.01, 1], C ∈ [0.1, 3], γ ∈ [0.01, 5]. θ outside
    the box is evaluated at its projection. Per-user loss for validation point
    i is (ŷ_θ(x_i) − y_i)² on the standardized target scale.

    Features are standardized with TRAINING statistics only (zero-variance
    training features are only centred) and then divided by √p, so that
    E‖x − x'‖² = 2 whatever p and γ ∈ [0.01, 5] is on the data's scale
    (``normalize_by_num_features=False`` keeps plain standardization); the
    target is standardized with training statistics. Data sources:

    - ``"friedman1"`` (default): ``sklearn.datasets.make_friedman1`` with p = 30
      features (5 informative, 25 pure noise) and noise std 1, generated from
      the seed; d = 33 as in Sopa et al., short version, §4.4; 1000 training and 1000 validation
      points. Irrelevant features reward long length-scales, so the ARD part
      of θ matters.
    - ``"breast_cancer"``: the 30 features of the shipped Wisconsin data with
      the 0/1 diagnosis regressed as a number (d = 33, 569 rows).
    - ``"diabetes"``: the shipped diabetes data (p = 10, d = 13, 442 rows).
    - ``data=(X, y)`` arrays, e.g. via ``from_ct_slice_csv`` for the UCI
      "CT slice" data of the paper (1000 train, 9000 validation, 100 random
      features, d = 103).

    Each evaluation fits one SVR per candidate (a loop over model fits, not
    over users); about 0.1 s per candidate for 1000 × 30 training data.
    """

    name = "svm"

    def __init__(
        self,
        dataset: str = "friedman1",
        n_train: int | None = None,
        n_val: int | None = None,
        num_features: int | None = None,
        friedman_noise: float = 1.0,
        data: tuple[np.ndarray, np.ndarray] | None = None,
        normalize_by_num_features: bool = True,
        seed: int = 0,
        observation_noise_std: float = 0.0,
    ) -> None:
        r"""Load or generate the data, split, subsample features and standardize.

        Args:
            dataset: One of ``"friedman1"``, ``"breast_cancer"``, ``"diabetes"``;
                ignored when ``data`` is given.
            n_train: The number of training rows (default: 1000, or at most
                half the rows of a fixed data set).
            n_val: The number of validation rows = users n (default: 1000 for
                ``"friedman1"``, otherwise the remaining rows, at most 9000).
            num_features: The number p of features; for ``"friedman1"`` the
                number generated (default 30), otherwise a random subset of the
                columns (default: all).
            friedman_noise: The noise std of the ``"friedman1"`` target.
            data: Optional ``(X, y)`` with X an ``N x P`` and y an ``N`` array.
            normalize_by_num_features: Divide the standardized features by
                √p (see the class docstring).
            seed: Seed of the split, the feature subset, the generated data and
                the observation-noise generator.
            observation_noise_std: The evaluation noise std (see base class).
        """
        # The data are needed before the base class is set up (they fix d);
        # derive the same data seed that the base class will hold.
        split = _load_and_split(
            dataset,
            n_train,
            n_val,
            num_features,
            friedman_noise=friedman_noise,
            data=data,
            normalize_by_num_features=normalize_by_num_features,
            data_seed=child_seeds(int(seed), 2)[0],
        )
        p = len(split.feature_indices)
        lower = [LOG_LENGTHSCALE_BOUNDS[0]] * p + [EPSILON_BOUNDS[0], C_BOUNDS[0], GAMMA_BOUNDS[0]]
        upper = [LOG_LENGTHSCALE_BOUNDS[1]] * p + [EPSILON_BOUNDS[1], C_BOUNDS[1], GAMMA_BOUNDS[1]]
        super().__init__(
            bounds=torch.tensor([lower, upper], dtype=torch.float64),
            num_users=len(split.val_indices),
            seed=seed,
            observation_noise_std=observation_noise_std,
        )
        self.dataset = split.dataset
        self.num_features = p
        #: Column indices of the features used (into the source data).
        self.feature_indices = split.feature_indices
        #: Row indices (into the source data) of the training / validation rows.
        self.train_indices, self.val_indices = split.train_indices, split.val_indices
        #: Standardized training data (``n_train x p`` and ``n_train`` arrays).
        self.train_X, self.train_Y = split.train_X, split.train_Y
        #: SENSITIVE standardized validation data, one user per row.
        self.val_X, self.val_Y = split.val_X, split.val_Y
        #: Names of the coordinates of θ.
        self.parameter_names = [f"log_lengthscale_{k}" for k in range(p)] + ["epsilon", "C", "gamma"]

    @classmethod
    def from_ct_slice_csv(
        cls,
        path: str | Path,
        n_train: int = 1000,
        n_val: int = 9000,
        num_features: int | None = 100,
        seed: int = 0,
        observation_noise_std: float = 0.0,
        **kwargs,
    ) -> KernelSVMRegression:
        r"""Build the paper's problem from a local copy of the UCI "CT slice" CSV.

        The file (``slice_localization_data.csv``; never downloaded here) has
        the header ``patientId, value0, ..., value383, reference``; the 384
        ``value*`` columns are the features and ``reference`` (the relative
        slice location) is the target; ``patientId`` is dropped.

        Args:
            path: Path to the CSV file.
            n_train: The number of training rows (paper: 1000).
            n_val: The number of validation rows = users (paper: 9000).
            num_features: The number of randomly chosen features (paper: 100);
                None keeps all.
            seed: Seed of the split, the feature subset and the noise.
            observation_noise_std: The evaluation noise std (see base class).
            **kwargs: Further constructor arguments
                (``normalize_by_num_features``).

        Returns:
            A ``KernelSVMRegression`` with d = num_features + 3.
        """
        path = Path(path)
        with path.open(newline="") as fh:
            header = [h.strip() for h in next(csv.reader(fh))]
        if len(header) < 3 or header[0] != "patientId" or header[-1] != "reference":
            raise ValueError("Expected columns 'patientId, value0, ..., reference' in the CT-slice CSV.")
        expected = [f"value{k}" for k in range(len(header) - 2)]
        if header[1:-1] != expected:
            raise ValueError("Feature columns must be named value0, value1, ... in order.")
        table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
        X, y = table[:, 1:-1], table[:, -1]
        return cls(
            data=(X, y),
            n_train=n_train,
            n_val=n_val,
            num_features=num_features,
            seed=seed,
            observation_noise_std=observation_noise_std,
            **kwargs,
        )

    def split_parameters(self, theta: Tensor) -> tuple[np.ndarray, float, float, float]:
        r"""Map one θ (projected onto the box) to SVR arguments.

        Args:
            theta: A ``d``-dim tensor.

        Returns:
            The ``p``-dim feature scales exp(−log ℓ), ε, C and γ.
        """
        theta = project_to_box(theta, self.bounds)
        t = theta.detach().cpu().numpy()
        p = self.num_features
        return np.exp(-t[:p]), float(t[p]), float(t[p + 1]), float(t[p + 2])

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-validation-point squared errors of the fitted SVR.

        Args:
            X: A ``q x d``-dim float64 tensor.

        Returns:
            A ``q x n``-dim tensor.
        """
        from sklearn.svm import SVR

        out = np.empty((X.shape[0], self.num_users), dtype=np.float64)
        for j, theta in enumerate(X):
            scale, epsilon, C, gamma = self.split_parameters(theta)
            model = SVR(kernel="rbf", epsilon=epsilon, C=C, gamma=gamma)
            model.fit(self.train_X * scale, self.train_Y)
            out[j] = (model.predict(self.val_X * scale) - self.val_Y) ** 2
        return torch.from_numpy(out)
