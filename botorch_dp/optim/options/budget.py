r"""How a run's privacy budget ``μ`` is split between its releases, in one place.

``μ_sel`` (a charged selection of the returned iterate) comes off the top:
``μ_steps = √(μ² − μ_sel²)``. The steps' share is then split between the gradient releases
(``μ_g``, which the noise schedule spends), adaptive clipping's counts (``μ_C = μ_steps√f_C``)
and the private preconditioner's releases (``μ_H = μ_steps√f_H``), so that
``μ_g² + μ_C² + μ_H² = μ_steps²`` and the whole run is ``μ``-GDP (GDP composes as the root
sum of squares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["BudgetSplit", "recorded_mus", "resolved_mu", "room_left"]


@dataclass(frozen=True)
class BudgetSplit:
    r"""The μ of each kind of release of a run (public).

    Attributes:
        privacy_mu: ``μ``, the whole run.
        selection_mu: ``μ_sel`` (0 for a free selection).
        clip_fraction: ``f_C`` of adaptive clipping (None: no clip counts).
        precond_fraction: ``f_H`` of the private preconditioner (None: none released).
    """

    privacy_mu: float
    selection_mu: float = 0.0
    clip_fraction: float | None = None
    precond_fraction: float | None = None

    def __post_init__(self) -> None:
        shares = (self.clip_fraction or 0.0) + (self.precond_fraction or 0.0)
        if not shares < 1.0:
            raise ValueError(
                f"The clip counts' and the preconditioner's shares of the steps' budget add up to {shares:g}; "
                "they must leave room for the gradients (a sum below 1)."
            )

    @property
    def steps_mu(self) -> float:
        r"""``μ_steps = √(μ² − μ_sel²)`` (exactly ``μ`` without a charged selection)."""
        if self.selection_mu == 0.0 or math.isinf(self.privacy_mu):
            return self.privacy_mu
        return math.sqrt(math.fsum([self.privacy_mu * self.privacy_mu, -(self.selection_mu * self.selection_mu)]))

    @property
    def gradient_mu(self) -> float:
        r"""``μ_g``: the gradient releases' share (the noise schedule's total)."""
        mu = self.steps_mu
        if self.clip_fraction is None and self.precond_fraction is None:
            return mu
        # a missing share counts as 0.0 (x - 0.0 == x exactly, so one formula covers the three cases)
        return mu * math.sqrt(1.0 - (self.clip_fraction or 0.0) - (self.precond_fraction or 0.0))

    @property
    def clip_mu(self) -> float | None:
        r"""``μ_C = μ_steps √f_C``: all clip counts together (None without adaptive clipping)."""
        return None if self.clip_fraction is None else self.steps_mu * math.sqrt(self.clip_fraction)

    @property
    def precond_mu(self) -> float | None:
        r"""``μ_H = μ_steps √f_H``: all preconditioner releases together (None without them)."""
        return None if self.precond_fraction is None else self.steps_mu * math.sqrt(self.precond_fraction)


def room_left(room: float, others: dict) -> float:
    r"""What the ledger's ``room`` leaves for the noise schedule once a step's other parts (a clip
    count, a preconditioner; ``{part: Gaussian}``) are set aside: ``√(room² − Σ μ²)`` (``room``
    itself without any)."""
    if not others or math.isinf(room):
        return room
    return math.sqrt(max(room * room - math.fsum(e.mu * e.mu for e in others.values()), 0.0))


def resolved_mu(privacy_mu: float | None) -> float:
    r"""A config's ``privacy_mu`` once ``DPGIBOConfig`` has resolved it (from ``privacy_mu`` or
    ``(epsilon, delta)``); ``ValueError`` if it is still ``None``."""
    if privacy_mu is None:
        raise ValueError("privacy_mu is None: give privacy_mu or (epsilon, delta) to the config, which resolves it.")
    return privacy_mu


def recorded_mus(ledger: Any, run_id: str) -> dict[str, list[float]]:
    r"""The μ of every validation record of ``run_id`` in ``ledger``, by key (a key recorded twice, a
    retried release, has two values; a record without a μ has NaN): what a resumed run's stored
    releases are checked against."""
    found: dict[str, list[float]] = {}
    for record in ledger.validation.records(run_id):
        found.setdefault(record.key, []).append(getattr(record.event, "mu", math.nan))
    return found
