r"""Private random search (Papernot & Steinke 2022) as a method (``methods.protocol``).

Settings it leaves open are fixed from public values in ``resolved``: ``E[K]`` from DP-GIBO's
planned number of evaluations (the same evaluation budget), the loss clip ``C`` from the
PUBLIC proxy (a quantile of its per-user losses at scrambled Sobol points of ``Θ``), and the
per-trial ``μ₀`` as the largest whose selection is ``(ε, δ)``-DP at the private run's ``ε``
and ``δ``. A trial's score noise is ``C/(n μ₀)``, so the simulation on ``n_p`` proxy users
runs at ``μ₀ n/n_p`` and draws the private run's noise; ``K`` and the trial points come from
the same distributions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from botorch_dp.baselines.private_random_search import private_random_search
from botorch_dp.baselines.selection import PrivateSelectionResult, check_max_trials, selection_progress
from botorch_dp.methods.protocol import MethodContext, MethodRun, MethodUnavailable
from botorch_dp.methods.proxy import proxy_losses
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon
from botorch_dp.privacy.checks import check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger

__all__ = ["LOSS_CLIP_POINTS", "LOSS_CLIP_QUANTILE", "PrivateRandomSearchMethod", "proxy_loss_clip"]

LOSS_CLIP_QUANTILE = 0.95
"""Default quantile of the proxy's per-user losses taken as the score clip ``C``."""
LOSS_CLIP_POINTS = 32
"""Default number of Sobol points of ``Θ`` the proxy's losses are read at for ``C``."""


def proxy_loss_clip(
    proxy_objective: Callable[[Tensor], Tensor],
    bounds: Tensor,
    *,
    quantile: float = LOSS_CLIP_QUANTILE,
    num_points: int = LOSS_CLIP_POINTS,
    seed: int = 0,
) -> float:
    r"""``C``: the ``quantile`` of the PUBLIC proxy's per-user losses at ``num_points`` scrambled
    Sobol points of the box (public: the proxy's users are public).

    Raises:
        MethodUnavailable: When that quantile is not positive (scores clip losses to ``[0, C]``).
    """
    quantile = check_probability(quantile, "loss_quantile", allow_one=True)
    num_points = check_positive_int(num_points, "loss_clip_points")
    bounds = bounds.to(torch.float64)
    unit = SobolEngine(bounds.shape[1], scramble=True, seed=seed).draw(num_points, dtype=torch.float64)
    losses = proxy_losses(proxy_objective, bounds[0] + unit * (bounds[1] - bounds[0]))
    clip = float(torch.quantile(losses.reshape(-1), quantile))
    if not clip > 0:
        raise MethodUnavailable(
            f"the proxy's {quantile:g}-quantile of per-user losses is {clip:.3g}: scores clip "
            "losses to [0, C] and need C > 0; pass loss_clip."
        )
    return clip


class _Settings(NamedTuple):
    bounds: Tensor
    mean_trials: float
    loss_clip: float
    per_trial_mu: float
    delta: float


