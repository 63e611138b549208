r"""``estimate_training_noise_variance``: the observation noise σ² of a tuning objective, on PUBLIC data.

A training run with DP-SGD draws fresh noise, so two evaluations at the same θ differ; the
GP of DP-GIBO models that as observation noise ``σ²``. This pilot measures it on public data
of a similar kind with a copy of the objective (``TorchModelTuningObjective.with_data``), so
the sensitive data are never touched and nothing is charged.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from botorch_dp.objectives.datasets import ClassificationData
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning

__all__ = ["estimate_training_noise_variance"]


def estimate_training_noise_variance(
    objective: Any,
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
    the observation model ``f̃(θ) = f(θ) + v``, ``v ~ N(0, σ²)`` (Sopa et al., short version, §3.4).
    Several rows guard against a point where the model barely moves and the variance
    is deceptively small. The sensitive data are never touched and nothing is recorded
    in the objective's ledger (a pilot on public data costs no privacy); ``public_data``
    that shares a training record with the objective is refused (``with_data``'s
    ``ValueError``). Without DP-SGD training is deterministic and this returns 0.

    Args:
        objective: The ``TorchModelTuningObjective`` whose settings are copied (anything
            with its ``with_data``, ``dim`` and call).
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
