r"""Audit of one AMP training release (Redberg, Koskela & Wang, Alg. 1) through ``training.fit_amp``.

Design (add/remove one record): one feature at the public bound (``x = R = 1``, no
intercept); ``D`` is one record and ``D′ = D ∪ {z}`` with ``z``'s clipped gradient pushing
``θ`` up by the full ``C``: ``D = {(1, −1)}``, ``z = (1, 1)`` for the squared (Huber) loss,
``D = {(1, 0)}``, ``z = (1, 1)`` for the logistic loss. With ``C < 1`` both records sit on
the linear pieces of their clipped losses wherever ``θ`` lands in practice, so the
perturbed minimiser is ``−(b + C)/λ`` on ``D`` and ``−b/λ`` on ``D′`` and the release is
Gaussian with means ``C/λ`` apart: exactly ``μ_lin``-GDP, ``μ_lin = C/√(σ² + λ²σ_out²)``,
the Gaussian lower bound that no linear design can beat. ``(σ, λ)`` come from
``calibrate_amp(epsilon, delta, ...)``.

Each run is one ``fit_amp(X, y, config, generator=seed)`` call: the library draws ``b``,
minimises the perturbed objective with its own solver, checks ``‖∇L^P(θ̃)‖ ≤ τ`` and adds
the output noise. Statistic: the released ``θ`` (``AMPResult.theta``, the likelihood-ratio
test for this pair). Claim: AMP claims a privacy profile ``δ(ε)``, not a ``μ``: the audit
reads the run's parameters (``AMPResult.config.privacy_parameters``, the same on every run)
and turns ``amp_delta`` at them into the trade-off curve they imply
(``tradeoff_from_profile`` on ``grid_size`` values of ``ε`` in
``[0, amp_epsilon(10⁻³/num_runs)]``); ``claimed_mu`` is that curve's ``μ`` at the counted
false-positive bound (``statistics.tradeoff_mu``), and ``claimed_epsilon`` is the run's
``AMPResult.epsilon(delta)``. The honest release sits near ``μ_lin``, below the claim: the
claim's curvature term and folded-normal term are not reached by a linear design.
"""

from __future__ import annotations

import numpy as np
import torch

from botorch_dp.audit.loop import seeded_noise_allowed
from botorch_dp.audit.registry import audit_row
from botorch_dp.audit.statistics import (
    AuditResult,
    Observations,
    StatisticSampler,
    assess,
    sample_both,
    tradeoff_from_profile,
)
from botorch_dp.privacy.analysis.objective_perturbation import amp_delta, amp_epsilon, calibrate_amp
from botorch_dp.privacy.checks import check_choice
from botorch_dp.training.objective_perturbation import AMPConfig, fit_amp
from botorch_dp.utils import child_seeds

__all__ = ["amp_design", "audit_amp_release"]


def amp_design(
    *, epsilon: float, delta: float, loss: str, clip: float, sigma_out: float, tau: float
) -> tuple[AMPConfig, tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    r"""The calibrated ``AMPConfig`` and the datasets ``(X, y)`` of ``D`` and ``D′`` (see the module)."""
    if not 0.0 < clip < 1.0:
        raise ValueError(f"clip must lie in (0, 1) so that both records are clipped, got {clip!r}.")
    loss = check_choice(loss, "loss", ("squared", "logistic"))
    labels_d, added_label = {"squared": ([-1.0], 1.0), "logistic": ([0.0], 1.0)}[loss]
    probe = AMPConfig(
        lam=1e6, sigma=1.0, loss=loss, clip=clip, feature_bound=1.0, fit_intercept=False, sigma_out=sigma_out, tau=tau
    )
    sigma, lam = calibrate_amp(epsilon, delta, clip=clip, beta=probe.beta, sigma_out=sigma_out, tau=tau)
    config = AMPConfig(
        lam=lam, sigma=sigma, loss=loss, clip=clip, feature_bound=1.0, fit_intercept=False, sigma_out=sigma_out, tau=tau
    )

    def data(labels: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(len(labels), 1, dtype=torch.float64), torch.tensor(labels, dtype=torch.float64)

    return config, data(labels_d), data(labels_d + [added_label])


@audit_row(
    "amp_release", quick=5_000, full=100_000, description="fit_amp: one AMP training release (add/remove a record)"
)
def audit_amp_release(
    *,
    num_runs: int,
    epsilon: float = 4.0,
    delta: float = 1e-5,
    loss: str = "squared",
    clip: float = 0.1,
    sigma_out: float = 0.015,
    tau: float = 5e-5,
    grid_size: int = 64,
    confidence: float = 0.95,
    seed: int = 0,
    name: str = "amp_release",
) -> AuditResult:
    r"""Audit ``fit_amp`` releases on worst-case add/remove neighbours (see the module).

    Args:
        num_runs: Runs per dataset (each one ``fit_amp`` call, about a millisecond).
        epsilon, delta: The target that ``(σ, λ)`` are calibrated for.
        loss: ``"squared"`` or ``"logistic"``.
        clip: ``C`` (below 1, so both records are clipped).
        sigma_out: ``σ_out``.
        tau: ``τ``.
        grid_size: Number of ``ε`` values on which the claimed profile is evaluated.
        confidence: Joint confidence of the lower bound.
        seed: Seed of the audit.
        name: The row's name.

    Returns:
        The ``AuditResult``, with ``delta`` and ``claimed_epsilon``/``empirical_epsilon_lower``.
    """
    config, data_d, data_d_prime = amp_design(
        epsilon=epsilon, delta=delta, loss=loss, clip=clip, sigma_out=sigma_out, tau=tau
    )

    claimed_epsilons: dict[tuple, float] = {}  # one AMPResult.epsilon(delta) per distinct guarantee (it is slow)

    def sampler(X: torch.Tensor, y: torch.Tensor) -> StatisticSampler:
        def sample(num: int, stream: int) -> Observations:
            thetas, reports = [], []
            with seeded_noise_allowed():
                for run_seed in child_seeds([stream, 5], num):
                    result = fit_amp(X, y, config, generator=run_seed)
                    thetas.append(float(result.theta[0]))
                    report = tuple(sorted(result.config.privacy_parameters.items()))
                    if report not in claimed_epsilons:
                        claimed_epsilons[report] = result.epsilon(delta)
                    reports.append(report)
            return Observations(torch.tensor(thetas, dtype=torch.float64), reports=tuple(reports))

        return sample

    obs_d, obs_d_prime = sample_both(sampler(*data_d), sampler(*data_d_prime), num_runs=num_runs, seed=seed)
    reported = set(obs_d.reports) | set(obs_d_prime.reports)
    if len(reported) != 1:
        raise ValueError(f"The runs reported {len(reported)} different AMP guarantees; the audit needs one.")
    parameters = next(iter(reported))
    claimed_epsilon = claimed_epsilons[parameters]
    params = dict(parameters)
    top = amp_epsilon(1e-3 / num_runs, **params)
    claim = tradeoff_from_profile(lambda e: amp_delta(e, **params), np.linspace(0.0, top, grid_size))
    return assess(name, obs_d, obs_d_prime, claim, confidence=confidence, delta=delta, claimed_epsilon=claimed_epsilon)
