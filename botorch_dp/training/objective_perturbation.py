r"""AMP training of linear models: approximate minima perturbation with gradient clipping.

``fit_amp`` trains a logistic or Huber (clipped squared-loss) linear model by objective
perturbation (Redberg, Koskela & Wang, Alg. 1): minimise the λ-strongly convex
``L^P(θ) = Σ_z ℓ_C(θ; z) + (λ/2)‖θ‖² + bᵀθ`` with ``b ~ N(0, σ² I)`` until
``‖∇L^P(θ̃)‖₂ ≤ τ`` (checked with an exact float64 gradient), then release ``θ̃`` rounded to a
public power-of-two grid plus an exact discrete Gaussian of scale at least ``σ_out``
(``analysis.objective_perturbation.amp_output_noise``). The guarantee (training side, add/remove one record) is the RDP
curve ``amp_rdp`` and the privacy profile ``amp_epsilon`` of
``privacy.analysis.objective_perturbation``. Both noise draws happen in
``privacy.mechanisms.ObjectivePerturbationMechanism``. The settings (``AMPConfig``), the
perturbed objective and its solver are in ``training.amp_objective``; their public names
stay importable from here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from botorch_dp.privacy.analysis.objective_perturbation import amp_epsilon, amp_rdp, amp_rdp_epsilon
from botorch_dp.privacy.ledger.meter import TrainingMeter
from botorch_dp.privacy.mechanisms import AMPNotConvergedError, ObjectivePerturbationMechanism, RDPCost
from botorch_dp.privacy.seeding import PrivacyWarning, noise_generator
from botorch_dp.training.amp_objective import (
    LOSSES,
    AMPConfig,
    clipped_glm_loss,
    minimise_to_tolerance,
    perturbed_objective,
)

__all__ = [
    "AMPConfig",
    "AMPNonPrivateDiagnostics",
    "AMPNotConvergedError",
    "AMPResult",
    "LOSSES",
    "amp_features",
    "clipped_glm_loss",
    "fit_amp",
    "perturbed_objective",
]


@dataclass(frozen=True)
class AMPNonPrivateDiagnostics:
    r"""NON-PRIVATE internals of one AMP run. Never publish these.

    Attributes:
        theta_tilde: The ``d`` approximate minimiser ``θ̃`` before the output noise.
        perturbation: The ``d`` objective perturbation ``b``.
        gradient_norm: ``‖∇L^P(θ̃)‖₂`` (exact, float64; at most ``τ``).
        iterations: Solver iterations used (L-BFGS plus Newton refinement steps).
    """

    theta_tilde: Tensor
    perturbation: Tensor
    gradient_norm: float
    iterations: int


@dataclass(frozen=True)
class AMPResult:
    r"""The released model of one AMP run and its guarantee.

    Attributes:
        theta: The ``d`` released float64 parameters (the bias last when
            ``config.fit_intercept``); public.
        config: The run's ``AMPConfig``.
        cost: The ``RDPCost`` returned by the mechanism (record it in the ledger).
        nonprivate_diagnostics: ``None`` unless requested; NON-PRIVATE otherwise.
    """

    theta: Tensor
    config: AMPConfig
    cost: RDPCost | None = None
    nonprivate_diagnostics: AMPNonPrivateDiagnostics | None = field(default=None, repr=False)

    def rdp(self, alpha: float | np.ndarray) -> float | np.ndarray:
        r"""``ε(α)`` of the release: ``amp_rdp(α, ...)`` at the config's parameters (α > 1;
        a float or a numpy array of orders)."""
        return amp_rdp(alpha, **self.config.privacy_parameters)

    def epsilon(self, delta: float) -> float:
        r"""The tight ``ε`` at ``δ`` of this one release, from AMP's privacy profile
        (``amp_epsilon``). Use ``rdp`` (or ``rdp_epsilon``) when composing with other runs."""
        return amp_epsilon(delta, **self.config.privacy_parameters)

    def rdp_epsilon(self, delta: float) -> float:
        r"""``ε`` at ``δ`` via the RDP curve on ``DEFAULT_RDP_ORDERS`` (``amp_rdp_epsilon``):
        what an RDP ledger charges for this run alone (looser than ``epsilon``)."""
        return amp_rdp_epsilon(delta, **self.config.privacy_parameters)

    @property
    def description(self) -> str:
        r"""A description of the release (the ledger record's description)."""
        return self.cost.description if self.cost is not None else f"AMP: {self.config}"

    def decision_function(self, X: Tensor) -> Tensor:
        r"""``x̃ᵀθ`` for the rows of an ``m x p`` ``X`` (rescaled as in training): ``m`` tensor."""
        return amp_features(X, self.config) @ self.theta

    def predict_proba(self, X: Tensor) -> Tensor:
        r"""``P[y = 1 | x] = sigmoid(x̃ᵀθ)`` (logistic loss only): ``m`` tensor."""
        if self.config.loss != "logistic":
            raise ValueError("predict_proba needs config.loss == 'logistic'.")
        return torch.sigmoid(self.decision_function(X))

    def predict(self, X: Tensor) -> Tensor:
        r"""Labels: ``1[x̃ᵀθ > 0]`` in {0, 1} (logistic) or ``sign`` in {−1, 1} (squared)."""
        score = self.decision_function(X)
        if self.config.loss == "logistic":
            return (score > 0).to(torch.float64)
        return torch.where(score >= 0, 1.0, -1.0).to(torch.float64)


def _as_float64(value: object, name: str) -> Tensor:
    try:
        return torch.as_tensor(value).detach().to(dtype=torch.float64, device="cpu")
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be numeric array-like, got {type(value).__name__}.") from err


def amp_features(X: Tensor, config: AMPConfig) -> Tensor:
    r"""The training features ``x̃``: rows rescaled to ``‖x‖ ≤ R``, then the bias column.

    Each row with ``‖x‖ > R`` becomes ``x R/‖x‖`` (a per-record map, so it costs no
    privacy); the others are unchanged. With ``fit_intercept`` a column of ones is appended.

    Args:
        X: An ``n x p`` array of finite features.
        config: The ``AMPConfig`` (``feature_bound``, ``fit_intercept``).

    Returns:
        The ``n x d`` float64 CPU tensor ``X̃`` (``d = p + 1`` with an intercept).
    """
    X = _as_float64(X, "X")
    if X.dim() != 2:
        raise ValueError(f"X must be an n x p matrix, got shape {tuple(X.shape)}.")
    if not torch.isfinite(X).all():
        raise ValueError("X must be finite (no NaN or inf); nothing was released.")
    # ‖x‖ without overflow: scale each row by its largest magnitude first
    largest = X.abs().amax(dim=1, keepdim=True) if X.shape[1] else X.new_zeros(X.shape[0], 1)
    largest = torch.where(largest > 0, largest, torch.ones_like(largest))
    unit = X / largest  # entries in [−1, 1]
    unit_norms = torch.linalg.vector_norm(unit, dim=1, keepdim=True)
    outside = largest * unit_norms > config.feature_bound  # ‖x‖ > R (inf-safe)
    X = torch.where(outside, unit * (config.feature_bound / unit_norms.clamp(min=1e-300)), X)
    if config.fit_intercept:
        X = torch.cat([X, X.new_ones(X.shape[0], 1)], dim=1)
    return X


def _check_labels(y: object, n: int, loss: str) -> Tensor:
    r"""The ``n`` labels as float64, or a ``ValueError`` naming ``y``."""
    y = _as_float64(y, "y")
    if y.dim() == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"y must be a vector of length n = {n} (one label per row of X), got shape {tuple(y.shape)}.")
    if not torch.isfinite(y).all():
        raise ValueError("y must be finite (no NaN or inf); nothing was released.")
    if loss == "logistic" and not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("y must hold labels in {0, 1} for the logistic loss.")
    if loss == "squared" and not bool((y.abs() <= 1).all()):
        raise ValueError("y must lie in [-1, 1] for the squared loss.")
    return y


