r"""Private tuning of AMP-trained logistic regression: data, per-run budgets and objectives.

``AMPTuningObjective`` maps θ (the unit cube over ``log10 λ``, optionally ``log10 C``) to
the ``q x n`` per-user logistic losses of the VALIDATION users under a model trained at
each θ with AMP (objective perturbation; Redberg, Koskela & Wang, "Improving the Privacy
and Practicality of Objective Perturbation for Differentially Private Linear Learners") on
the TRAINING split; every training run is charged to a ``PrivacyLedger`` with its RDP
curve before it trains (``tuning.charged``, under any executor). σ is
calibrated per (λ, C) so that every run's RDP curve lies below one public reference curve
(``AMPRunBudget``), so ``k`` runs cost at most what ``k`` reference runs cost.
``DPSGDTuningObjective`` is the Opacus DP-SGD counterpart (θ = the learning rate).
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass

import numpy as np
import torch
from gpytorch.kernels import Kernel, RBFKernel, ScaleKernel
from scipy.optimize import brentq
from torch import Tensor, nn

from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp
from botorch_dp.privacy.analysis.private_selection import private_selection_rdp_curve
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS, rdp_curve_epsilon
from botorch_dp.privacy.checks import (
    check_choice,
    check_delta,
    check_greater,
    check_positive,
    check_positive_int,
)
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig
from botorch_dp.training.objective_perturbation import AMPConfig, AMPResult, fit_amp
from botorch_dp.tuning.charged import ChargedTraining, TrainingTicket, amp_training_event, same_event
from botorch_dp.tuning.datasets import ClassificationData
from botorch_dp.tuning.search_space import Hyperparameter, SearchSpace, SearchSpaceObjective
from botorch_dp.tuning.torch_classifier import TorchModelTuningObjective
from botorch_dp.utils import child_seeds

__all__ = [
    "LOGISTIC_DATASETS",
    "AMPRunBudget",
    "AMPTuningObjective",
    "DPSGDTuningObjective",
    "LogisticData",
    "amp_sigma_for_curve",
    "breast_cancer_ranges",
    "dp_sgd_curve",
    "dp_sgd_noise_for_selection",
    "load_logistic_data",
    "logistic_losses",
    "plan_amp_budget",
    "plan_amp_runs",
    "plan_amp_selection",
    "selection_curve",
    "synthetic_logistic",
    "unit_rows",
]

#: The data sets ``load_logistic_data`` knows: scikit-learn's bundled breast-cancer data
#: and a synthetic high-dimensional logistic model (Synthetic-L-like).
LOGISTIC_DATASETS: tuple[str, ...] = ("breast_cancer", "synthetic")

_ORDERS = np.asarray(DEFAULT_RDP_ORDERS, dtype=np.float64)
#: Largest σ/C that calibration considers (s = C/σ = 1e-9: the σ → ∞ limit in float64).
_MAX_SIGMA_OVER_CLIP = 1e9
_MAX_LAMBDA_STEPS = 2000


# ============================================================================ data
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
            f(self.X_train), lab(self.y_train), f(self.X_val), lab(self.y_val), f(self.X_test), lab(self.y_test),
            num_classes=2, name=self.name,
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


# ============================================================================ per-run budgets
def _limit_curve(lam: float, *, beta: float, tau: float, sigma_out: float) -> np.ndarray:
    r"""``c + α s_g²/2`` on the grid: AMP's RDP curve as σ → ∞ (what λ alone costs)."""
    c = -math.log1p(-beta / lam)
    s_g = 2.0 * tau / (lam * sigma_out)
    return c + _ORDERS * (0.5 * s_g * s_g)


def _grid_cached(curve: Callable) -> Callable[[float], float]:
    r"""``curve`` (vectorised over orders) evaluated once on ``DEFAULT_RDP_ORDERS``; the
    returned scalar function looks grid orders up and evaluates others directly."""
    values = dict(zip(_ORDERS.tolist(), np.asarray(curve(_ORDERS), dtype=np.float64).tolist()))

    def cached(alpha):
        if np.ndim(alpha):
            return np.asarray([cached(a) for a in np.asarray(alpha, dtype=np.float64)])
        alpha = float(alpha)
        return values[alpha] if alpha in values else float(curve(alpha))

    return cached


