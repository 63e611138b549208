r"""Adaptive clipping under a public ceiling: ``B_{t+1} = min(B_t·exp(−η_C (b̃_t/n − γ)), B_max)``.

``QuantileClip`` moves the bound towards a private ``γ``-quantile of the norms ``‖A y_i‖``; while
most norms lie above the bound it grows by up to ``e^{η_C γ}`` a step, and the gradient noise
``σ_t ∝ B_t`` grows with it. When a public bound on the norms is known (bounded losses, a known
kernel), clipping above it only adds noise: ``CappedQuantileClip`` never moves past ``B_max``. It
wraps a ``QuantileClip`` that makes the sums and releases the counts (same charge, same ledger
keys); the cap is post-processing of the released counts, so it costs nothing, and ``replay``
recomputes the capped bounds from the counts exactly (what resume checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.clip import (
    DEFAULT_CLIP_INIT,
    DEFAULT_CLIP_LEARNING_RATE,
    DEFAULT_CLIP_MU_FRACTION,
    DEFAULT_CLIP_QUANTILE,
    ClipState,
    QuantileClip,
    WrappedClip,
    replay_bounds,
)
from botorch_dp.optim.options.registry import register
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import Meter
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["CappedQuantileClip"]


@register("clip", "capped_adaptive")
@dataclass(frozen=True)
class CappedQuantileClip(WrappedClip):
    r"""``QuantileClip`` whose bound never exceeds the public ``max_bound`` (``B_max``).

    Args:
        max_bound: ``B_max > 0``, finite, at least ``bound``.
        bound, quantile, learning_rate, fraction: the wrapped ``QuantileClip``'s ``B₀``, ``γ``,
            ``η_C`` and ``f_C``.
    """

    max_bound: float
    bound: float = DEFAULT_CLIP_INIT
    quantile: float = DEFAULT_CLIP_QUANTILE
    learning_rate: float = DEFAULT_CLIP_LEARNING_RATE
    fraction: float = DEFAULT_CLIP_MU_FRACTION
    base: QuantileClip = field(init=False, repr=False, compare=False)
    needs_finite_mu = QuantileClip.needs_finite_mu

    def __post_init__(self) -> None:
        base = QuantileClip(self.bound, self.quantile, self.learning_rate, self.fraction)  # checks its four
        cap = check_positive(self.max_bound, "max_bound (B_max)", allow_inf=False)
        if cap < base.bound:
            raise ValueError(f"max_bound (B_max) = {self.max_bound!r} is below clip_init (B₀) = {self.bound!r}.")
        object.__setattr__(self, "max_bound", cap)
        for name in ("bound", "quantile", "learning_rate", "fraction"):
            object.__setattr__(self, name, getattr(base, name))
        object.__setattr__(self, "base", base)

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        r"""The base's count and move, then the new bound capped at ``B_max`` (post-processing)."""
        state = self.base.update(summed, plan, state, meter)
        return replace(state, bounds=(*state.bounds[:-1], min(state.bounds[-1], self.max_bound)))

    def replay(self, counts: Sequence[float], num_users: int | None) -> list[float]:
        r"""``[B_0, …, B_t]`` from the released counts, each move capped as ``update`` caps it."""
        return replay_bounds(
            self.bound, counts, num_users, lambda bound, count, n: min(self.base.moved(bound, count, n), self.max_bound)
        )
