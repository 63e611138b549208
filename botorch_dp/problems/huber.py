r"""Weighted Huber linear regression with bounded per-user gradients.

Sopa et al. Appendix E.4 / short version §4.2: ℓ_i(θ) = ρ_c(y_i − x_iᵀθ) · min(1, 2/‖x_i‖²).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from botorch_dp.objectives.per_user_problem import PerUserProblem


def huber_rho(r: Tensor, c: float) -> Tensor:
    r"""Huber loss ρ_c(r) = ½r² for |r| ≤ c and c|r| − ½c² otherwise (elementwise)."""
    a = r.abs()
    return torch.where(a <= c, 0.5 * r.square(), c * a - 0.5 * c**2)


def huber_psi(r: Tensor, c: float) -> Tensor:
    r"""Derivative of the Huber loss, ψ_c(r) = clamp(r, −c, c) (elementwise)."""
    return r.clamp(min=-c, max=c)


class HuberRegression(PerUserProblem):
    r"""Robust linear regression with a down-weighted Huber loss.

    Data: x_i ~ N(0, I_d), y_i = x_iᵀθ* + ε_i with ε_i ~ N(0, 1), θ* = 1
    (paper: d = 4, n = 100, c = 1). Per-user loss

        ℓ_i(θ) = ρ_c(y_i − x_iᵀθ) · w_i,   w_i = min(1, 2/‖x_i‖²).

    The gradient −ψ_c(r_i) w_i x_i has norm at most c · min(‖x_i‖, 2/‖x_i‖)
    ≤ c√2 (so the paper's "true" clipping bound B = 1 is slightly below the
    supremum, √2 for c = 1). f is convex; its minimizer is found by a
    deterministic Newton-type solver (non-private diagnostic). θ is the
    regression coefficient vector; Θ = [-2, 4]^d by default; θ_0 = 0.
    """

    name = "huber"

    def __init__(
        self,
        dim: int = 4,
        num_users: int = 100,
        true_coefficients: float | Tensor = 1.0,
        huber_c: float = 1.0,
        bounds: Tensor | None = None,
        seed: int = 0,
        observation_noise_std: float = 0.0,
    ) -> None:
        r"""Generate the regression data.

        Args:
            dim: The number of covariates d.
            num_users: The number of users n.
            true_coefficients: θ*, a scalar (broadcast) or a ``d``-dim tensor.
            huber_c: The Huber tuning constant c.
            bounds: A ``2 x d``-dim tensor; defaults to [-2, 4]^d.
            seed: Seed of the data and of the observation-noise generator.
            observation_noise_std: The evaluation noise std σ (see base class).
        """
        if bounds is None:
            bounds = torch.tensor([[-2.0] * dim, [4.0] * dim], dtype=torch.float64)
        super().__init__(bounds=bounds, num_users=num_users, seed=seed, observation_noise_std=observation_noise_std)
        self.huber_c = float(huber_c)
        self.true_coefficients = torch.as_tensor(true_coefficients, dtype=torch.float64).expand(dim).clone()
        gen = torch.Generator().manual_seed(self._data_seed)
        #: ``n x d`` sensitive covariates.
        self.covariates = torch.randn(num_users, dim, generator=gen, dtype=torch.float64)
        #: ``n`` sensitive responses.
        self.responses = self.covariates @ self.true_coefficients + torch.randn(
            num_users, generator=gen, dtype=torch.float64
        )
        #: ``n`` weights min(1, 2/‖x_i‖²).
        self.weights = torch.clamp(2.0 / self.covariates.square().sum(dim=-1), max=1.0)
        self._optimum: Tensor | None = None

    def _residuals(self, X: Tensor) -> Tensor:
        r"""Residuals y_i − x_iᵀθ as a ``q x n``-dim tensor for ``q x d``-dim X."""
        return self.responses - X @ self.covariates.T

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-user weighted Huber losses.

        Args:
            X: A ``q x d``-dim float64 tensor.

        Returns:
            A ``q x n``-dim tensor.
        """
        return huber_rho(self._residuals(X), self.huber_c) * self.weights

    def per_user_gradient(self, X: Tensor) -> Tensor:
        r"""Per-user gradients −ψ_c(y_i − x_iᵀθ) w_i x_i.

        Args:
            X: A ``q x d``-dim tensor (or ``d``-dim, treated as ``1 x d``).

        Returns:
            A ``q x n x d``-dim float64 tensor.
        """
        X2, batch_shape = self._flatten(X)
        scale = -huber_psi(self._residuals(X2), self.huber_c) * self.weights  # q x n
        grad = scale.unsqueeze(-1) * self.covariates
        return grad.reshape(*batch_shape, self.num_users, self.dim)

    @property
    def optimum(self) -> Tensor:
        r"""NON-PRIVATE: argmin f (``d``-dim), computed once by a trust-region Newton solver."""
        if self._optimum is None:
            self._optimum = self._solve()
        return self._optimum

    @property
    def optimal_value(self) -> float:
        r"""NON-PRIVATE: min f."""
        return float(self.objective(self.optimum))

    def default_theta0(self) -> Tensor:
        r"""θ_0 = 0, the paper's start (Appendix E.4). Returns a ``d``-dim tensor."""
        return torch.zeros(self.dim, dtype=torch.float64)

    def _solve(self) -> Tensor:
        r"""Minimize the convex f with exact gradient and generalized Hessian."""
        Xc = self.covariates.numpy()
        y = self.responses.numpy()
        w = self.weights.numpy()
        c = self.huber_c
        n = self.num_users

        def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
            r = y - Xc @ theta
            a = np.abs(r)
            rho = np.where(a <= c, 0.5 * r**2, c * a - 0.5 * c**2)
            psi = np.clip(r, -c, c)
            return float((rho * w).mean()), -(Xc.T @ (psi * w)) / n

        def hess(theta: np.ndarray) -> np.ndarray:
            inside = (np.abs(y - Xc @ theta) <= c).astype(np.float64)
            # A tiny ridge keeps the generalized Hessian invertible when few
            # residuals are inside the quadratic zone; it does not move the
            # stationary point that the exact gradient defines.
            return (Xc.T * (w * inside)) @ Xc / n + 1e-12 * np.eye(self.dim)

        from scipy.optimize import minimize  # on first use: importing the package stays light

        res = minimize(
            fun, np.zeros(self.dim), jac=True, hess=hess, method="trust-exact", options={"gtol": 1e-13, "maxiter": 1000}
        )
        return torch.as_tensor(res.x, dtype=torch.float64)
