r"""Batch rules: how many points each step evaluates and how they are searched (``optim.batch_search``).

``FixedBatches(size)`` (Sopa et al., Alg. 1) and ``AdaptiveBatches(tolerance, max_size)``
(Alg. 2: the smallest batch whose posterior gradient trace reaches the tolerance, at most
``max_size`` points). Both search ``"joint"`` (``optimize_acqf`` over the whole batch) or
``"greedy"`` (one point at a time), with ``maxiter`` L-BFGS-B iterations per restart (``None``:
BoTorch's default), and ``speed`` (``"fast"``: closed-form acquisition gradients and warm starts
from the previous batch moved by the step; ``"reference"``: as before issue 33; see
``optim.batch_search``). Public computation only: no batch rule spends budget. ``BatchRule`` is
the family's protocol; the two rules share the search's settings, not a class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.batch_search import BATCH_SEARCHES, SEARCH_SPEEDS, BatchSearch, SearchSpeed, search_batch
from botorch_dp.optim.options.registry import Strategy, StrategyLike, register
from botorch_dp.privacy.checks import check_positive, check_positive_int

__all__ = ["AdaptiveBatches", "BatchRule", "FixedBatches", "batch_rule"]


class BatchRule(StrategyLike, Protocol):
    r"""How many points each step evaluates and how they are searched (public computation only)."""

    @property
    def tolerance(self) -> float | None:
        r"""The trace tolerance the batches are searched to (``None``: a fixed size)."""
        ...

    def per_step(self, default: int) -> int:
        r"""The most points a step evaluates (``default``: the projection's suggestion)."""
        ...

    def select(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        *,
        basis: Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: Tensor | None = None,
    ) -> Tensor:
        r"""The next batch around ``θ_t`` (a ``q x d`` tensor in ``bounds``; public)."""
        ...


def _check_search(rule: Any) -> None:
    r"""The search settings of a batch rule, checked and normalized (an integer ``maxiter``)."""
    if rule.search not in BATCH_SEARCHES:
        raise ValueError(f"batch_search must be one of {BATCH_SEARCHES}, got {rule.search!r}.")
    if rule.speed not in SEARCH_SPEEDS:
        raise ValueError(f"acqf_speed must be one of {SEARCH_SPEEDS}, got {rule.speed!r}.")
    if rule.maxiter is not None:
        object.__setattr__(rule, "maxiter", check_positive_int(rule.maxiter, "acqf_maxiter"))


@register("batches", "fixed")
@dataclass(frozen=True)
class FixedBatches(Strategy):
    r"""``size`` points per step (``None``: the projection's default, ``d + 1`` or ``k + 1``)."""

    size: int | None = None
    search: BatchSearch = "joint"
    maxiter: int | None = None
    speed: SearchSpeed = "fast"

    def __post_init__(self) -> None:
        if self.size is not None:
            object.__setattr__(self, "size", check_positive_int(self.size, "batch_size (b)"))
        _check_search(self)

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "size": self.size,
            "search": self.search,
            "maxiter": self.maxiter,
            "speed": self.speed,
        }

    @property
    def tolerance(self) -> float | None:
        r"""The adaptive rule's trace tolerance (none)."""
        return None

    def per_step(self, default: int) -> int:
        r"""The most points a step evaluates."""
        return self.size if self.size is not None else default

    def select(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        *,
        basis: Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: Tensor | None = None,
    ) -> Tensor:
        r"""The next batch (a ``q x d`` tensor; public); ``previous``: the last batch moved by the step."""
        size = self.per_step(default)
        return search_batch(
            gp,
            theta,
            bounds,
            generator,
            batch_search=self.search,
            batch_size=size,
            bias_tolerance=self.tolerance,
            max_batch_size=size,
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=self.maxiter,
            speed=self.speed,
            previous=previous,
        )


@register("batches", "adaptive")
@dataclass(frozen=True)
class AdaptiveBatches(Strategy):
    r"""Add points until ``tr Σ_D(θ) ≤ tolerance`` or ``max_size`` were added.

    Args:
        size: Must be ``None`` (kept first, so the fields read as before: ``size``, the search's
            ``search``, ``maxiter`` and ``speed`` as ``FixedBatches``'s, then these two).
        bias_tolerance: The tolerance (the paper's ε; here ε always means the privacy loss).
        max_size: ``b_max`` (``None``: the projection's default).
    """

    by_name_needs = "its bias_tolerance"

    size: int | None = None
    search: BatchSearch = "joint"
    maxiter: int | None = None
    speed: SearchSpeed = "fast"
    bias_tolerance: float = 0.1
    max_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "bias_tolerance", check_positive(self.bias_tolerance, "bias_tolerance", allow_inf=False)
        )
        if self.max_size is not None:
            object.__setattr__(self, "max_size", check_positive_int(self.max_size, "max_batch_size (b_max)"))
        if self.size is not None:
            raise ValueError("Give either batch_size (fixed) or bias_tolerance (adaptive), not both.")
        _check_search(self)

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "bias_tolerance": self.bias_tolerance,
            "max_size": self.max_size,
            "search": self.search,
            "maxiter": self.maxiter,
            "speed": self.speed,
        }

    @property
    def tolerance(self) -> float | None:
        return self.bias_tolerance

    def per_step(self, default: int) -> int:
        return self.max_size if self.max_size is not None else default

    def select(
        self,
        gp: GradientGP,
        theta: Tensor,
        bounds: Tensor,
        generator: torch.Generator,
        *,
        basis: Tensor | None,
        default: int,
        num_restarts: int,
        raw_samples: int,
        previous: Tensor | None = None,
    ) -> Tensor:
        return search_batch(
            gp,
            theta,
            bounds,
            generator,
            batch_search=self.search,
            batch_size=default,
            bias_tolerance=self.bias_tolerance,
            max_batch_size=self.per_step(default),
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            basis=basis,
            maxiter=self.maxiter,
            speed=self.speed,
            previous=previous,
        )


def batch_rule(
    size: int | None = None,
    *,
    bias_tolerance: float | None = None,
    max_size: int | None = None,
    search: BatchSearch = "joint",
    maxiter: int | None = None,
    speed: SearchSpeed = "fast",
) -> BatchRule:
    r"""``FixedBatches(size, ...)``, or ``AdaptiveBatches`` when a ``bias_tolerance`` is given
    (for code that chooses between the two rules by a value that may be ``None``)."""
    if bias_tolerance is None:
        if max_size is not None:
            raise ValueError("max_batch_size (b_max) is only used with bias_tolerance (adaptive batches).")
        return FixedBatches(size, search, maxiter, speed)
    return AdaptiveBatches(size, search, maxiter, speed, bias_tolerance=bias_tolerance, max_size=max_size)