def _smallest_sigma(
    excess: Callable[[float], float], scale: float, *, max_ratio: float = _MAX_SIGMA_OVER_CLIP, rtol: float = 1e-12
) -> float | None:
    r"""The smallest σ with ``excess(σ) ≤ 0`` for an ``excess`` that decreases in σ, or
    ``None`` when even ``σ = scale·max_ratio`` leaves it positive. Bisection on ``log σ``
    from ``σ = scale`` (relative tolerance ``rtol``); the returned σ satisfies the
    inequality exactly (it is nudged up past the tolerance)."""
    if excess(scale * max_ratio) > 0.0:
        return None
    f = lambda log_sigma: excess(math.exp(log_sigma))
    step = math.log(2.0)
    lo = hi = math.log(scale)
    if f(lo) > 0.0:  # bracket [lo, hi] with f(lo) > 0 >= f(hi), each value computed once
        hi = lo + step
        while f(hi) > 0.0:
            lo, hi = hi, hi + step
    else:
        lo = hi - step
        while f(lo) <= 0.0:
            lo, hi = lo - step, lo
            if lo < math.log(scale) - 200.0:
                return math.exp(hi)  # (almost) no noise needed
    sigma = math.exp(brentq(f, lo, hi, xtol=rtol, rtol=rtol, maxiter=500))
    while excess(sigma) > 0.0:
        sigma *= 1.0 + max(rtol, 1e-10)
    return sigma


def amp_sigma_for_curve(
    reference: np.ndarray, *, lam: float, clip: float, beta: float, tau: float, sigma_out: float
) -> float | None:
    r"""The smallest σ whose AMP run lies below a reference RDP curve at every grid order.

    ``amp_rdp(α; σ, λ, C, β, τ, σ_out) ≤ reference(α)`` for every ``α`` of
    ``DEFAULT_RDP_ORDERS`` (the ledger's grid). AMP's curve decreases in σ at every order
    (``s = C/σ``), so the smallest such σ is found by bisection on ``log σ``.

    Args:
        reference: The reference curve's values on ``DEFAULT_RDP_ORDERS``.
        lam: ``λ > β``.
        clip: ``C``.
        beta: ``β``.
        tau: ``τ``.
        sigma_out: ``σ_out``.

    Returns:
        σ, or ``None`` when no σ works at this λ: the σ → ∞ limit ``c + α s_g²/2``
        (``c = −log(1 − β/λ)``, ``s_g = 2τ/(λσ_out)``) already meets the reference.
    """
    reference = np.asarray(reference, dtype=np.float64)
    if reference.shape != _ORDERS.shape:
        raise ValueError(f"reference must hold one value per order of DEFAULT_RDP_ORDERS ({_ORDERS.size}).")
    lam = check_greater(lam, "lam (λ > β)", beta)
    if np.any(_limit_curve(lam, beta=beta, tau=tau, sigma_out=sigma_out) >= reference):
        return None
    params = dict(clip=clip, beta=beta, lam=lam, tau=tau, sigma_out=sigma_out)
    return _smallest_sigma(lambda sigma: float(np.max(amp_rdp(_ORDERS, sigma=sigma, **params) - reference)), clip)


