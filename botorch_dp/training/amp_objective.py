r"""The AMP training problem (Redberg, Koskela & Wang, Alg. 1): its public settings
(``AMPConfig``), the perturbed objective they define, ``L^P(θ) = Σ_z ℓ_C(θ; z) + (λ/2)‖θ‖² + bᵀθ``
with its exact float64 gradient (``clipped_glm_loss``, ``perturbed_objective``), and the
solver that minimises it until ``‖∇L^P(θ̃)‖₂ ≤ τ`` (``minimise_to_tolerance``). No noise is
drawn here: ``objective_perturbation.fit_amp`` draws ``b`` and the output noise through
``privacy.mechanisms.ObjectivePerturbationMechanism``, and re-exports these public names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize
from torch import Tensor

from botorch_dp.privacy.analysis.objective_perturbation import AMPParameters
from botorch_dp.privacy.checks import check_choice, check_greater, check_positive, check_positive_int
from botorch_dp.privacy.mechanisms import AMPNotConvergedError

__all__ = ["LOSSES", "AMPConfig", "clipped_glm_loss", "minimise_to_tolerance", "perturbed_objective"]

#: The GLM losses AMP supports: ``"logistic"`` (labels in {0, 1}) and ``"squared"``
#: (``½(u − y)²``, labels in [−1, 1]; Huber after clipping).
LOSSES: tuple[str, ...] = ("logistic", "squared")

#: ``sup f''`` of each loss (the clipped losses have ``f_C'' ≤ f''``).
_MAX_CURVATURE = {"logistic": 0.25, "squared": 1.0}


@dataclass(frozen=True, kw_only=True)
class AMPConfig:
    r"""Public settings of one AMP training run (all keyword-only, checked on creation).

    The defaults of ``clip``, ``sigma_out`` and ``tau`` are the authors' (unit rows plus a
    bias feature: ``‖x̃‖ ≤ √2``, so ``C = √2`` never clips the logistic loss).

    Attributes:
        lam: ``λ > β``, the ridge coefficient of the SUM objective (also on the bias); a
            mean-loss ``λ'`` corresponds to ``λ = nλ'``.
        sigma: ``σ > 0``, the std of the objective perturbation ``b``.
        loss: ``"logistic"`` or ``"squared"``.
        clip: ``C > 0``, the bound on every per-example gradient norm (``f'`` is clipped to
            ``[−C/‖x̃‖, C/‖x̃‖]``).
        feature_bound: ``R > 0``, the public bound on ``‖x‖``; rows with a larger norm are
            rescaled to norm ``R`` (a per-record map: free).
        fit_intercept: Append a constant feature 1 (``‖x̃‖² ≤ R² + 1``), regularised like
            the other coordinates.
        sigma_out: ``σ_out > 0``, the std of the output noise.
        tau: ``τ > 0``, the tolerance on ``‖∇L^P(θ̃)‖₂``.
        max_iter: Most solver iterations in all (L-BFGS iterations plus Newton refinement
            steps); if ``τ`` is not reached by then, ``fit_amp`` refuses to release.
    """

    lam: float
    sigma: float
    loss: str = "logistic"
    clip: float = math.sqrt(2.0)
    feature_bound: float = 1.0
    fit_intercept: bool = True
    sigma_out: float = 0.15
    tau: float = 5e-4
    max_iter: int = 1000

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        put("loss", check_choice(self.loss, "AMPConfig.loss", LOSSES))
        if not isinstance(self.fit_intercept, bool):
            raise ValueError(f"AMPConfig.fit_intercept must be a bool, got {self.fit_intercept!r}.")
        put("clip", check_positive(self.clip, "AMPConfig.clip (C)", allow_inf=False))
        put("feature_bound", check_positive(self.feature_bound, "AMPConfig.feature_bound (R)", allow_inf=False))
        put("lam", check_greater(self.lam, "AMPConfig.lam (λ > β)", self.beta))
        put("sigma", check_positive(self.sigma, "AMPConfig.sigma (σ)", allow_inf=False))
        put("sigma_out", check_positive(self.sigma_out, "AMPConfig.sigma_out (σ_out)", allow_inf=False))
        put("tau", check_positive(self.tau, "AMPConfig.tau (τ)", allow_inf=False))
        put("max_iter", check_positive_int(self.max_iter, "AMPConfig.max_iter"))

    @property
    def row_bound(self) -> float:
        r"""``R̃``, the bound on ``‖x̃‖`` with the bias feature: ``√(R² + 1)`` or ``R``."""
        return math.hypot(self.feature_bound, 1.0) if self.fit_intercept else self.feature_bound

    @property
    def beta(self) -> float:
        r"""``β = sup f'' · R̃²``, the smoothness of ``ℓ_C(·; z)`` (logistic with unit rows and
        a bias: 0.5)."""
        bound_sq = self.feature_bound**2 + (1.0 if self.fit_intercept else 0.0)
        return _MAX_CURVATURE[self.loss] * bound_sq

    @property
    def privacy_parameters(self) -> AMPParameters:
        r"""The keyword arguments of ``amp_rdp``/``amp_epsilon`` for this run."""
        return {
            "clip": self.clip,
            "beta": self.beta,
            "lam": self.lam,
            "sigma": self.sigma,
            "tau": self.tau,
            "sigma_out": self.sigma_out,
        }


def clipped_glm_loss(u: Tensor, y: Tensor, row_norm: Tensor, *, loss: str, clip: float) -> tuple[Tensor, Tensor]:
    r"""Per-example clipped GLM loss ``f_C(u; y)`` and its derivative ``f_C'(u; y)``.

    ``f_C = f`` between the breakpoints ``u_L, u_H`` with ``f'(u_L) = −C/‖x̃‖`` and
    ``f'(u_H) = C/‖x̃‖`` and continues linearly outside (Song et al. 2020, Lemma 5.1), so
    ``f_C' = clamp(f', −C/‖x̃‖, C/‖x̃‖)`` and every per-example gradient ``f_C'·x̃`` has norm
    at most ``C``. Squared loss ``½(u − y)²``: Huber with threshold ``C/‖x̃‖``. Logistic
    (``softplus(u) − yu``, ``y ∈ {0, 1}``): ``u_L = logit(y − C/‖x̃‖)`` and
    ``u_H = logit(y + C/‖x̃‖)`` where they exist (no clipping when ``C ≥ ‖x̃‖``). A row
    with ``‖x̃‖ = 0`` contributes the constant ``f(0; y)``.

    Args:
        u: An ``n`` tensor of margins ``x̃ᵀθ``.
        y: An ``n`` tensor of labels.
        row_norm: An ``n`` tensor of ``‖x̃‖``.
        loss: ``"logistic"`` or ``"squared"``.
        clip: ``C > 0``.

    Returns:
        Two ``n`` tensors: ``f_C(u; y)`` and ``f_C'(u; y)``.
    """
    k = clip / row_norm  # inf for a zero row: no clipping, and its gradient f'·0 vanishes
    if loss == "squared":
        lo, hi = y - k, y + k

        def f(v: Tensor) -> Tensor:
            return 0.5 * (v - y) ** 2

        slope = u - y
    else:
        inf = torch.full_like(u, math.inf)
        small = k < 1  # breakpoints exist only then
        k_safe = torch.where(small, k, torch.full_like(k, 0.5))
        logit_k = torch.log(k_safe) - torch.log1p(-k_safe)  # logit(k) = −logit(1 − k)
        lo = torch.where(small & (y == 1), -logit_k, -inf)  # logit(1 − k): f' = σ(u) − 1 ≥ −k above it
        hi = torch.where(small & (y == 0), logit_k, inf)  # logit(k): f' = σ(u) ≤ k below it

        def f(v: Tensor) -> Tensor:
            return torch.logaddexp(torch.zeros_like(v), v) - y * v

        slope = torch.sigmoid(u) - y
    inside = torch.clamp(u, min=lo, max=hi)
    slope = torch.clamp(slope, min=-k, max=k)
    # f(ū) + f_C'(u)(u − ū); the product is 0 inside, also for a zero row (k = inf)
    value = f(inside) + torch.where(u == inside, torch.zeros_like(u), slope * (u - inside))
    return value, slope


def perturbed_objective(
    theta: Tensor, features: Tensor, y: Tensor, perturbation: Tensor, config: AMPConfig
) -> tuple[Tensor, Tensor]:
    r"""``L^P(θ) = Σ_i f_C(x̃_iᵀθ; y_i) + (λ/2)‖θ‖² + bᵀθ`` and its exact gradient.

    The gradient ``X̃ᵀ f_C'(X̃θ) + λθ + b`` is analytic (no autograd), in float64.

    Args:
        theta: A ``d`` tensor ``θ``.
        features: The ``n x d`` features ``X̃`` (``amp_features``).
        y: The ``n`` labels.
        perturbation: The ``d`` tensor ``b``.
        config: The ``AMPConfig`` (``loss``, ``clip``, ``lam``).

    Returns:
        The scalar ``L^P(θ)`` (0-d tensor) and the ``d`` gradient ``∇L^P(θ)``.
    """
    return _Objective(features, y, perturbation, config).value_and_gradient(theta.to(torch.float64))


class _Objective:
    r"""``L^P`` on fixed data: value, exact gradient, Hessian-vector products (float64)."""

    def __init__(self, features: Tensor, y: Tensor, perturbation: Tensor, config: AMPConfig) -> None:
        self.features, self.y, self.b, self.config = features, y, perturbation, config
        self.row_norm = torch.linalg.vector_norm(features, dim=1)

    def _margins(self, theta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        u = self.features @ theta
        value, slope = clipped_glm_loss(u, self.y, self.row_norm, loss=self.config.loss, clip=self.config.clip)
        return u, value, slope

    def value_and_gradient(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        _, value, slope = self._margins(theta)
        objective = value.sum() + 0.5 * self.config.lam * theta.dot(theta) + self.b.dot(theta)
        return objective, self.features.transpose(0, 1) @ slope + self.config.lam * theta + self.b

    def gradient(self, theta: Tensor) -> Tensor:
        return self.value_and_gradient(theta)[1]

    def curvature(self, theta: Tensor) -> Tensor:
        r"""The ``n`` weights ``f_C''(x̃_iᵀθ)`` (0 on the linear pieces) of the Hessian."""
        u = self.features @ theta
        k = self.config.clip / self.row_norm
        if self.config.loss == "squared":
            return ((u - self.y).abs() < k).to(torch.float64)
        p = torch.sigmoid(u)
        return p * (1.0 - p) * ((p - self.y).abs() < k)


def _newton_step(objective: _Objective, theta: Tensor, grad: Tensor) -> Tensor:
    r"""One Newton-CG step with a line search that uses gradients only.

    The direction solves ``H p = −g`` by conjugate gradients with Hessian-vector products
    ``X̃ᵀ(w ⊙ X̃v) + λv``; the step length is the root of the directional derivative
    ``∇L^P(θ + αp)ᵀp`` (increasing in ``α``: ``L^P`` is convex). No function values are
    compared, so it keeps converging where float64 can no longer resolve the decrease of
    ``L^P`` (large ``n``), where L-BFGS's line search stops.
    """
    from scipy.optimize import brentq
    from scipy.sparse.linalg import LinearOperator, cg

    d = theta.shape[0]
    weights = objective.curvature(theta)
    features, lam = objective.features, objective.config.lam

    def hvp(v: np.ndarray) -> np.ndarray:
        v_t = torch.as_tensor(np.asarray(v, dtype=np.float64).reshape(-1))
        return (features.transpose(0, 1) @ (weights * (features @ v_t)) + lam * v_t).numpy()

    direction, _ = cg(
        LinearOperator((d, d), matvec=hvp, dtype=np.float64), -grad.numpy(), rtol=1e-12, maxiter=min(10 * d, 1000)
    )
    p = torch.as_tensor(direction, dtype=torch.float64)
    if not bool(torch.isfinite(p).all()) or float(p.dot(grad)) >= 0.0:
        p = -grad  # steepest descent: always a descent direction
    full = objective.gradient(theta + p)
    if float(full.norm()) <= 0.5 * float(grad.norm()):
        return theta + p  # the Newton step is good enough: no line search

    def slope(alpha: float) -> float:
        return float(objective.gradient(theta + alpha * p).dot(p))

    hi = 1.0
    for _ in range(60):  # bracket the root of the increasing directional derivative
        if slope(hi) >= 0.0:
            break
        hi *= 2.0
    alpha = brentq(slope, 0.0, hi, xtol=1e-15 * hi, rtol=1e-15, maxiter=200) if slope(hi) > 0 else hi
    return theta + alpha * p


def minimise_to_tolerance(features: Tensor, y: Tensor, b: Tensor, config: AMPConfig) -> tuple[Tensor, float, int]:
    r"""Minimise ``L^P`` until the exact ``‖∇L^P‖₂ ≤ τ``, in at most ``max_iter`` iterations.

    L-BFGS-B (scipy, float64) first; where it stops short of ``τ`` (typically because
    float64 no longer resolves the decrease of a large sum, ``n ≳ 10⁵``), Newton-CG steps
    with a gradient-only line search continue from its point. Changing the solver is free:
    only the final check matters. Returns ``(θ̃, ‖∇L^P(θ̃)‖₂, iterations)``; raises
    ``AMPNotConvergedError`` when the iterations run out first.
    """
    objective = _Objective(features, y, b, config)
    d = features.shape[1]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = objective.value_and_gradient(torch.tensor(x, dtype=torch.float64))
        return float(value), grad.numpy()

    # the ∞-norm test of L-BFGS-B at τ/(2√d) implies ‖g‖₂ ≤ τ/2, leaving room for the exact check
    res = minimize(
        fun,
        np.zeros(d),
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": config.max_iter,
            "maxfun": 20 * config.max_iter,
            "gtol": config.tau / (2.0 * math.sqrt(d)),
            "ftol": 0.0,
            "maxcor": 20,
            "maxls": 50,
        },
    )
    used = max(int(res.nit), 1)
    theta = torch.tensor(res.x, dtype=torch.float64)
    grad = objective.gradient(theta)
    while not float(grad.norm()) <= config.tau:
        if used >= config.max_iter or not bool(torch.isfinite(grad).all()):
            raise AMPNotConvergedError(
                f"The solver did not reach ‖∇L^P(θ̃)‖₂ ≤ τ = {config.tau:g} within max_iter = "
                f"{config.max_iter} iterations; nothing was released (raise max_iter)."
            )
        theta = _newton_step(objective, theta, grad)
        grad = objective.gradient(theta)
        used += 1
    return theta, float(grad.norm()), used
