r"""A public geometric schedule of the clip bound: ``B_t = B·ρ^t`` (``DecayingClip``).

The bound shrinks by the public factor ``ρ`` each step (late steps, near a stationary point,
have smaller gradient estimates, so a smaller bound cuts the noise ``σ_t ∝ 2B_t/n``). The
schedule is fixed before any data is seen, so it costs no budget: no count is released and the
run's ``μ`` goes to the gradients as with ``FixedClip``. It wraps a ``FixedClip(B)`` that makes
each step's clipped sum at the bound this policy keeps in the ``ClipState`` (``B_0..B_t``,
public, reported as ``PrivateRelease.clip_bounds``); the noise schedule reads ``Δ_t = 2B_t/n``
off the sum. It does not provide the ``"fixed_clip_bound"`` the private preconditioner needs
(its released matrix sums every step's clipped mean under one sensitivity).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.clip import FixedClip, WrappedClip
from botorch_dp.optim.options.records import ClipState
from botorch_dp.optim.options.registry import register
from botorch_dp.privacy.checks import check_positive
from botorch_dp.privacy.ledger import Meter
from botorch_dp.privacy.mechanisms.sums import ClippedSum

__all__ = ["DecayingClip"]


@register("clip", "decaying")
@dataclass(frozen=True)
class DecayingClip(WrappedClip):
    r"""Clip step ``t`` at ``B_t = B·ρ^t`` (a public schedule; free).

    Args:
        bound: ``B > 0``, finite: the first step's bound.
        decay: ``ρ`` in ``(0, 1]`` (``1``: a fixed bound).
    """

    bound: float = 1.0
    decay: float = 0.9
    base: FixedClip = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", check_positive(self.bound, "bound (B)", allow_inf=False))
        decay = check_positive(self.decay, "decay (ρ)", allow_inf=False)
        if not decay <= 1.0:
            raise ValueError(f"decay (ρ) must lie in (0, 1], got {self.decay!r}.")
        object.__setattr__(self, "decay", decay)
        object.__setattr__(self, "base", FixedClip(self.bound))

    def at(self, step: int) -> float:
        r"""``B_t = B·ρ^t`` (``ValueError`` if it underflows to 0)."""
        bound = self.bound * self.decay**step
        if not bound > 0.0:
            raise ValueError(f"The decaying clip bound B·ρ^t = {self.bound!r}·{self.decay!r}^{step} underflows to 0.")
        return bound

    def initial_state(self) -> ClipState:
        return ClipState(bounds=(self.at(0),))

    def update(self, summed: ClippedSum, plan: RunPlan, state: ClipState, meter: Meter) -> ClipState:
        r"""The base's update (nothing released), then ``B_{t+1} = B·ρ^{t+1}`` (public)."""
        state = self.base.update(summed, plan, state, meter)
        return replace(state, bounds=(*state.bounds, self.at(len(state.bounds))))