@dataclass(frozen=True)
class AMPRunBudget:
    r"""What ONE AMP training run of a tuning method may cost: a reference RDP curve.

    The reference is the RDP curve of an AMP run at ``(σ, λ)`` (with the public ``C``,
    ``β``, ``τ``, ``σ_out``). A run at another ``(λ', C')`` gets the smallest ``σ'`` whose
    curve lies below the reference at every order of ``DEFAULT_RDP_ORDERS``
    (``sigma_at``), so ``k`` runs at any hyperparameters compose (in the ledger, on that
    grid) to at most ``k`` times the reference, and a random choice of hyperparameters
    per run costs at most the reference (Rényi divergence is jointly quasi-convex).

    Attributes:
        sigma, lam: The reference run's ``σ`` and ``λ``.
        clip, beta, tau, sigma_out: The public AMP constants of the reference.
        description: How the reference was chosen (public).
    """

    sigma: float
    lam: float
    clip: float
    beta: float
    tau: float
    sigma_out: float
    description: str = ""

    @property
    def privacy_parameters(self) -> dict[str, float]:
        return {"clip": self.clip, "beta": self.beta, "lam": self.lam, "sigma": self.sigma,
                "tau": self.tau, "sigma_out": self.sigma_out}

    def rdp(self, alpha: float | np.ndarray) -> float | np.ndarray:
        r"""The reference curve ``ε(α)`` (``amp_rdp`` at the reference run)."""
        return amp_rdp(alpha, **self.privacy_parameters)

    def rdp_values(self) -> np.ndarray:
        r"""The reference curve on ``DEFAULT_RDP_ORDERS``."""
        return np.asarray(self.rdp(_ORDERS), dtype=np.float64)

    def epsilon(self, delta: float, num_runs: float = 1.0) -> float:
        r"""``ε`` at ``δ`` of ``num_runs`` times the reference curve, converted on
        ``DEFAULT_RDP_ORDERS`` (``num_runs`` may be fractional: runs of weight ≠ 1)."""
        num_runs = check_positive(num_runs, "num_runs", allow_inf=False)
        return rdp_curve_epsilon(num_runs * self.rdp_values(), _ORDERS, check_delta(delta))[0]

    def sigma_at(self, lam: float, clip: float | None = None, weight: float = 1.0) -> float | None:
        r"""σ of a run at ``(λ, C)`` whose curve lies below ``weight`` times the reference
        (``amp_sigma_for_curve``); ``None`` when ``λ`` is too small for any σ. ``C``
        defaults to the reference's; ``weight > 1`` gives a run a larger share."""
        clip = self.clip if clip is None else check_positive(clip, "clip (C)", allow_inf=False)
        weight = check_positive(weight, "weight", allow_inf=False)
        return amp_sigma_for_curve(
            weight * self.rdp_values(), lam=lam, clip=clip, beta=self.beta, tau=self.tau, sigma_out=self.sigma_out
        )

    def min_lam(self) -> float:
        r"""The infimum of the ``λ`` at which some σ meets the budget (``sigma_at`` is finite
        strictly above it): where the σ → ∞ limit ``c + α s_g²/2`` touches the reference."""
        ref = self.rdp_values()
        gap = lambda log_lam: float(np.max(
            _limit_curve(math.exp(log_lam), beta=self.beta, tau=self.tau, sigma_out=self.sigma_out) - ref
        ))
        lo = math.log(self.beta) + 1e-12
        return math.exp(brentq(gap, lo, math.log(self.lam), xtol=1e-13, rtol=1e-13))