def fit_amp(
    X: Tensor,
    y: Tensor,
    config: AMPConfig,
    *,
    generator: torch.Generator | int | None = None,
    nonprivate_diagnostics: bool = False,
    meter: TrainingMeter | None = None,
    run_id: object = None,
) -> AMPResult:
    r"""Train a linear model with AMP and gradient clipping (Redberg et al., Alg. 1).

    1. Check the inputs; build ``X̃`` (rows rescaled to ``‖x‖ ≤ R``, bias column).
    2. Draw ``b ~ N(0, σ² I_d)``.
    3. Minimise ``L^P(θ) = Σ_i f_C(x̃_iᵀθ; y_i) + (λ/2)‖θ‖² + bᵀθ`` with L-BFGS in float64.
    4. Verify ``‖∇L^P(θ̃)‖₂ ≤ τ`` with the exact float64 gradient; continue up to
       ``max_iter`` iterations, then refuse (``AMPNotConvergedError``, nothing released).
    5. Release ``γ (round(θ̃/γ) + k)``, ``k ~ N_Z(0, s²)^d`` (``γ s ≥ σ_out``, ``√d γ ≤ 2⁻¹⁴ σ_out``).

    Only the released ``θ`` leaves, with its guarantee: ``(α, amp_rdp(α, ...))``-RDP for
    adding or removing one record (``AMPResult.rdp``, ``AMPResult.epsilon``). A refusal
    reveals that the solver did not converge on this data within ``max_iter``.

    Args:
        X: An ``n x p`` array of finite features (SENSITIVE).
        y: ``n`` labels (SENSITIVE): {0, 1} for ``"logistic"``, ``[−1, 1]`` for ``"squared"``.
        config: The ``AMPConfig``.
        generator: Source of both noise draws. ``None`` (default): OS entropy. A
            ``torch.Generator`` or an integer seed makes the noise reproducible (tests,
            reproductions) and raises a ``PrivacyWarning``.
        nonprivate_diagnostics: Also return ``AMPNonPrivateDiagnostics`` (``θ̃``, ``b``,
            iterations): NOT private, never publish them.
        meter: A training charge's ``TrainingMeter`` (``PrivacyLedger.charge_training``): the
            run is recorded as ``run_id`` by the mechanism just before it draws ``b``.
        run_id: The run's id in ``meter``'s bound (needed with ``meter``).

    Returns:
        An ``AMPResult``.

    Raises:
        ValueError: Malformed inputs (before any noise is drawn).
        AMPNotConvergedError: The tolerance ``τ`` was not reached within ``max_iter``.
    """
    if not isinstance(config, AMPConfig):
        raise ValueError(f"config must be an AMPConfig, got {type(config).__name__}.")
    features = amp_features(X, config)
    n, d = features.shape
    if n == 0 or d == 0:
        raise ValueError(f"X must have at least one row and one column (with the bias), got shape {tuple(X.shape)}.")
    labels = _check_labels(y, n, config.loss)
    if generator is None:
        noise_gen = None
    elif isinstance(generator, torch.Generator):
        warnings.warn(
            "A noise generator was given: the privacy noise is reproducible, and the guarantee "
            "assumes its state stays secret. Leave generator=None to draw the noise from OS entropy.",
            PrivacyWarning,
            stacklevel=2,
        )
        noise_gen = generator
    elif isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        noise_gen = noise_generator(int(generator), stacklevel=3)
    else:
        raise ValueError(f"generator must be None, a torch.Generator or an int seed, got {type(generator).__name__}.")
    mechanism = ObjectivePerturbationMechanism(dim=d, generator=noise_gen, **config.privacy_parameters)
    if meter is not None and run_id is None:
        raise ValueError("run_id=None: a meter records the run under its id; pass the id it was charged under.")
    b = mechanism.perturbation(meter=meter, run_id=run_id)
    theta_tilde, grad_norm, iterations = minimise_to_tolerance(features, labels, b, config)
    release = mechanism.release(theta_tilde, lambda t: perturbed_objective(t, features, labels, b, config)[1])
    diagnostics = None
    if nonprivate_diagnostics:
        diagnostics = AMPNonPrivateDiagnostics(
            theta_tilde=theta_tilde.clone(), perturbation=b.clone(), gradient_norm=grad_norm, iterations=iterations
        )
    return AMPResult(theta=release.theta, config=config, cost=release.cost, nonprivate_diagnostics=diagnostics)
