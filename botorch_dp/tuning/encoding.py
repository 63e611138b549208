r"""The public unit-cube encoding of a mixed search space, for methods that only sample a cube.

Private random search and DP-HyPO draw points of a box; a mixed space (``Categorical``
hyperparameters next to continuous and integer ones) is handed to them as the cube
``[0, 1]^D`` with ``D = d + c``: the space's ``d`` relaxed coordinates (integers rounded by the
space on the way out), then one coordinate per categorical not fixed in the space, split into
equal shares (``u ∈ [j/m, (j+1)/m)`` is choice ``j`` of ``m``; ``u = 1`` is the last), so a
uniform point of the cube is uniform over each categorical. The encoding depends on the space
only: it is public and fixed before any run, and decoding a released point is post-processing.

``EncodedObjective`` evaluates ``tune``'s objective (configurations in natural units, or a
``SearchSpaceObjective`` taking θ) at encoded points: the rows are grouped by configuration
and each group is evaluated once, with that configuration bound (``configs_objective``). Its
``bound(configuration)`` and ``encode`` are what the enumerate procedure evaluates
(``methods.enumerate.ConfigurationObjective``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from botorch_dp.objectives.search_space import SearchSpace
from botorch_dp.tuning.tune_result import TuneObjective, configs_objective

__all__ = ["EncodedObjective", "MixedEncoding", "natural_point"]


def natural_point(space: SearchSpace, theta: Tensor, choice: dict[str, Any] | None = None) -> dict[str, Any]:
    r"""``space.to_natural`` of one ``d`` point: ``{name: value}`` (plain Python values)."""
    natural = space.to_natural(torch.as_tensor(theta, dtype=torch.float64).reshape(-1), choice=choice)
    assert isinstance(natural, dict)  # one point
    return dict(natural)


class MixedEncoding:
    r"""The unit-cube encoding of ``space``: its ``d`` coordinates, then one per free categorical.

    Args:
        space: The mixed ``SearchSpace`` (categoricals fixed in it get no coordinate).
    """

    def __init__(self, space: SearchSpace) -> None:
        if not isinstance(space, SearchSpace):
            raise ValueError(f"space must be a SearchSpace, got {type(space).__name__}.")
        self.space = space
        self.categoricals = tuple(h for h in space.categoricals if h.name not in space.fixed)
        self.sizes = [len(h.choices) for h in self.categoricals]
        self.dim = space.dim + len(self.sizes)

    @property
    def bounds(self) -> Tensor:
        r"""``2 x D`` float64 unit cube (``D = d + number of free categoricals``)."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)

    def indices(self, X: Tensor) -> Tensor:
        r"""``q x c`` long tensor: the choice index of each categorical (equal shares of ``[0, 1]``)."""
        U = X[..., self.space.dim :].clamp(0.0, 1.0)
        sizes = torch.tensor(self.sizes, dtype=torch.float64)
        return torch.minimum(torch.floor(U * sizes), sizes - 1).long()

    def centres(self, indices: Tensor) -> Tensor:
        r"""The cube coordinate at the centre of each choice's share (inverse of ``indices``)."""
        return (indices.to(torch.float64) + 0.5) / torch.tensor(self.sizes, dtype=torch.float64)

    def choice(self, index_row: list[int]) -> dict[str, Any]:
        r"""``{name: value}`` of the free categoricals for one row of choice indices."""
        return {h.name: h.choices[int(i)] for h, i in zip(self.categoricals, index_row, strict=True)}

    def encode(self, theta: Tensor, choice: dict[str, Any]) -> Tensor:
        r"""The encoded ``D`` point of relaxed coordinates ``theta`` (``d``) in configuration
        ``choice``: the categorical coordinates at the centres of the chosen shares."""
        index = torch.tensor([h.choices.index(h.check(choice[h.name])) for h in self.categoricals], dtype=torch.long)
        return torch.cat([torch.as_tensor(theta, dtype=torch.float64).reshape(-1), self.centres(index)])

    def configuration(self, x: Tensor) -> dict[str, Any]:
        r"""The free categoricals' values of one encoded point."""
        return self.choice(self.indices(torch.as_tensor(x, dtype=torch.float64)[None])[0].tolist())

    def to_natural(self, x: Tensor) -> dict[str, Any]:
        r"""Natural values (plain Python) of one encoded point."""
        x = torch.as_tensor(x, dtype=torch.float64)
        return natural_point(self.space, x[: self.space.dim], self.configuration(x))

    def objective_for(self, objective: TuneObjective, index_row: list[int]) -> Any:
        r"""``objective`` bound to the configuration of one row of choice indices (θ ↦ losses)."""
        return configs_objective(objective, self.space, self.choice(index_row))

    def objective(self, objective: TuneObjective) -> EncodedObjective:
        r"""``objective`` on the encoded cube."""
        return EncodedObjective(objective, self)


class EncodedObjective:
    r"""``X`` (``q x D`` encoded) ↦ ``q x n`` losses: rows grouped by configuration, each group
    evaluated by ``objective`` bound to that configuration at its relaxed coordinates."""

    def __init__(self, objective: TuneObjective, encoding: MixedEncoding) -> None:
        self.base = objective
        self.encoding = encoding

    def bound(self, configuration: dict[str, Any]) -> Any:
        r"""``objective`` bound to ``configuration`` (θ ↦ losses over the relaxed coordinates)."""
        return configs_objective(self.base, self.encoding.space, configuration)

    def encode(self, theta: Tensor, configuration: dict[str, Any]) -> Tensor:
        r"""The encoded point of relaxed ``theta`` in ``configuration`` (``MixedEncoding.encode``)."""
        return self.encoding.encode(theta, configuration)

    def __call__(self, X: Tensor) -> Tensor:
        X = torch.as_tensor(X, dtype=torch.float64).reshape(-1, self.encoding.dim)
        idx = self.encoding.indices(X)
        configs, group = torch.unique(idx, dim=0, return_inverse=True)
        out: Tensor | None = None
        for g, row in enumerate(configs.tolist()):  # one evaluation per configuration present
            rows = group == g
            losses = torch.as_tensor(self.encoding.objective_for(self.base, row)(X[rows, : self.encoding.space.dim]))
            if out is None:
                out = torch.empty(X.shape[0], losses.shape[-1], dtype=torch.float64)
            out[rows] = losses.to(torch.float64)
        assert out is not None
        return out