@dataclass(frozen=True)
class PrivateRandomSearchMethod:
    r"""Private random search with ``E[K]`` trials of uniform points, each ``μ₀``-GDP.

    Attributes:
        mean_trials: ``E[K]`` (``None``: DP-GIBO's planned number of evaluations, at least 2).
        loss_clip: ``C`` (``None``: ``proxy_loss_clip`` at ``loss_quantile``).
        loss_quantile: The quantile of the proxy's per-user losses taken as ``C``.
        tnb_eta: ``η`` of the truncated negative binomial ``K`` (1: geometric).
        per_trial_mu: ``μ₀`` (set by ``resolved`` from ``ε`` and ``δ``).
        bounds: The box (set by ``resolved``).
        epsilon: ``ε`` the run is calibrated to (set by ``resolved``).
        delta: ``δ`` (set by ``resolved``).
        max_trials: The private run's public number of trials (``None``: the hidden ``K``; see
            ``baselines.private_random_search``); simulations on the proxy ignore it.
    """

    mean_trials: float | None = None
    loss_clip: float | None = None
    loss_quantile: float = LOSS_CLIP_QUANTILE
    tnb_eta: float = 1.0
    per_trial_mu: float | None = None
    bounds: Tensor | None = None
    epsilon: float | None = None
    delta: float | None = None
    max_trials: int | None = None
    name: str = dataclasses.field(default="private_random_search", init=False)

    @property
    def gdp_mu(self) -> float | None:
        return None  # a Rényi-DP bound (private selection): no μ-GDP budget holds it

    @property
    def runs_configurations(self) -> bool:
        return False  # handed one objective and a child of tune's seed; tune wraps its one release

    def with_max_trials(self, max_trials: int | None) -> PrivateRandomSearchMethod:
        r"""Padded to ``max_trials`` trials (``None``: unchanged): the wall time does not reveal ``K``."""
        return self if max_trials is None else dataclasses.replace(self, max_trials=max_trials)

    def with_loss_clip(self, loss_clip: float) -> PrivateRandomSearchMethod:
        r"""Scores clipped at ``C = loss_clip`` when ``C`` is open (``loss_clip`` given: unchanged)."""
        return dataclasses.replace(self, loss_clip=loss_clip) if self.loss_clip is None else self

    @property
    def expected_evaluations(self) -> float | None:
        r"""The run's cost in objective evaluations: ``E[K]`` (one evaluation per trial; ``None`` before
        ``resolved``). The method choice compares costs by it, not by the ``K`` its simulations drew."""
        return None if self.mean_trials is None else float(self.mean_trials)

    def _calibrate(self, epsilon: float, delta: float, mean_trials: float) -> dict[str, Any]:
        r"""The settings that make the run ``(ε, δ)``-DP at ``E[K]``: ``{"per_trial_mu": μ₀}``.

        Calibrated on the ledger's grid of orders (``TRAINING_RDP_ORDERS``): over a continuous
        order the bound can be a little tighter (the grid read 1.0000068 for 1.0 at ``E[K] = 18``),
        and the ledger's statement of the charged curve must stay within ``ε`` too."""
        mu0 = per_trial_mu_for_epsilon(
            target_epsilon=epsilon,
            target_delta=delta,
            mean_trials=mean_trials,
            tnb_eta=self.tnb_eta,
            orders=TRAINING_RDP_ORDERS,
        )
        return {"per_trial_mu": mu0}

    def resolved(
        self, proxy_objective: Callable[[Tensor], Tensor] | None, context: MethodContext
    ) -> PrivateRandomSearchMethod:
        mean_trials = max(2.0, float(context.evaluations)) if self.mean_trials is None else float(self.mean_trials)
        check_positive(mean_trials, "mean_trials", allow_inf=False)
        if self.loss_clip is not None:
            clip = check_positive(self.loss_clip, "loss_clip", allow_inf=False)
        elif proxy_objective is None:
            raise ValueError(f"{self.name}: loss_clip is needed without a proxy to read it from.")
        else:
            clip = proxy_loss_clip(proxy_objective, context.bounds, quantile=self.loss_quantile)
        try:
            calibrated = self._calibrate(context.epsilon, context.delta, mean_trials)
        except ValueError as err:
            raise MethodUnavailable(
                f"{self.name} at epsilon = {context.epsilon:.4g}, E[K] = {mean_trials:.4g}: {err}"
            ) from err
        return dataclasses.replace(
            self,
            mean_trials=mean_trials,
            loss_clip=clip,
            **calibrated,
            bounds=context.bounds.clone(),
            epsilon=context.epsilon,
            delta=context.delta,
        )

    def _resolved(self) -> _Settings:
        r"""The settings ``resolved`` fixed; ``ValueError`` before it ran."""
        s = self
        if any(v is None for v in (s.per_trial_mu, s.bounds, s.mean_trials, s.loss_clip, s.delta)):
            raise ValueError(f"{type(self).__name__}: resolve it first (resolved(proxy_objective, context)).")
        assert s.bounds is not None and s.mean_trials is not None and s.loss_clip is not None  # checked above
        assert s.per_trial_mu is not None and s.delta is not None
        return _Settings(s.bounds, float(s.mean_trials), float(s.loss_clip), float(s.per_trial_mu), float(s.delta))

    def _select(
        self,
        objective: Callable[[Tensor], Tensor],
        per_trial_mu: float,
        seed: int | None,
        ledger: PrivacyLedger | None,
        max_trials: int | None = None,
    ) -> PrivateSelectionResult:
        s = self._resolved()
        return private_random_search(
            objective,
            s.bounds,
            mean_trials=s.mean_trials,
            per_trial_mu=per_trial_mu,
            loss_clip=s.loss_clip,
            tnb_eta=self.tnb_eta,
            target_delta=s.delta,
            seed=seed,
            ledger=ledger,
            max_trials=max_trials,
        )

    def simulate(self, proxy_objective: Callable[[Tensor], Tensor], context: MethodContext, seed: int) -> Tensor:
        # noise C/(n μ₀) on n_p users
        return self._select(proxy_objective, self._resolved().per_trial_mu * context.proxy_scale, seed, None).theta

    def run_private(
        self,
        objective: Callable[[Tensor], Tensor],
        *,
        ledger: PrivacyLedger,
        seed: int | None = None,
        progress: bool = False,
        executor: Any = None,
    ) -> MethodRun:
        users: list[int] = []

        def counted(X: Tensor) -> Tensor:  # n is public; the losses go only to the mechanism
            losses = objective(X)
            users.append(int(torch.as_tensor(losses).shape[-1]))
            return losses

        per_trial_mu = self._resolved().per_trial_mu
        if executor is not None:
            raise ValueError(f"executor: {self.name} evaluates its trials in this process, got {executor!r}.")
        max_trials = check_max_trials(self.max_trials)
        with selection_progress(progress):  # one bar, whatever K is
            result = self._select(counted, per_trial_mu, seed, ledger, max_trials)
        g = result.guarantee
        timing = g.details.get("timing")
        timing = timing if isinstance(timing, str) else None
        return MethodRun(
            self.name,
            result.theta,
            result,
            str(g.details.get("ledger_run_id")),
            users[0] if users else 0,
            g.epsilon,
            g.delta,
            g.description,
            result.released_score,
            procedure=g.description if timing is None else g.description.removesuffix(" " + timing),
            timing=timing,
        )

    def describe(self) -> str:
        return (
            f"E[K] = {self.mean_trials:.4g} trials, each {self.per_trial_mu:.4g}-GDP, "
            f"losses clipped to [0, {self.loss_clip:.4g}]"
        )
