r"""Synthetic users for tests and benchmarks of partitioned runs, generated where they are evaluated.

``SyntheticUsers(num_users, dim, seed)`` is a ``UserPartition`` whose users' data are two
numbers each, regenerated from ``seed`` on every call (nothing is stored, so a worker
holds only the loss rows, and a recomputation gives the same losses bit for bit):

    ℓ_i(θ) = s_i ‖θ − c‖² + u_i vᵀ(θ − c),   s_i ∈ [0.5, 1.5), u_i ∈ [−1, 1) uniform,

with ``c = (0.3, …, 0.3)`` and ``v = (1, …, 1)/√d``: quadratic bowls of different curvature
and tilt, so the per-user gradient estimates differ and some are clipped.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_dp.privacy.checks import check_positive_int

__all__ = ["SyntheticUsers", "synthetic_partitions"]


class SyntheticUsers:
    r"""A ``UserPartition`` of ``num_users`` synthetic users (see the module docstring).

    Args:
        num_users: ``n_P``.
        dim: ``d``.
        seed: Seed of this partition's users (give each partition its own).
    """

    def __init__(self, num_users: int, dim: int, seed: int) -> None:
        self.num_users = check_positive_int(num_users, "num_users")
        self.dim = check_positive_int(dim, "dim")
        self.seed = int(seed)

    def user_data(self) -> tuple[Tensor, Tensor]:
        r"""The ``n_P`` curvatures ``s`` and tilts ``u`` (SENSITIVE: the users' data)."""
        g = torch.Generator().manual_seed(self.seed)
        su = torch.rand(2, self.num_users, generator=g, dtype=torch.float64)
        return su[0] + 0.5, 2.0 * su[1] - 1.0

    def __call__(self, X: Tensor) -> Tensor:
        r"""The ``b x n_P`` losses at the ``b x d`` points ``X`` (SENSITIVE)."""
        X = torch.as_tensor(X, dtype=torch.float64).reshape(-1, self.dim)
        s, u = self.user_data()
        delta = X - 0.3
        bowl = (delta * delta).sum(-1, keepdim=True)  # b x 1
        tilt = delta.sum(-1, keepdim=True) / self.dim**0.5  # b x 1
        return bowl * s + tilt * u

    def __repr__(self) -> str:
        return f"SyntheticUsers(num_users={self.num_users}, dim={self.dim}, seed=...)"


def synthetic_partitions(sizes: list[int], dim: int, seed: int) -> list[SyntheticUsers]:
    r"""One ``SyntheticUsers`` per size, with seeds ``seed, seed + 1, …``."""
    return [SyntheticUsers(n, dim, seed + k) for k, n in enumerate(sizes)]
