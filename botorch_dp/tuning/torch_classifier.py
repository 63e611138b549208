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
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
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
    training run draws fresh DP-SGD noise and is recorded in ``ledger`` (checked against
    its training budget BEFORE training, recorded from Opacus's own accountant history
    after).

    Training runs are numbered from the ledger, not from this object: run ``i`` is
    recorded as ``f"{run_prefix}-{i:04d}"`` (``f"{run_prefix}-{i:04d}-{label}"`` with a
    label), and ``i`` is one more than the largest index of ``run_prefix`` already in
    the ledger. An objective rebuilt after ``DPGIBO.resume(dir, ledger=ledger)`` on the
    restored ledger therefore continues the numbering: no run id, and with an explicit
    ``noise_seed`` no noise stream, is used twice, and the ledger counts every run.
    Objectives that share a ledger and a prefix share one numbering. A run whose
    evaluation was lost with its process before ``tell`` was checkpointed is not in the
    restored ledger; nothing computed from it was released, and the resumed loop
    evaluates those points again with new runs.

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
        noise_seed: ``None`` (default): every DP-SGD run's sampling and noise come from
            a run seed drawn from OS entropy (``secrets.randbits(63)``) that is never
            stored (see ``train_model`` for what that does and does not protect); runs
            are then not reproducible. An integer: run ``i`` uses the child stream
            ``child_seeds([noise_seed, i], 1)[0]`` (reproducible given the seed and the
            ledger's history) and a ``PrivacyWarning`` is raised; the guarantee then
            assumes the seed stays secret. Never write it to an output.
        loss_cap: Cap of the per-user losses (see ``per_example_cross_entropy``).
        per_example_loss: Optional ``(model, X_val, y_val) -> n`` losses replacing the
            capped cross-entropy.
        run_prefix: Prefix of the ledger's run ids (non-empty, no spaces).
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
        noise_seed: int | None = None,
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
        if noise_seed is not None and dp_sgd is not None:
            warnings.warn(
                "A DP-SGD noise seed was given: the training noise of every run is "
                "reproducible, and the guarantee assumes the seed stays secret. Leave "
                "noise_seed=None to draw it from OS entropy.",
                PrivacyWarning,
                stacklevel=2,
            )
        self.noise_seed = None if noise_seed is None else int(noise_seed)
        self.loss_cap = float(loss_cap)
        self.per_example_loss = per_example_loss
        if not isinstance(run_prefix, str) or not run_prefix or any(c.isspace() for c in run_prefix):
            raise ValueError(f"run_prefix must be a non-empty string without spaces, got {run_prefix!r}.")
        self.run_prefix = run_prefix
        self._run_id_pattern = re.compile(rf"{re.escape(run_prefix)}-(\d+)(?:-.*)?", re.DOTALL)
        #: The DP-SGD runs this object trained (this session only; the ledger has all).
        self.runs: list[TrainingRun] = []
        #: Models this object trained (this session only).
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
    def next_run_index(self) -> int:
        r"""Index of the next DP-SGD training run: one more than the largest index of
        ``run_prefix`` recorded in the ledger (0 if none), so it continues after a resume.

        Returns:
            An integer ≥ 0.
        """
        indices = [
            int(match.group(1))
            for run_id in self.ledger.training_runs
            if isinstance(run_id, str) and (match := self._run_id_pattern.fullmatch(run_id))
        ]
        return max(indices, default=-1) + 1

    def train(self, theta: Tensor, *, label: str | None = None) -> nn.Module:
        r"""Train one model at ``theta`` (recording a DP-SGD run in the ledger).

        Args:
            theta: A ``d`` tensor in the unit cube.
            label: Optional label (e.g. ``"final"``) appended to the run's ledger id,
                ``f"{run_prefix}-{index:04d}-{label}"``; the index keeps ids unique.

        Returns:
            The trained model in eval mode.
        """
        theta = torch.as_tensor(theta, dtype=torch.float64).reshape(self.dim)
        params = self.space.to_natural(theta)
        if label is not None and (not isinstance(label, str) or not label):
            raise ValueError(f"label must be a non-empty string, got {label!r}.")
        noise_seed = None
        if self.dp_sgd is not None:
            index = self.next_run_index()
            run_id = f"{self.run_prefix}-{index:04d}" + ("" if label is None else f"-{label}")
            if self.noise_seed is not None:
                noise_seed = child_seeds([self.noise_seed, index], 1)[0]
            planned = planned_dp_run(len(self.data.y_train), self.training, self.dp_sgd)
            s, q, steps = planned
            # budget filter before any training data is touched
            self.ledger.check_training_run(noise_multiplier=s, sample_rate=q, steps=steps)
        with warnings.catch_warnings():
            # an explicit noise_seed was warned about once, in __init__
            warnings.simplefilter("ignore", PrivacyWarning)
            model, history = train_model(
                params, self.data.X_train, self.data.y_train, self.training, model_fn=self.model_fn,
                dp_sgd=self.dp_sgd, noise_seed=noise_seed,
            )
        self.num_trainings += 1
        if self.dp_sgd is not None:
            if history[0] != planned[0] or history[2] != planned[2] or not math.isclose(history[1], planned[1]):
                raise RuntimeError(f"Opacus accounted {history}, expected {planned}.")
            s, q, steps = history
            if not self.ledger.record_training_run(run_id=run_id, noise_multiplier=s, sample_rate=q, steps=steps):
                raise RuntimeError(f"Training run {run_id!r} was already in the ledger; it was not counted.")
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
    def evaluate_non_private(self, theta: Tensor, *, label: str | None = None) -> dict[str, float]:
        r"""NON-PRIVATE: validation loss/accuracy and test accuracy of a model trained at ``theta``.

        The training run is recorded in the ledger like any other (it uses the training
        data); the returned numbers are computed from the validation and test data
        without any privacy protection — do not publish them.

        Args:
            theta: A ``d`` tensor in the unit cube.
            label: Label of the training run's ledger id (see ``train``).

        Returns:
            ``{"validation_loss", "validation_accuracy", "test_loss", "test_accuracy"}``.
        """
        model = self.train(theta, label=label)
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
    noise_seed: int | None = 12345,
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
        noise_seed: Base seed of the pilot's DP-SGD noise (``None``: OS entropy). The
            pilot trains on public data only, so a known seed exposes nothing and no
            ``PrivacyWarning`` is raised for it.

    Returns:
        The pooled sample variance (a float ≥ 0).
    """
    if num_repeats < 2:
        raise ValueError("num_repeats must be at least 2.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # public data: the seed protects nothing
        pilot = objective.with_data(public_data, ledger=PrivacyLedger(), noise_seed=noise_seed, run_prefix="pilot")
    thetas = torch.as_tensor(thetas, dtype=torch.float64).reshape(-1, objective.dim)
    X = thetas.repeat_interleave(num_repeats, dim=0)  # (k * r) x d
    means = pilot(X).mean(-1).reshape(thetas.shape[0], num_repeats)
    return float(means.var(dim=-1, unbiased=True).mean())
