r"""Private tuning of the continuous hyperparameters of a torch classifier with DP-GIBO.

``TorchModelTuningObjective`` maps parameters θ (``q x d``) to the ``q x n`` per-user
validation losses of a model trained at each θ, optionally with Opacus DP-SGD whose
training runs are recorded in a ``PrivacyLedger``.

The objective is what ``DPGIBO.run`` consumes. Its outputs are SENSITIVE (one loss per
validation example); only the DP-GIBO release computed from them is private. Anything
else that looks at the validation or test data (``evaluate_non_private``) is a
NON-PRIVATE diagnostic.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training.dp_sgd import (
    DPSGDConfig,
    TrainingConfig,
    TrainingRun,
    make_mlp,
    planned_dp_run,
    train_model,
)
from botorch_dp.tuning.datasets import ClassificationData
from botorch_dp.tuning.search_space import SearchSpace, default_mlp_space
from botorch_dp.utils import child_seeds

__all__ = ["TorchModelTuningObjective", "estimate_training_noise_variance", "per_example_cross_entropy"]


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
            noise_seed=None if self.dp_sgd is None else child_seeds([self.noise_seed, index], 1)[0],
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
