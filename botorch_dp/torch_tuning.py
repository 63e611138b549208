r"""Private tuning of the continuous hyperparameters of a torch model with DP-GIBO.

``TorchModelTuningObjective`` maps parameters θ (``q x d``) to the ``q x n`` per-user
validation losses of a model trained at each θ, optionally with Opacus DP-SGD whose
training runs are recorded in a ``PrivacyLedger``; the rest are the pieces it is built from.

The objective is what ``DPGIBO.run`` consumes. Its outputs are SENSITIVE (one loss per
validation example); only the DP-GIBO release computed from them is private. Anything
else that looks at the validation or test data (``evaluate_non_private``) is a
NON-PRIVATE diagnostic.

Coordinates: DP-GIBO works on the unit cube ``[0, 1]^d``, so that one kernel
length-scale, one search radius and one step size fit every hyperparameter; a
``SearchSpace`` maps a point of the cube to natural units (log-uniformly for
log-scaled hyperparameters such as the learning rate).
"""

from __future__ import annotations

import math
import secrets
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = [
    "ClassificationData",
    "DPSGDConfig",
    "Hyperparameter",
    "SearchSpace",
    "TorchModelTuningObjective",
    "TrainingConfig",
    "TrainingRun",
    "default_mlp_space",
    "estimate_training_noise_variance",
    "load_sklearn_classification",
    "make_mlp",
    "per_example_cross_entropy",
    "planned_dp_run",
    "synthetic_like",
    "train_model",
]

SKLEARN_DATASETS = ("digits", "breast_cancer", "wine", "iris")


# ---------------------------------------------------------------------------- search space
@dataclass(frozen=True)
class Hyperparameter:
    r"""A continuous hyperparameter with a public range.

    Attributes:
        name: The key under which the natural value is passed to the model and trainer.
        lower: Lower end of the range in natural units.
        upper: Upper end of the range in natural units.
        log_scale: Search ``log10`` of the value (``lower`` must then be positive).
    """

    name: str
    lower: float
    upper: float
    log_scale: bool = False

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise ValueError(f"{self.name}: lower must be below upper.")
        if self.log_scale and self.lower <= 0:
            raise ValueError(f"{self.name}: a log-scaled range must be positive.")

    @property
    def search_range(self) -> tuple[float, float]:
        r"""The range in search units (``log10`` for log-scaled hyperparameters)."""
        if self.log_scale:
            return math.log10(self.lower), math.log10(self.upper)
        return float(self.lower), float(self.upper)


