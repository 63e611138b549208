r"""Location of the normal model: ℓ_i(θ) = ½‖x_i − θ‖² with x_i ~ N(θ*, I).

Sopa et al. Appendix E.3 / short version §4.1; the minimizer is the sample mean of the data.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel, PolynomialKernel
from torch import Tensor

from botorch_dp.objectives.per_user_problem import PerUserProblem


class NormalLocation(PerUserProblem):
    r"""Private estimation of the mean of a Gaussian by minimizing its NLL.

    Data: x_1..x_n ~ N(θ*, I_d) with θ* = (1, ..., 1) (paper: d = 5, n = 50).
    Per-user loss ℓ_i(θ) = ½‖x_i − θ‖², so f(θ) = (1/2n) Σ_i ‖x_i − θ‖² is
    minimized by the sample mean x̄ with f(x̄) = (1/2n) Σ_i ‖x_i − x̄‖².
    θ is the location itself; Θ = [-2, 4]^d by default (contains θ* and, with
    overwhelming probability, x̄); θ_0 = 0 as in the paper.

    Example:
        >>> problem = NormalLocation(seed=0)
        >>> losses = problem(torch.zeros(3, 5))  # 3 x 50, sensitive
    """

    name = "normal_location"

    def __init__(
        self,
        dim: int = 5,
        num_users: int = 50,
        true_location: float | Tensor = 1.0,
        bounds: Tensor | None = None,
        seed: int = 0,
        observation_noise_std: float = 0.0,
    ) -> None:
        r"""Generate the data x_i ~ N(θ*, I_d).

        Args:
            dim: The dimension d.
            num_users: The number of users n.
            true_location: θ*, a scalar (broadcast) or a ``d``-dim tensor.
            bounds: A ``2 x d``-dim tensor; defaults to [-2, 4]^d.
            seed: Seed of the data and of the observation-noise generator.
            observation_noise_std: The evaluation noise std σ (see base class).
        """
        if bounds is None:
            bounds = torch.tensor([[-2.0] * dim, [4.0] * dim], dtype=torch.float64)
        super().__init__(bounds=bounds, num_users=num_users, seed=seed, observation_noise_std=observation_noise_std)
        self.true_location = torch.as_tensor(true_location, dtype=torch.float64).expand(dim).clone()
        gen = torch.Generator().manual_seed(self._data_seed)
        #: ``n x d`` sensitive user records.
        self.data = self.true_location + torch.randn(num_users, dim, generator=gen, dtype=torch.float64)

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-user losses ½‖x_i − θ‖².

        Args:
            X: A ``q x d``-dim float64 tensor.

        Returns:
            A ``q x n``-dim tensor.
        """
        diff = X.unsqueeze(-2) - self.data  # q x n x d
        return 0.5 * diff.square().sum(dim=-1)

    def per_user_gradient(self, X: Tensor) -> Tensor:
        r"""Per-user gradients θ − x_i.

        Args:
            X: A ``q x d``-dim tensor (or ``d``-dim, treated as ``1 x d``).

        Returns:
            A ``q x n x d``-dim float64 tensor.
        """
        X2, batch_shape = self._flatten(X)
        grad = X2.unsqueeze(-2) - self.data
        return grad.reshape(*batch_shape, self.num_users, self.dim)

    @property
    def optimum(self) -> Tensor:
        r"""NON-PRIVATE: the sample mean x̄ (``d``-dim)."""
        return self.data.mean(dim=0)

    @property
    def optimal_value(self) -> float:
        r"""NON-PRIVATE: f(x̄) = (1/2n) Σ_i ‖x_i − x̄‖²."""
        return float(self.objective(self.optimum))

    def default_theta0(self) -> Tensor:
        r"""θ_0 = 0, the paper's start (Appendix E.3). Returns a ``d``-dim tensor."""
        return torch.zeros(self.dim, dtype=torch.float64)

    def recommended_kernel(self) -> Kernel:
        r"""Polynomial kernel of degree 2, k(x, y) = (xᵀy + 1)² (Appendix E.3).

        With this kernel f is in the RKHS for every data set. The offset is
        fixed to 1 and frozen.

        Returns:
            A float64 ``gpytorch.kernels.PolynomialKernel(power=2)``.
        """
        kernel = PolynomialKernel(power=2).to(torch.float64)
        kernel.offset = torch.ones(1, 1, dtype=torch.float64)
        kernel.raw_offset.requires_grad_(False)
        return kernel
