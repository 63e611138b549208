r"""DP-HyPO (Wang et al. 2023) as a method (``methods.protocol``), where affordable.

As ``PrivateRandomSearchMethod`` (``E[K]``, ``C`` and the simulation at ``μ₀ n/n_p``), with
DP-HyPO's adaptive GP sampling density and its Rényi-DP bound for the per-trial ``μ₀``
(``dp_hypo_per_trial_mu_for_epsilon``). Affordable means: a per-trial budget reaches ``(ε, δ)``
at this ``E[K]`` and ``E[K] ≤ max_mean_trials`` (each density update fits a GP, so a
simulation costs far more than one of private random search).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from botorch_dp.baselines.dp_hypo import dp_hypo
from botorch_dp.baselines.selection import PrivateSelectionResult
from botorch_dp.methods.private_random_search import PrivateRandomSearchMethod
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon
from botorch_dp.privacy.ledger import PrivacyLedger

__all__ = ["MAX_MEAN_TRIALS", "RATIO_LADDER", "DPHyPOMethod"]

MAX_MEAN_TRIALS = 400.0
"""Default cap on ``E[K]`` for DP-HyPO to be simulated (and recommended)."""
RATIO_LADDER = (1.5, 1.25, 1.1)
"""Smaller ratio bounds tried, largest first, when ``ratio_bound`` cannot reach ``(ε, δ)``."""
DENSITY_UPDATES = 16
"""Density updates per run aimed at (``density_update_every = ⌈E[K]/16⌉``)."""


@dataclass(frozen=True)
class DPHyPOMethod(PrivateRandomSearchMethod):
    r"""DP-HyPO with a GP sampling density in ``[1/R, R]`` times the uniform prior.

    Attributes (besides ``PrivateRandomSearchMethod``'s):
        ratio_bound: ``R``, the largest ratio bound tried (``resolved`` keeps the first of it and
            ``RATIO_LADDER`` that reaches ``(ε, δ)``).
        num_candidates: Sobol candidates of the density.
        max_points: Trials the density's GP sees (the last ones).
        max_mean_trials: The largest ``E[K]`` simulated; above it the method is unavailable.
    """

    ratio_bound: float = 2.0
    num_candidates: int = 1024
    max_points: int = 256
    max_mean_trials: float = MAX_MEAN_TRIALS
    name: str = dataclasses.field(default="dp_hypo", init=False)

    def _calibrate(self, epsilon: float, delta: float, mean_trials: float) -> dict[str, Any]:
        r"""``μ₀`` at the largest ratio bound of ``ratio_bound`` and the ``RATIO_LADDER`` values below it
        whose bound reaches ``(ε, δ)`` at ``E[K]`` (the adaptivity's ``log R`` terms cost ``ε``)."""
        if mean_trials > self.max_mean_trials:
            raise ValueError(
                f"E[K] = {mean_trials:.4g} is above max_mean_trials = {self.max_mean_trials:g} "
                "(each density update fits a GP): too costly to simulate"
            )
        for ratio in [self.ratio_bound] + [r for r in RATIO_LADDER if r < self.ratio_bound]:
            try:
                mu0 = dp_hypo_per_trial_mu_for_epsilon(
                    target_epsilon=epsilon,
                    target_delta=delta,
                    mean_trials=mean_trials,
                    ratio_upper=ratio,
                    tnb_eta=self.tnb_eta,
                )
            except ValueError:
                continue
            return {"per_trial_mu": mu0, "ratio_bound": ratio}
        raise ValueError(f"no density ratio bound in {[self.ratio_bound] + list(RATIO_LADDER)} reaches it")

    def _select(
        self,
        objective: Callable[[Tensor], Tensor],
        per_trial_mu: float,
        seed: int | None,
        ledger: PrivacyLedger | None,
        max_trials: int | None = None,
    ) -> PrivateSelectionResult:
        s = self._resolved()
        every = max(1, math.ceil(s.mean_trials / DENSITY_UPDATES))
        return dp_hypo(
            objective,
            s.bounds,
            mean_trials=s.mean_trials,
            per_trial_mu=per_trial_mu,
            loss_clip=s.loss_clip,
            ratio_bound=self.ratio_bound,
            tnb_eta=self.tnb_eta,
            target_delta=s.delta,
            num_candidates=self.num_candidates,
            refit_every=every,
            density_update_every=every,
            max_points=self.max_points,
            ledger=ledger,
            seed=seed,
            max_trials=max_trials,
        )

    def describe(self) -> str:
        return f"{super().describe()}, density ratio in [1/{self.ratio_bound:g}, {self.ratio_bound:g}]"