class SearchSpace:
    r"""Maps the unit cube ``[0, 1]^d`` that DP-GIBO searches to natural hyperparameters.

    Coordinate ``u_j ∈ [0, 1]`` becomes ``s_j = a_j + u_j (b_j − a_j)`` in search units
    (``[a_j, b_j]`` = ``Hyperparameter.search_range``) and then ``10^{s_j}`` for
    log-scaled hyperparameters, ``s_j`` otherwise.

    Args:
        hyperparameters: The ``d`` hyperparameters, in the order of θ's coordinates.
    """

    def __init__(self, hyperparameters: Sequence[Hyperparameter]) -> None:
        self.hyperparameters = tuple(hyperparameters)
        if not self.hyperparameters:
            raise ValueError("A search space needs at least one hyperparameter.")
        names = [h.name for h in self.hyperparameters]
        if len(set(names)) != len(names):
            raise ValueError(f"Hyperparameter names must be unique, got {names}.")

    @property
    def dim(self) -> int:
        return len(self.hyperparameters)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hyperparameters]

    @property
    def bounds(self) -> Tensor:
        r"""``2 x d`` float64 tensor of the unit cube (the box Θ of DP-GIBO)."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)

    def to_search_units(self, theta: Tensor) -> Tensor:
        r"""Unit-cube coordinates to search units (``log10`` for log-scaled ones).

        Args:
            theta: A ``batch_shape x d`` tensor in ``[0, 1]^d``.

        Returns:
            A ``batch_shape x d`` float64 tensor.
        """
        theta = torch.as_tensor(theta, dtype=torch.float64)
        lo, hi = torch.tensor([h.search_range for h in self.hyperparameters], dtype=torch.float64).T
        return lo + theta.clamp(0.0, 1.0) * (hi - lo)

    def to_natural(self, theta: Tensor) -> list[dict[str, float]] | dict[str, float]:
        r"""Unit-cube coordinates to natural hyperparameter values.

        Args:
            theta: A ``d`` tensor or a ``q x d`` tensor in ``[0, 1]^d`` (values outside are
                clamped).

        Returns:
            ``{name: value}`` for a ``d`` tensor, a list of ``q`` such dicts otherwise.
        """
        s = self.to_search_units(theta)
        single = s.dim() == 1
        rows = []
        for row in s.reshape(-1, self.dim).tolist():
            rows.append({
                h.name: (10.0**v if h.log_scale else v) for h, v in zip(self.hyperparameters, row)
            })
        return rows[0] if single else rows

    def from_natural(self, values: Mapping[str, float]) -> Tensor:
        r"""Natural hyperparameter values to unit-cube coordinates.

        Args:
            values: ``{name: value}`` with every hyperparameter of the space.

        Returns:
            A ``d`` float64 tensor.
        """
        out = []
        for h in self.hyperparameters:
            v = float(values[h.name])
            v = math.log10(v) if h.log_scale else v
            a, b = h.search_range
            out.append((v - a) / (b - a))
        return torch.tensor(out, dtype=torch.float64)

    def describe(self) -> list[dict[str, Any]]:
        r"""The space as plain values (for a JSON report)."""
        return [
            {"name": h.name, "lower": h.lower, "upper": h.upper, "log_scale": h.log_scale}
            for h in self.hyperparameters
        ]


def default_mlp_space() -> SearchSpace:
    r"""θ = (learning rate, weight decay, dropout rate) of an SGD-trained MLP.

    Learning rate in ``[1e-4, 0.3]`` and weight decay in ``[1e-6, 1e-1]`` (both searched
    in ``log10``), dropout in ``[0, 0.5]``. Public, chosen without looking at any data.
    """
    return SearchSpace([
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ])


# ---------------------------------------------------------------------------- data
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


# ---------------------------------------------------------------------------- training
@dataclass
class TrainingConfig:
    r"""Public settings of the training run behind each evaluation.

    Attributes:
        epochs: Passes over the training split.
        batch_size: Mini-batch size (the expected batch size under Poisson sampling).
        momentum: SGD momentum.
        hidden_sizes: Widths of the hidden layers of the default MLP.
        seed: Seed of the initialization, dropout masks and (without DP) shuffling, so
            an evaluation is a deterministic function of θ.
        num_threads: torch intra-op threads while training (restored afterwards); small
            models train several times faster on one thread, especially on a busy
            machine. ``None`` keeps torch's setting.
    """

    epochs: int = 10
    batch_size: int = 64
    momentum: float = 0.9
    hidden_sizes: tuple[int, ...] = (64,)
    seed: int = 0
    num_threads: int | None = 1


@dataclass
class DPSGDConfig:
    r"""Opacus DP-SGD settings of every training run (Poisson sampling).

    Attributes:
        noise_multiplier: Noise standard deviation over ``max_grad_norm``.
        max_grad_norm: Per-example gradient clipping norm.
    """

    noise_multiplier: float = 1.0
    max_grad_norm: float = 1.0


@dataclass(frozen=True)
class TrainingRun:
    r"""One DP-SGD training run as the accountant sees it.

    Attributes:
        run_id: The id under which it is recorded in the ledger.
        noise_multiplier: DP-SGD σ.
        sample_rate: Poisson sampling rate ``q``.
        steps: Optimizer steps.
    """

    run_id: str
    noise_multiplier: float
    sample_rate: float
    steps: int


def make_mlp(
    num_features: int, num_classes: int, hidden_sizes: Sequence[int] = (64,), dropout: float = 0.0
) -> nn.Module:
    r"""``Linear → ReLU → Dropout`` blocks and a linear output layer (Opacus-compatible).

    Args:
        num_features: ``p``.
        num_classes: Number of outputs (logits).
        hidden_sizes: Widths of the hidden layers.
        dropout: Dropout rate after each hidden layer.

    Returns:
        The ``nn.Sequential`` (float32).
    """
    layers: list[nn.Module] = []
    width = num_features
    for h in hidden_sizes:
        layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(float(dropout))]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def _spawn_seeds(seed: int, num: int) -> list[int]:
    r"""``num`` independent 63-bit seeds derived from ``seed`` (numpy's ``SeedSequence``)."""
    children = np.random.SeedSequence(seed).spawn(num)
    return [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for c in children]


def _batches_per_epoch(num_examples: int, batch_size: int) -> int:
    return math.ceil(num_examples / batch_size)


def planned_dp_run(num_examples: int, training: TrainingConfig, dp_sgd: DPSGDConfig) -> tuple[float, float, int]:
    r"""What one DP-SGD run will spend, known before it touches the data.

    Opacus's Poisson loader samples with rate ``1 / len(loader)`` and takes
    ``len(loader)`` steps per epoch, ``len(loader) = ⌈m / batch_size⌉``.

    Args:
        num_examples: ``m``, the size of the training split.
        training: The ``TrainingConfig`` (epochs, batch size).
        dp_sgd: The ``DPSGDConfig``.

    Returns:
        ``(noise_multiplier, sample_rate, steps)`` as an Opacus history entry.
    """
    k = _batches_per_epoch(num_examples, training.batch_size)
    return float(dp_sgd.noise_multiplier), 1.0 / k, training.epochs * k


def train_model(
    params: Mapping[str, float],
    X: Tensor,
    y: Tensor,
    training: TrainingConfig,
    *,
    model_fn: Callable[[Mapping[str, float]], nn.Module],
    dp_sgd: DPSGDConfig | None = None,
    noise_seed: int | None = None,
) -> tuple[nn.Module, tuple[float, float, int] | None]:
    r"""Train a model with SGD (or Opacus DP-SGD) for the hyperparameters ``params``.

    The initialization and the dropout masks come from ``training.seed`` (torch's global
    generator is forked, the caller's random state is untouched); without DP the
    shuffling does too, so the model is a deterministic function of ``params``. With
    DP-SGD the Poisson sampling and the gradient noise come from ``noise_seed``, which
    must differ between runs: DP-SGD's guarantee and its composition over runs assume
    fresh, independent noise (a seed known to an adversary voids it).

    Args:
        params: Natural hyperparameter values; ``lr`` is required, ``weight_decay``
            optional; all are passed to ``model_fn``.
        X: ``m x p`` float32 training features.
        y: ``m`` training labels.
        training: The ``TrainingConfig``.
        model_fn: Builds the (untrained) model from ``params``.
        dp_sgd: Train with Opacus DP-SGD with these settings.
        noise_seed: Seed of the DP-SGD sampler and noise (required with ``dp_sgd``).

    Returns:
        The trained model (in eval mode, unwrapped from Opacus) and, with ``dp_sgd``,
        Opacus's accountant history of the run as ``(noise_multiplier, sample_rate, steps)``.
    """
    threads = torch.get_num_threads()
    if training.num_threads is not None:
        torch.set_num_threads(training.num_threads)
    try:
        return _train_model(params, X, y, training, model_fn=model_fn, dp_sgd=dp_sgd, noise_seed=noise_seed)
    finally:
        torch.set_num_threads(threads)


def _train_model(
    params: Mapping[str, float],
    X: Tensor,
    y: Tensor,
    training: TrainingConfig,
    *,
    model_fn: Callable[[Mapping[str, float]], nn.Module],
    dp_sgd: DPSGDConfig | None,
    noise_seed: int | None,
) -> tuple[nn.Module, tuple[float, float, int] | None]:
    if dp_sgd is not None and noise_seed is None:
        raise ValueError("DP-SGD training needs a noise_seed that differs between runs.")
    dataset = TensorDataset(X, y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        model = model_fn(params)
        optimizer = torch.optim.SGD(
            model.parameters(), lr=float(params["lr"]), momentum=training.momentum,
            weight_decay=float(params.get("weight_decay", 0.0)),
        )
        if dp_sgd is None:
            loader_seed = training.seed
        else:  # independent streams for the Poisson sampler and the gradient noise
            loader_seed, gradient_noise_seed = _spawn_seeds(int(noise_seed), 2)
        loader_gen = torch.Generator().manual_seed(loader_seed)
        loader = DataLoader(dataset, batch_size=training.batch_size, shuffle=True, generator=loader_gen)
        history = None
        if dp_sgd is not None:
            from opacus import PrivacyEngine

            with warnings.catch_warnings():
                # reproducible noise is intended here (see the docstring); say it once there
                warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
                engine = PrivacyEngine(accountant="rdp")
                model, optimizer, loader = engine.make_private(
                    module=model, optimizer=optimizer, data_loader=loader,
                    noise_multiplier=dp_sgd.noise_multiplier, max_grad_norm=dp_sgd.max_grad_norm,
                    poisson_sampling=True,
                    noise_generator=torch.Generator().manual_seed(gradient_noise_seed),
                )
        model.train()
        with warnings.catch_warnings():
            # Opacus's hooks on the first layer fire without input gradients: harmless
            warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")
            for _ in range(training.epochs):
                for xb, yb in loader:
                    optimizer.zero_grad(set_to_none=True)
                    if xb.shape[0] == 0:  # an empty Poisson batch still takes a (noise-only) step
                        out = model(xb)
                        loss = out.sum() * 0.0
                    else:
                        loss = F.cross_entropy(model(xb), yb)
                    loss.backward()
                    optimizer.step()
        if dp_sgd is not None:
            entries = engine.accountant.history  # run-length encoded: one entry per run
            if len(entries) != 1:
                raise RuntimeError(f"Expected one accountant entry for the run, got {entries}.")
            s, q, steps = entries[0]
            history = (float(s), float(q), int(steps))
            model = model._module  # drop Opacus's per-sample-gradient hooks
            model.zero_grad(set_to_none=True)
    model.eval()
    return model, history


def per_example_cross_entropy(
    model: nn.Module, X: Tensor, y: Tensor, *, loss_cap: float | None = None
) -> Tensor:
    r"""Cross-entropy of each example under ``model`` (in eval mode, no gradients).

    Args:
        model: A classifier returning ``n x k`` logits.
        X: ``n x p`` features.
        y: ``n`` labels.
        loss_cap: If given, losses above it and non-finite ones (a diverged model)
            become ``loss_cap``. A public constant, so the losses stay a fixed function
            of the model; the privacy guarantee rests on clipping either way.

    Returns:
        An ``n`` float64 tensor.
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = F.cross_entropy(model(X), y, reduction="none").to(torch.float64)
    model.train(was_training)
    if loss_cap is not None:
        losses = torch.where(torch.isfinite(losses), losses, torch.full_like(losses, loss_cap))
        losses = losses.clamp(max=loss_cap)
    return losses


# ---------------------------------------------------------------------------- objective
class TorchModelTuningObjective:
    r"""θ (``q x d``, unit cube) ↦ ``q x n`` per-user validation losses of a trained model.

    For each row of θ: map it to natural hyperparameters with ``space``, train a fresh
    model on the training split (``train_model``), and return each validation example's
    loss (default: cross-entropy, capped at ``loss_cap``). Without DP-SGD each evaluation
    is a deterministic function of θ and ``training.seed``. With ``dp_sgd``, every
    training run uses fresh DP-SGD noise from a seed derived from ``noise_seed`` and the
    run's index, and is recorded in ``ledger`` (checked against its training budget
    BEFORE training, recorded from Opacus's own accountant history after).

    The returned losses are SENSITIVE; pass the objective to ``DPGIBO.run``.

    Example:
        >>> data = load_sklearn_classification("digits")
        >>> objective = TorchModelTuningObjective(data, default_mlp_space())
        >>> result = DPGIBO(DPGIBOConfig(bounds=objective.bounds, kernel=k)).run(objective)

    Args:
        data: A ``ClassificationData`` (or anything with ``X_train``, ``y_train``,
            ``X_val``, ``y_val``; ``X_test``/``y_test`` for diagnostics).
        space: The ``SearchSpace`` (default ``default_mlp_space()``).
        model_fn: ``params -> nn.Module``; default an MLP (``make_mlp``) with
            ``training.hidden_sizes`` and ``params["dropout"]``.
        training: The ``TrainingConfig``.
        dp_sgd: Train every candidate with Opacus DP-SGD.
        ledger: ``PrivacyLedger`` that records the DP-SGD runs (a fresh one if None).
        noise_seed: Base seed of the DP-SGD noise (see ``train_model``); ``None`` draws it
            from OS entropy, so that nobody can reproduce the noise (runs are then not
            reproducible).
        loss_cap: Cap of the per-user losses (see ``per_example_cross_entropy``).
        per_example_loss: Optional ``(model, X_val, y_val) -> n`` losses replacing the
            capped cross-entropy.
        run_prefix: Prefix of the ledger's run ids.
    """

    def __init__(
        self,
        data: ClassificationData,
        space: SearchSpace | None = None,
        *,
        model_fn: Callable[[Mapping[str, float]], nn.Module] | None = None,
        training: TrainingConfig | None = None,
        dp_sgd: DPSGDConfig | None = None,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = 0,
        loss_cap: float = 20.0,
        per_example_loss: Callable[[nn.Module, Tensor, Tensor], Tensor] | None = None,
        run_prefix: str = "eval",
    ) -> None:
        self.data = data
        self.space = space if space is not None else default_mlp_space()
        self.training = training if training is not None else TrainingConfig()
        if model_fn is None:
            num_features, num_classes = data.X_train.shape[1], int(data.num_classes)
            hidden = self.training.hidden_sizes

            def model_fn(params: Mapping[str, float]) -> nn.Module:
                return make_mlp(num_features, num_classes, hidden, params.get("dropout", 0.0))

        self.model_fn = model_fn
        self.dp_sgd = dp_sgd
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        self.noise_seed = secrets.randbits(63) if noise_seed is None else int(noise_seed)
        self.loss_cap = float(loss_cap)
        self.per_example_loss = per_example_loss
        self.run_prefix = run_prefix
        self.runs: list[TrainingRun] = []
        self.num_trainings = 0

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        return self.space.dim

    @property
    def bounds(self) -> Tensor:
        r"""``2 x d`` unit cube, the box Θ to hand to ``DPGIBOConfig``."""
        return self.space.bounds

    @property
    def num_users(self) -> int:
        return len(self.data.y_val)

    # ------------------------------------------------------------------ training
    def _noise_seed_for(self, index: int) -> int:
        seq = np.random.SeedSequence([self.noise_seed, index])  # one stream per training run
        return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def train(self, theta: Tensor, *, run_id: str | None = None) -> nn.Module:
        r"""Train one model at ``theta`` (recording a DP-SGD run in the ledger).

        Args:
            theta: A ``d`` tensor in the unit cube.
            run_id: Ledger id of the run (default ``f"{run_prefix}-{index:04d}"``).

        Returns:
            The trained model in eval mode.
        """
        theta = torch.as_tensor(theta, dtype=torch.float64).reshape(self.dim)
        params = self.space.to_natural(theta)
        index = self.num_trainings
        run_id = f"{self.run_prefix}-{index:04d}" if run_id is None else str(run_id)
        if self.dp_sgd is not None:
            planned = planned_dp_run(len(self.data.y_train), self.training, self.dp_sgd)
            s, q, steps = planned
            # budget filter before any training data is touched
            self.ledger.check_training_run(noise_multiplier=s, sample_rate=q, steps=steps)
        model, history = train_model(
            params, self.data.X_train, self.data.y_train, self.training, model_fn=self.model_fn,
            dp_sgd=self.dp_sgd,
            noise_seed=None if self.dp_sgd is None else self._noise_seed_for(index),
        )
        self.num_trainings += 1
        if self.dp_sgd is not None:
            if history[0] != planned[0] or history[2] != planned[2] or not math.isclose(history[1], planned[1]):
                raise RuntimeError(f"Opacus accounted {history}, expected {planned}.")
            s, q, steps = history
            self.ledger.record_training_run(run_id=run_id, noise_multiplier=s, sample_rate=q, steps=steps)
            self.runs.append(TrainingRun(run_id, s, q, steps))
        return model

    def _losses(self, model: nn.Module, X: Tensor, y: Tensor) -> Tensor:
        if self.per_example_loss is not None:
            return torch.as_tensor(self.per_example_loss(model, X, y), dtype=torch.float64).reshape(-1)
        return per_example_cross_entropy(model, X, y, loss_cap=self.loss_cap)

    def __call__(self, X: Tensor) -> Tensor:
        r"""Per-user validation losses at each row of ``X`` (SENSITIVE).

        Args:
            X: A ``q x d`` (or ``d``) tensor of unit-cube coordinates.

        Returns:
            A ``q x n`` float64 tensor, entry ``(j, i)`` = loss of validation example
            ``i`` under the model trained at ``X[j]``.
        """
        X = torch.as_tensor(X, dtype=torch.float64)
        X = X.reshape(-1, self.dim)
        out = [self._losses(self.train(x), self.data.X_val, self.data.y_val) for x in X]
        if not out:
            return torch.empty(0, self.num_users, dtype=torch.float64)
        return torch.stack(out)

    # ------------------------------------------------------------------ diagnostics
    def evaluate_non_private(self, theta: Tensor, *, run_id: str | None = None) -> dict[str, float]:
        r"""NON-PRIVATE: validation loss/accuracy and test accuracy of a model trained at ``theta``.

        The training run is recorded in the ledger like any other (it uses the training
        data); the returned numbers are computed from the validation and test data
        without any privacy protection — do not publish them.

        Args:
            theta: A ``d`` tensor in the unit cube.
            run_id: Ledger id of the training run.

        Returns:
            ``{"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}``.
        """
        model = self.train(theta, run_id=run_id)
        d = self.data
        with torch.no_grad():
            val_acc = (model(d.X_val).argmax(-1) == d.y_val).double().mean()
            test_acc = (model(d.X_test).argmax(-1) == d.y_test).double().mean()
        return {
            "validation_loss": float(self._losses(model, d.X_val, d.y_val).mean()),
            "validation_accuracy": float(val_acc),
            "test_loss": float(self._losses(model, d.X_test, d.y_test).mean()),
            "test_accuracy": float(test_acc),
        }

    def with_data(self, data: ClassificationData, **overrides: Any) -> "TorchModelTuningObjective":
        r"""A copy of this objective (same space, model, training, DP-SGD) on other data.

        The copy has a fresh ledger unless ``ledger=`` is passed; use it for pilots on
        public data, which cost no privacy of the sensitive data.
        """
        kwargs = dict(
            space=self.space, model_fn=self.model_fn, training=self.training, dp_sgd=self.dp_sgd,
            noise_seed=self.noise_seed, loss_cap=self.loss_cap,
            per_example_loss=self.per_example_loss, run_prefix=self.run_prefix,
        )
        kwargs.update(overrides)
        return TorchModelTuningObjective(data, **kwargs)


def estimate_training_noise_variance(
    objective: TorchModelTuningObjective,
    public_data: ClassificationData,
    thetas: Tensor,
    *,
    num_repeats: int = 3,
    noise_seed: int = 12345,
) -> float:
    r"""σ²: variance of the mean validation loss between training runs, on PUBLIC data.

    At each row of ``thetas``, trains ``num_repeats`` models on ``public_data`` (e.g.
    ``synthetic_like(data)``) with the objective's model, training and DP-SGD settings
    but independent DP-SGD noise, and returns the pooled sample variance (the mean over
    the rows of the per-row variances) of their mean validation losses: the ``σ²`` of
    the observation model ``f̃(θ) = f(θ) + v``, ``v ~ N(0, σ²)`` (seed 001, §3.4).
    Several rows guard against a point where the model barely moves and the variance
    is deceptively small. The sensitive data are never touched and nothing is recorded
    in the objective's ledger (a pilot on public data costs no privacy). Without DP-SGD
    training is deterministic and this returns 0.

    Args:
        objective: The objective whose settings are copied.
        public_data: Non-sensitive data of a similar kind.
        thetas: A ``k x d`` (or ``d``) tensor of public points in the unit cube.
        num_repeats: Training runs per point (≥ 2).
        noise_seed: Base seed of the pilot's DP-SGD noise.

    Returns:
        The pooled sample variance (a float ≥ 0).
    """
    if num_repeats < 2:
        raise ValueError("num_repeats must be at least 2.")
    pilot = objective.with_data(public_data, ledger=PrivacyLedger(), noise_seed=noise_seed, run_prefix="pilot")
    thetas = torch.as_tensor(thetas, dtype=torch.float64).reshape(-1, objective.dim)
    X = thetas.repeat_interleave(num_repeats, dim=0)  # (k * r) x d
    means = pilot(X).mean(-1).reshape(thetas.shape[0], num_repeats)
    return float(means.var(dim=-1, unbiased=True).mean())