def plan_amp_budget(
    epsilon: float,
    *,
    total_epsilon: Callable[[Callable[[np.ndarray], np.ndarray]], float],
    lam_start: float,
    clip: float,
    beta: float,
    tau: float,
    sigma_out: float,
    factor: float = 1.3,
    description: str = "",
) -> AMPRunBudget:
    r"""A reference run for a method whose total cost is a function of one run's RDP curve.

    ``total_epsilon(curve)`` is the method's ``ε`` when every run has the RDP curve
    ``curve`` (a function of an array of orders), e.g. ``k`` runs composed, or private
    selection over a random number of runs. The rule follows the authors' calibration
    (spec C3) with another yardstick: ``σ_∞``, the smallest σ meeting ``ε`` in the limit
    ``λ → ∞`` (no ``c`` and no output-noise term; the least noise any λ needs). Starting at
    ``λ = lam_start``: find the smallest σ with ``total_epsilon(amp curve at (σ, λ)) ≤ ε``
    (bisection on ``log σ``; it decreases to ``σ_∞`` as λ grows) and accept ``(σ, λ)`` as
    soon as ``σ ≤ factor · σ_∞``, else ``λ ← 1.05 λ``. As σ(λ) decreases in λ, the first
    accepted step of the 1.05-grid is found by bisection over the step index. (C3's yardstick, the Gaussian σ of
    the same budget, cannot be approached by composed AMP runs: the folded-normal part of
    ObjPert's privacy loss, mean ``s√(2/π)`` per run, adds up linearly in the number of
    runs.)

    Args:
        epsilon: The method's total ``ε``.
        total_epsilon: ``curve ↦ ε`` of the method (increasing in the curve).
        lam_start: First ``λ`` tried (``λ ≤ β`` are skipped).
        clip, beta, tau, sigma_out: Public AMP constants.
        factor: ``f > 1``.
        description: Kept in the returned budget.

    Returns:
        The ``AMPRunBudget`` at the accepted ``(σ, λ)``.

    Raises:
        ValueError: If no ``λ`` within 2000 steps of 1.05 is accepted.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    factor = check_greater(factor, "factor", 1.0)
    clip = check_positive(clip, "clip (C)", allow_inf=False)
    beta = check_positive(beta, "beta (β)", allow_inf=False)
    tau = check_positive(tau, "tau (τ)", allow_inf=False)
    sigma_out = check_positive(sigma_out, "sigma_out (σ_out)", allow_inf=False)
    lam_start = check_positive(lam_start, "lam_start", allow_inf=False)

    def curve_at(sigma: float, lam: float, tau_: float) -> Callable[[float], float]:
        return _grid_cached(functools.partial(amp_rdp, clip=clip, beta=beta, lam=lam, sigma=sigma, tau=tau_,
                                              sigma_out=sigma_out))

    def sigma_at(lam: float, tau_: float) -> float | None:
        return _smallest_sigma(lambda sigma: total_epsilon(curve_at(sigma, lam, tau_)) - epsilon, clip)

    sigma_inf = sigma_at(beta * 1e12, 1e-300)  # c ≈ 1e-12, s_g ≈ 0: the λ → ∞ limit
    if sigma_inf is None:
        raise ValueError(f"No AMP run meets epsilon = {epsilon:g} even as lambda -> infinity.")

    def accepted(step: int) -> bool:
        # σ(λ) ≤ f σ_∞ iff the total at σ = f σ_∞ is within ε (the total decreases in σ)
        lam = lam_start * 1.05**step
        return lam > beta and total_epsilon(curve_at(factor * sigma_inf, lam, tau)) <= epsilon

    # σ(λ) decreases in λ (the curve decreases in λ at every σ), so the accepted steps form
    # a tail of 0, 1, 2, …: find its first step by doubling, then bisection.
    hi = 0
    while not accepted(hi):
        if hi >= _MAX_LAMBDA_STEPS:
            raise ValueError(
                f"plan_amp_budget found no lambda with sigma <= factor * sigma_inf within {_MAX_LAMBDA_STEPS} "
                "steps; increase factor or sigma_out, or decrease tau."
            )
        hi = min(2 * hi + 1, _MAX_LAMBDA_STEPS)
    lo = -1  # invariant: step lo is not accepted (or is before 0), step hi is
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if accepted(mid):
            hi = mid
        else:
            lo = mid
    lam = lam_start * 1.05**hi
    return AMPRunBudget(sigma=sigma_at(lam, tau), lam=lam, clip=clip, beta=beta, tau=tau, sigma_out=sigma_out,
                        description=description)


def plan_amp_runs(
    epsilon: float,
    delta: float,
    *,
    num_runs: float,
    clip: float = math.sqrt(2.0),
    beta: float = 0.5,
    tau: float = 5e-4,
    sigma_out: float = 0.15,
    factor: float = 1.3,
) -> AMPRunBudget:
    r"""A per-run budget for ``num_runs`` AMP runs composed in RDP to ``(ε, δ)``.

    ``plan_amp_budget`` with the total ``rdp_curve_epsilon(k · ε_run, δ)`` on
    ``DEFAULT_RDP_ORDERS`` (what the ledger computes for ``k`` runs) and the first
    ``λ = 2βk/ε`` (where ``k c ≈ ε/2``). ``k`` counts reference-run units and may be
    fractional: e.g. ``T·b`` evaluation runs of weight 1 and a final run of weight ``w``
    (``AMPRunBudget.sigma_at(..., weight=w)``) need ``k = T·b + w``.

    Args:
        epsilon: Total training ``ε`` of the ``k`` runs.
        delta: ``δ``.
        num_runs: ``k > 0``, the planned number of (weighted) training runs.
        clip, beta, tau, sigma_out: Public AMP constants (defaults: the authors', unit
            rows with a bias feature).
        factor: ``f`` of ``plan_amp_budget``.

    Returns:
        The ``AMPRunBudget``: ``k`` runs held to it cost at most ``ε`` at ``δ``.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)
    k = check_positive(num_runs, "num_runs", allow_inf=False)
    total = lambda curve: rdp_curve_epsilon(k * np.asarray(curve(_ORDERS)), _ORDERS, delta)[0]
    return plan_amp_budget(
        epsilon, total_epsilon=total, lam_start=2.0 * beta * k / epsilon, clip=clip, beta=beta, tau=tau,
        sigma_out=sigma_out, factor=factor,
        description=f"each AMP run below (a weight times) one reference RDP curve; {k:g} reference runs composed "
        f"in RDP give epsilon = {epsilon:g} at delta = {delta:g}",
    )


