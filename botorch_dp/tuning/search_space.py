r"""The search space of continuous hyperparameters: the unit cube DP-GIBO searches ↦ natural units.

Coordinates: DP-GIBO works on the unit cube ``[0, 1]^d``, so that one kernel
length-scale, one search radius and one step size fit every hyperparameter; a
``SearchSpace`` maps a point of the cube to natural units (log-uniformly for
log-scaled hyperparameters such as the learning rate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["Hyperparameter", "SearchSpace", "default_mlp_space"]


@dataclass(frozen=True)
class Hyperparameter:
    r"""A continuous hyperparameter with a public range.

    Attributes:
        name: The key under which the natural value is passed to the model and trainer.
        lower: Lower end of the range in natural units.
        upper: Upper end of the range in natural units.
        log_scale: Search ``log10`` of the value (``lower`` must then be positive).
    """

    name: str
    lower: float
    upper: float
    log_scale: bool = False

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise ValueError(f"{self.name}: lower must be below upper.")
        if self.log_scale and self.lower <= 0:
            raise ValueError(f"{self.name}: a log-scaled range must be positive.")

    @property
    def search_range(self) -> tuple[float, float]:
        r"""The range in search units (``log10`` for log-scaled hyperparameters)."""
        if self.log_scale:
            return math.log10(self.lower), math.log10(self.upper)
        return float(self.lower), float(self.upper)


class SearchSpace:
    r"""Maps the unit cube ``[0, 1]^d`` that DP-GIBO searches to natural hyperparameters.

    Coordinate ``u_j ∈ [0, 1]`` becomes ``s_j = a_j + u_j (b_j − a_j)`` in search units
    (``[a_j, b_j]`` = ``Hyperparameter.search_range``) and then ``10^{s_j}`` for
    log-scaled hyperparameters, ``s_j`` otherwise.

    Args:
        hyperparameters: The ``d`` hyperparameters, in the order of θ's coordinates.
    """

    def __init__(self, hyperparameters: Sequence[Hyperparameter]) -> None:
        self.hyperparameters = tuple(hyperparameters)
        if not self.hyperparameters:
            raise ValueError("A search space needs at least one hyperparameter.")
        names = [h.name for h in self.hyperparameters]
        if len(set(names)) != len(names):
            raise ValueError(f"Hyperparameter names must be unique, got {names}.")

    @property
    def dim(self) -> int:
        return len(self.hyperparameters)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hyperparameters]

    @property
    def bounds(self) -> Tensor:
        r"""``2 x d`` float64 tensor of the unit cube (the box Θ of DP-GIBO)."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)

    def to_search_units(self, theta: Tensor) -> Tensor:
        r"""Unit-cube coordinates to search units (``log10`` for log-scaled ones).

        Args:
            theta: A ``batch_shape x d`` tensor in ``[0, 1]^d``.

        Returns:
            A ``batch_shape x d`` float64 tensor.
        """
        theta = torch.as_tensor(theta, dtype=torch.float64)
        lo, hi = torch.tensor([h.search_range for h in self.hyperparameters], dtype=torch.float64).T
        return lo + theta.clamp(0.0, 1.0) * (hi - lo)

    def to_natural(self, theta: Tensor) -> list[dict[str, float]] | dict[str, float]:
        r"""Unit-cube coordinates to natural hyperparameter values.

        Args:
            theta: A ``d`` tensor or a ``q x d`` tensor in ``[0, 1]^d`` (values outside are
                clamped).

        Returns:
            ``{name: value}`` for a ``d`` tensor, a list of ``q`` such dicts otherwise.
        """
        s = self.to_search_units(theta)
        single = s.dim() == 1
        rows = []
        for row in s.reshape(-1, self.dim).tolist():
            rows.append({
                h.name: (10.0**v if h.log_scale else v) for h, v in zip(self.hyperparameters, row)
            })
        return rows[0] if single else rows

    def from_natural(self, values: Mapping[str, float]) -> Tensor:
        r"""Natural hyperparameter values to unit-cube coordinates.

        Args:
            values: ``{name: value}`` with every hyperparameter of the space.

        Returns:
            A ``d`` float64 tensor.
        """
        out = []
        for h in self.hyperparameters:
            v = float(values[h.name])
            v = math.log10(v) if h.log_scale else v
            a, b = h.search_range
            out.append((v - a) / (b - a))
        return torch.tensor(out, dtype=torch.float64)

    def describe(self) -> list[dict[str, Any]]:
        r"""The space as plain values (for a JSON report)."""
        return [
            {"name": h.name, "lower": h.lower, "upper": h.upper, "log_scale": h.log_scale}
            for h in self.hyperparameters
        ]


def default_mlp_space() -> SearchSpace:
    r"""θ = (learning rate, weight decay, dropout rate) of an SGD-trained MLP.

    Learning rate in ``[1e-4, 0.3]`` and weight decay in ``[1e-6, 1e-1]`` (both searched
    in ``log10``), dropout in ``[0, 0.5]``. Public, chosen without looking at any data.
    """
    return SearchSpace([
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ])

