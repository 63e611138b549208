r"""Abstract benchmark problem whose evaluation returns one loss per user.

``PerUserProblem`` is the interface that the DP-GIBO loop consumes: ``problem(X)`` gives ℓ_i(θ).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from gpytorch.kernels import Kernel, RBFKernel
from torch import Tensor

from botorch_dp.utils import check_bounds, child_seeds


class PerUserProblem(ABC):
    r"""A minimization problem f(θ) = (1/n) Σ_i ℓ_i(θ) over a box Θ ⊂ R^d.

    Calling the problem on a batch of parameters returns the matrix of per-user
    losses ℓ_i(θ) = L(θ, x_i). These values are SENSITIVE: they are what the
    private loop clips, aggregates and noises. ``objective`` and ``optimum`` /
    ``optimal_value`` are NON-PRIVATE diagnostics computed from the same data.

    Observation noise (Sopa et al., §2 and Appendix E.5): with
    ``observation_noise_std`` σ > 0 each evaluated point θ gets ONE draw
    ε ~ N(0, σ²), added to every user's loss at that point, i.e.
    y_i(θ) = ℓ_i(θ) + ε. Each user's observed loss therefore has noise σ, and so
    does the mean loss (1/n) Σ_i y_i(θ) = f(θ) + ε (the "f + λZ" of E.5). The
    draws come from a ``torch.Generator`` the problem owns, seeded from ``seed``
    independently of the data generator; the global RNG state is never touched.

    Attributes:
        dim: The parameter dimension d.
        num_users: The number of users n.
        bounds: A ``2 x d``-dim float64 tensor of lower and upper bounds of Θ.
        name: A short registry name of the problem.
        observation_noise_std: The observation noise standard deviation σ.
    """

    name: str = "per_user_problem"

    def __init__(self, bounds: Tensor, num_users: int, seed: int = 0, observation_noise_std: float = 0.0) -> None:
        r"""Store the box, the number of users and the noise generator.

        Args:
            bounds: A ``2 x d``-dim tensor of finite lower and upper bounds of Θ
                (lower < upper in every dimension).
            num_users: The number of users n.
            seed: The seed from which the data and the observation-noise
                generators are derived.
            observation_noise_std: The standard deviation σ ≥ 0 of the noise
                added to each evaluation (one draw per point, shared by users).
        """
        bounds = check_bounds(bounds)
        if observation_noise_std < 0:
            raise ValueError("observation_noise_std must be non-negative.")
        self.bounds = bounds
        self.dim = bounds.shape[-1]
        self.num_users = int(num_users)
        self.seed = int(seed)
        self.observation_noise_std = float(observation_noise_std)
        # separate streams: one seed for both would make the first observation-noise draw
        # equal the first data draw
        data_seed, noise_seed = child_seeds(self.seed, 2)
        self._data_seed = data_seed
        self.noise_generator = torch.Generator().manual_seed(noise_seed)

    # ------------------------------------------------------------------ losses
    @abstractmethod
    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Noise-free per-user losses.

        Args:
            X: A ``q x d``-dim float64 tensor of parameters.

        Returns:
            A ``q x n``-dim float64 tensor with entry (j, i) = ℓ_i(X[j]).
        """

    def __call__(self, X: Tensor) -> Tensor:
        r"""Evaluate the (possibly noisy) per-user losses. The output is sensitive.

        Args:
            X: A ``q x d``-dim tensor of parameters (a ``d``-dim tensor is
                treated as ``1 x d``; extra leading batch dimensions
                ``batch_shape x q x d`` are allowed).

        Returns:
            A ``q x n``-dim (``batch_shape x q x n``) float64 tensor of per-user
            losses, with the shared observation noise added when σ > 0.
        """
        X2, batch_shape = self._flatten(X)
        losses = self.evaluate_true(X2)
        if self.observation_noise_std > 0:
            noise = torch.randn(X2.shape[0], 1, generator=self.noise_generator, dtype=torch.float64)
            losses = losses + self.observation_noise_std * noise
        return losses.reshape(*batch_shape, self.num_users)

    def objective(self, X: Tensor) -> Tensor:
        r"""NON-PRIVATE diagnostic: the noise-free mean loss f(θ) = (1/n) Σ_i ℓ_i(θ).

        Args:
            X: A ``q x d``-dim tensor (or ``d``-dim, or ``batch_shape x q x d``).

        Returns:
            A ``q``-dim (``batch_shape x q``; ``1`` for a ``d``-dim input)
            float64 tensor of mean losses.
        """
        X2, batch_shape = self._flatten(X)
        return self.evaluate_true(X2).mean(dim=-1).reshape(batch_shape)

    def per_user_gradient(self, X: Tensor) -> Tensor:
        r"""Exact per-user gradients ∇_θ ℓ_i(θ) of the noise-free losses.

        Args:
            X: A ``q x d``-dim tensor of parameters.

        Returns:
            A ``q x n x d``-dim float64 tensor.

        Raises:
            NotImplementedError: If the problem has no closed-form gradient.
        """
        raise NotImplementedError(f"{type(self).__name__} has no closed-form per-user gradient.")

    # ------------------------------------------------------ public quantities
    @property
    def optimum(self) -> Tensor | None:
        r"""NON-PRIVATE: the minimizer of f as a ``d``-dim tensor, or None if unknown."""
        return None

    @property
    def optimal_value(self) -> float | None:
        r"""NON-PRIVATE: the minimum of f, or None if unknown."""
        return None

    def default_theta0(self) -> Tensor:
        r"""A data-independent starting point θ_0 (the centre of the box).

        Returns:
            A ``d``-dim float64 tensor.
        """
        return self.bounds.mean(dim=0)

    def sample_in_bounds(self, num_samples: int, seed: int | None = None) -> Tensor:
        r"""Uniform random points in Θ (data-independent, e.g. random restarts).

        Args:
            num_samples: The number of points.
            seed: Seed for a local generator (no global RNG state is used).

        Returns:
            A ``num_samples x d``-dim float64 tensor.
        """
        gen = torch.Generator()
        if seed is not None:
            gen.manual_seed(int(seed))
        else:
            gen.seed()
        u = torch.rand(num_samples, self.dim, generator=gen, dtype=torch.float64)
        return self.bounds[0] + u * (self.bounds[1] - self.bounds[0])

    def recommended_kernel(self) -> Kernel:
        r"""The surrogate kernel used for this problem in the paper.

        Default: RBF with all length-scales fixed to 1 (Sopa et al., Appendix E.1,
        E.2), hyperparameters frozen (they must not be fit on sensitive losses).

        Returns:
            A float64 gpytorch kernel on ``d``-dim inputs.
        """
        kernel = RBFKernel(ard_num_dims=self.dim).to(torch.float64)
        kernel.lengthscale = torch.ones(1, self.dim, dtype=torch.float64)
        kernel.raw_lengthscale.requires_grad_(False)
        return kernel

    # ------------------------------------------------------------- helpers
    def _flatten(self, X: Tensor) -> tuple[Tensor, torch.Size]:
        r"""Cast to float64 and flatten ``batch_shape x q x d`` to ``(prod) x d``."""
        X = torch.as_tensor(X).to(dtype=torch.float64, device=self.bounds.device)
        if X.ndim == 0 or X.shape[-1] != self.dim:
            raise ValueError(f"Expected a tensor whose last dimension is d={self.dim}, got shape {tuple(X.shape)}.")
        if X.ndim == 1:
            X = X.unsqueeze(0)
        return X.reshape(-1, self.dim), X.shape[:-1]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(dim={self.dim}, num_users={self.num_users}, "
            f"seed={self.seed}, observation_noise_std={self.observation_noise_std})"
        )