def plan_amp_selection(
    epsilon: float,
    delta: float,
    *,
    mean_trials: float,
    distribution: str = "poisson",
    tnb_eta: float = 1.0,
    clip: float = math.sqrt(2.0),
    beta: float = 0.5,
    tau: float = 5e-4,
    sigma_out: float = 0.15,
    factor: float = 1.3,
) -> AMPRunBudget:
    r"""A per-trial budget for Papernot–Steinke selection over AMP trials at ``(ε, δ)``.

    ``plan_amp_budget`` with the total ``ε`` of ``selection_curve`` (P&S Thm. 2 or 6 with
    the trial's RDP curve as base, converted on ``DEFAULT_RDP_ORDERS``) and the first
    ``λ = 2β/ε``. Every trial held to the returned budget (any λ, chosen at random) is
    below its reference curve, so the selection costs at most ``ε`` on the training data.

    Args:
        epsilon: Training ``ε`` of the whole selection.
        delta: ``δ``.
        mean_trials: ``E[K]``.
        distribution: ``"poisson"`` or ``"truncated_negative_binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        clip, beta, tau, sigma_out, factor: As in ``plan_amp_runs``.

    Returns:
        The ``AMPRunBudget``.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    def total(curve: Callable) -> float:
        return rdp_curve_epsilon(
            selection_curve(curve, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta), _ORDERS,
            delta,
        )[0]

    return plan_amp_budget(
        epsilon, total_epsilon=total, lam_start=2.0 * beta / epsilon, clip=clip, beta=beta, tau=tau,
        sigma_out=sigma_out, factor=factor,
        description=f"each AMP trial below one reference RDP curve; Papernot-Steinke selection ({distribution}, "
        f"E[K] = {mean_trials:g}) over reference trials gives epsilon = {epsilon:g} at delta = {delta:g}",
    )


def selection_curve(
    base_rdp: Callable[[float], float], *, mean_trials: float, distribution: str = "poisson", tnb_eta: float = 1.0
) -> np.ndarray:
    r"""The Papernot–Steinke RDP curve of selecting the best of ``K`` runs of a base
    mechanism, on ``DEFAULT_RDP_ORDERS`` (``private_selection_rdp_curve``; the Poisson
    bound takes the base's δ from its RDP curve on the same grid).

    Args:
        base_rdp: ``α ↦ ε(α)`` of one run.
        mean_trials: ``E[K]``.
        distribution: ``"poisson"`` or ``"truncated_negative_binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.

    Returns:
        The curve's values on ``DEFAULT_RDP_ORDERS``.
    """
    curve = private_selection_rdp_curve(
        base_rdp, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta
    )
    return np.array([curve(float(a)) for a in _ORDERS])


def dp_sgd_curve(*, noise_multiplier: float, sample_rate: float, steps: int) -> Callable[[float], float]:
    r"""The RDP curve ``α ↦ ε(α)`` of one DP-SGD run (``accountants.dp_sgd_rdp``), evaluated
    once on ``DEFAULT_RDP_ORDERS`` (Opacus is imported here, not with the module)."""
    from botorch_dp.privacy.accountants import dp_sgd_rdp

    def curve(alpha):
        alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
        values = dp_sgd_rdp(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, orders=alphas)
        return values if np.ndim(alpha) else float(values[0])

    return _grid_cached(curve)


def dp_sgd_noise_for_selection(
    epsilon: float,
    delta: float,
    *,
    sample_rate: float,
    steps: int,
    mean_trials: float,
    distribution: str = "poisson",
    tnb_eta: float = 1.0,
) -> float:
    r"""The smallest DP-SGD noise multiplier whose P&S selection is ``(ε, δ)``-DP.

    "Honest" DP-SGD tuning (Redberg, Koskela & Wang, §5): every trial is a DP-SGD run with the same
    ``(σ, q, T)``; the selection's curve is ``selection_curve`` of the run's
    ``compute_rdp`` curve, converted on ``DEFAULT_RDP_ORDERS``; it decreases in σ, so σ is
    found by bisection on ``log σ``.

    Args:
        epsilon: Training ``ε`` of the selection.
        delta: ``δ``.
        sample_rate: Poisson rate ``q``.
        steps: Steps ``T`` per run.
        mean_trials, distribution, tnb_eta: The selection's number of trials.

    Returns:
        The noise multiplier σ.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    def excess(sigma: float) -> float:
        curve = dp_sgd_curve(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps)
        values = selection_curve(curve, mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta)
        return rdp_curve_epsilon(values, _ORDERS, delta)[0] - epsilon

    # compute_rdp slows down for huge noise at large q: search σ ≤ 1e4 to 5 digits
    sigma = _smallest_sigma(excess, 1.0, max_ratio=1e4, rtol=1e-5)
    if sigma is None:
        raise ValueError(f"No DP-SGD noise multiplier up to 1e4 reaches epsilon = {epsilon:g} with E[K] = {mean_trials:g}.")
    return sigma


# ============================================================================ losses
def logistic_losses(scores: Tensor, y: Tensor, *, loss_cap: float) -> Tensor:
    r"""Per-example logistic loss ``log(1 + e^{−(2y−1)u})`` of margins ``u``, in ``[0, cap]``.

    Written as ``softplus((1 − 2y)u)``, which is finite for finite ``u`` and never NaN for
    infinite ``u``; a NaN (impossible for AMP's finite releases) becomes ``loss_cap``.

    Args:
        scores: ``... x n`` margins ``u = x̃ᵀθ``.
        y: ``n`` labels in {0, 1}.
        loss_cap: ``> 0``, the public cap.

    Returns:
        ``... x n`` float64 losses in ``[0, loss_cap]``.
    """
    u = scores.to(torch.float64)
    loss = torch.nn.functional.softplus((1.0 - 2.0 * y.to(torch.float64)) * u)
    return torch.nan_to_num(loss, nan=loss_cap).clamp(0.0, loss_cap)


# ============================================================================ AMP objective
class AMPTuningObjective(ChargedTraining, SearchSpaceObjective):
    r"""θ (``q x d`` unit cube) ↦ ``q x n`` validation losses of AMP logistic regressions.

    The unit cube maps to ``log10 λ`` (and, with ``clip_range``, ``log10 C``) through a
    ``SearchSpace``. Each row of θ trains ONE AMP model on the training split: ``λ`` (and
    ``C``) from θ, ``σ = budget.sigma_at(λ, C)`` (so the run's RDP curve lies below the
    budget's reference curve), ``τ`` and ``σ_out`` from the budget. Every run is charged to
    the ledger with its exact curve before it trains (``tuning.charged``: a batch admitted
    whole and recorded before dispatch, under any executor; ``train`` records through the
    mechanism at the draw of its perturbation), run id ``f"{run_prefix}-{i:04d}"``,
    numbered from the ledger as in ``TorchModelTuningObjective``. The losses are the validation users' logistic losses
    under the RELEASED parameters, in ``[0, loss_cap]``.

    The returned losses are SENSITIVE (validation side); pass the objective to
    ``DPGIBO.run`` or ``private_random_search``. The released models (``results``) are
    public on the validation side and covered on the training side by the ledger.

    Composition: when the number of runs and their weights are fixed in advance (``k``
    units), every run lies below its weight times the reference curve ``r`` whatever λ
    the tuner picks, so the adaptive composition is at most ``k·r`` at every order and
    ``budget.epsilon(δ, k)`` is the training guarantee. The ledger's own sum of the exact
    curves is never larger; a ledger budget filter, if set, checks every run before
    training at its one fixed order.

    Args:
        data: The ``LogisticData`` (unit rows).
        budget: The per-run ``AMPRunBudget``.
        lam_range: ``(λ_lo, λ_hi)`` searched log-uniformly; ``λ_lo`` must exceed
            ``budget.min_lam()`` (default: ``(1.05·budget.min_lam(), 100·budget.lam)``).
        clip_range: ``(C_lo, C_hi)`` to tune ``C`` too (log-uniform); ``None``: ``C`` fixed
            at the budget's.
        ledger: The ``PrivacyLedger`` (a fresh one if None).
        noise_seed: ``None`` (default): every run's noise from OS entropy. An integer:
            run ``i`` uses the child seed ``child_seeds([noise_seed, i], 1)[0]`` (a
            ``PrivacyWarning`` here, once).
        loss_cap: Cap of the per-user losses.
        max_iter: ``AMPConfig.max_iter``.
        run_prefix: Prefix of the ledger's run ids.
    """

    def __init__(
        self,
        data: LogisticData,
        budget: AMPRunBudget,
        *,
        lam_range: tuple[float, float] | None = None,
        clip_range: tuple[float, float] | None = None,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = None,
        loss_cap: float = 3.0,
        max_iter: int = 2000,
        run_prefix: str = "amp",
    ) -> None:
        if not isinstance(budget, AMPRunBudget):
            raise ValueError(f"budget must be an AMPRunBudget, got {type(budget).__name__}.")
        self.data = data
        self.budget = budget
        lam_floor = budget.min_lam()
        lo, hi = (1.05 * lam_floor, 100.0 * budget.lam) if lam_range is None else map(float, lam_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lam_floor < lo < hi):
            raise ValueError(
                f"lam_range must satisfy {lam_floor:.6g} (the smallest lambda the budget allows) "
                f"< lower < upper, got {(lo, hi)}."
            )
        params = [Hyperparameter("lam", lo, hi, log_scale=True)]
        if clip_range is not None:
            c_lo, c_hi = map(float, clip_range)
            params.append(Hyperparameter("clip", c_lo, c_hi, log_scale=True))
        self.space = SearchSpace(params)
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        if noise_seed is not None:
            warnings.warn(
                "An AMP noise seed was given: the training noise of every run is reproducible, and "
                "the guarantee assumes the seed stays secret. Leave noise_seed=None for OS entropy.",
                PrivacyWarning, stacklevel=2,
            )
        self.noise_seed = None if noise_seed is None else int(noise_seed)
        self.loss_cap = check_positive(loss_cap, "loss_cap", allow_inf=False)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        if not isinstance(run_prefix, str) or not run_prefix or any(ch.isspace() for ch in run_prefix):
            raise ValueError(f"run_prefix must be a non-empty string without spaces, got {run_prefix!r}.")
        self.run_prefix = run_prefix
        #: The released ``AMPResult`` of every run this object trained in this process, in order.
        self.results: list[AMPResult] = []
        #: The ledger id of each of ``results``.
        self.run_ids: list[str] = []

    _PER_PROCESS = ("results", "run_ids")

    def recommended_kernel(self, lengthscale: float = 0.3, outputscale: float = 0.25) -> Kernel:
        r"""A scaled RBF kernel on the unit cube with fixed, public hyperparameters.

        Args:
            lengthscale: In unit-cube coordinates.
            outputscale: Prior variance of a per-user loss curve.
        """
        kernel = ScaleKernel(RBFKernel(ard_num_dims=self.dim)).to(torch.float64)
        kernel.base_kernel.lengthscale = torch.full((1, self.dim), float(lengthscale), dtype=torch.float64)
        kernel.outputscale = float(outputscale)
        return kernel.requires_grad_(False)

    # ------------------------------------------------------------------ training
    def config_at(self, theta: Tensor, budget_weight: float = 1.0) -> AMPConfig:
        r"""The public ``AMPConfig`` of a run at ``theta`` (a ``d`` unit-cube point) whose
        RDP curve lies below ``budget_weight`` times the budget's reference curve."""
        theta = torch.as_tensor(theta, dtype=torch.float64).reshape(self.dim)
        if not torch.isfinite(theta).all():
            raise ValueError(f"theta must be finite, got {theta.tolist()}.")
        params = self.space.to_natural(theta)
        lam = params["lam"]
        clip = params.get("clip", self.budget.clip)
        sigma = self.budget.sigma_at(lam, clip, weight=budget_weight)
        if sigma is None:  # cannot happen inside lam_range (checked above); kept as a guard
            raise ValueError(f"lambda = {lam:g} is below what the budget allows; nothing was trained.")
        return AMPConfig(lam=lam, sigma=sigma, loss="logistic", clip=clip, feature_bound=1.0,
                         fit_intercept=True, sigma_out=self.budget.sigma_out, tau=self.budget.tau,
                         max_iter=self.max_iter)

    def planned_event(self, theta: Tensor, budget_weight: float = 1.0) -> Any:
        r"""The ledger event (``TrainingMechanism``) of a run at ``theta``, known before it trains."""
        return amp_training_event(self.config_at(theta, budget_weight), self.data.num_features + 1)

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, budget_weight: float = 1.0) -> AMPResult:
        config = self.config_at(theta, budget_weight)
        generator = None if ticket.noise_seed is None else torch.Generator().manual_seed(ticket.noise_seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # warned once, in __init__
            result = fit_amp(self.data.X_train, self.data.y_train, config, generator=generator, meter=meter,
                             run_id=ticket.run_id)
        if not same_event(amp_training_event(config, result.theta.numel()), ticket.event):
            raise RuntimeError(f"AMP ran {result.description!r} for run {ticket.run_id!r}, charged as {ticket.event}.")
        self.results.append(result)
        self.run_ids.append(ticket.run_id)
        return result

    def _validation_losses(self, result: AMPResult) -> Tensor:
        return self.losses_of(result, self.data.X_val, self.data.y_val)

    def train(self, theta: Tensor, *, label: str | None = None, budget_weight: float = 1.0) -> AMPResult:
        r"""Train and release one AMP model at ``theta``, charged on its own (recorded at its draw).

        Args:
            theta: A ``d`` unit-cube point.
            label: Optional label appended to the run id (e.g. ``"final"``).
            budget_weight: The run's curve lies below this multiple of the reference
                curve (default 1; e.g. a larger share for the final model).

        Returns:
            The ``AMPResult`` (its ``theta`` is the released model).
        """
        return self._train_alone(theta, label, budget_weight=budget_weight)

    def losses_of(self, result: AMPResult, X: Tensor, y: Tensor) -> Tensor:
        r"""Per-example capped logistic losses of a released model on ``(X, y)``: ``n``."""
        return logistic_losses(result.decision_function(X), y, loss_cap=self.loss_cap)

    # ------------------------------------------------------------------ diagnostics
    def accuracy_non_private(self, result: AMPResult, split: str = "test") -> float:
        r"""NON-PRIVATE: accuracy of a released model on the ``"test"`` or ``"validation"``
        split (do not publish)."""
        X, y = {"test": (self.data.X_test, self.data.y_test),
                "validation": (self.data.X_val, self.data.y_val)}[check_choice(split, "split", ("test", "validation"))]
        return float((result.predict(X) == y).to(torch.float64).mean())


# ============================================================================ DP-SGD objective
class DPSGDTuningObjective(TorchModelTuningObjective):
    r"""θ (unit cube over ``log10`` of the learning rate) ↦ validation losses of DP-SGD
    logistic regressions (Opacus; ``TorchModelTuningObjective``).

    The model is a linear layer with two logits (softmax logistic regression, bias
    included); its per-example cross-entropy is the logistic loss of the logit
    difference. Every run is charged to the ledger as a DP-SGD run before it trains.
    Unlike the parent, the trained models are kept (``models``) so that a selection
    method can release the winning trial's own model.

    Args:
        data: The ``LogisticData``.
        lr_range: ``(lr_lo, lr_hi)``, searched log-uniformly (default the authors' code's
            ``[1e-5, 1e-1]`` for Adam, Redberg, Koskela & Wang's code).
        optimizer: The ``torch.optim`` class (default Adam, as in the paper's honest DP-SGD).
        training: Epochs, expected batch size (``TrainingConfig``).
        dp_sgd: Noise multiplier and clipping norm (``DPSGDConfig``).
        ledger, noise_seed, loss_cap, run_prefix: As in ``TorchModelTuningObjective``.
    """

    def __init__(
        self,
        data: LogisticData,
        *,
        lr_range: tuple[float, float] = (1e-5, 1e-1),
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.Adam,
        training: TrainingConfig,
        dp_sgd: DPSGDConfig,
        ledger: PrivacyLedger | None = None,
        noise_seed: int | None = None,
        loss_cap: float = 3.0,
        run_prefix: str = "dpsgd",
    ) -> None:
        p = data.num_features
        space = SearchSpace([Hyperparameter("lr", float(lr_range[0]), float(lr_range[1]), log_scale=True)])
        super().__init__(
            data.to_classification_data(), space, model_fn=functools.partial(nn.Linear, p, 2), optimizer=optimizer,
            training=training, dp_sgd=dp_sgd, ledger=ledger, noise_seed=noise_seed, loss_cap=loss_cap,
            run_prefix=run_prefix,
        )
        #: The models trained in this process, in order of training.
        self.models: list[nn.Module] = []

    _PER_PROCESS = ("runs", "models")

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, **options: Any) -> nn.Module:
        model = super()._train_with(theta, ticket, meter, **options)
        self.models.append(model)
        return model

    def accuracy_non_private(self, model: nn.Module, split: str = "test") -> float:
        r"""NON-PRIVATE: accuracy of a trained model on the test or validation split."""
        d = self.data
        X, y = {"test": (d.X_test, d.y_test), "validation": (d.X_val, d.y_val)}[
            check_choice(split, "split", ("test", "validation"))]
        with torch.no_grad():
            return float((model(X).argmax(-1) == y).to(torch.float64).mean())
