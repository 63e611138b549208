r"""Empirical privacy audits: a statistical lower bound on the μ a mechanism really spends.

An audit runs a mechanism many times on two neighbouring datasets ``D`` and ``D′`` built
to be worst cases (one user's losses replaced so that the clipped contribution flips sign,
or jumps to an overflowing value), reduces each release to one number, and tests
"``D′``" against "``D``" with a threshold ``τ``. For a ``μ``-GDP mechanism every test obeys

    ``β ≥ Φ(Φ⁻¹(1 − α) − μ)``,  i.e.  ``μ ≥ Φ⁻¹(1 − α) − Φ⁻¹(β)``,

with ``α`` the false-positive rate on ``D`` and ``β`` the false-negative rate on ``D′``
(Dong, Roth and Su, 2022). Plugging one-sided Clopper–Pearson upper bounds of ``α`` and
``β`` (each at ``1 − (1 − confidence)/2``, so both hold together with probability
``confidence``) gives ``empirical_mu_lower``, a lower bound on the true ``μ`` that holds
with that confidence. The threshold is chosen on a held-out half of the runs: choosing it
on the runs that are then counted would bias the bound upwards.

A mechanism whose claim is not a GDP ``μ`` (AMP's claim is a privacy profile ``δ(ε)``)
is audited against the trade-off curve ``f`` its claim implies: every test must have
``β ≥ f(α)``. Its ``claimed_mu`` is the ``μ`` of the Gaussian trade-off curve through the
claimed one at the audit's false-positive bound ``ᾱ``, ``Φ⁻¹(1 − ᾱ) − Φ⁻¹(f(ᾱ))``, so
``empirical_mu_lower > claimed_mu`` means ``β̄ < f(ᾱ)``, a violation of the claim (see
``run_audit`` and ``audit_amp_release``).

A correct mechanism gives ``empirical_mu_lower ≤ claimed_mu`` (up to the confidence
level); a broken one (noise too small, a NaN that appears only on ``D′``) is detected by
``empirical_mu_lower > claimed_mu``. Non-finite releases count as the largest statistic,
so a mechanism that returns NaN on ``D′`` only is flagged.

The audits here seed their noise explicitly (they must be reproducible); the noise of a
real run comes from OS entropy.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from torch import Tensor

from botorch_dp.privacy.analysis.objective_perturbation import (
    amp_delta,
    amp_epsilon,
    calibrate_amp,
)
from botorch_dp.privacy.checks import check_choice
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    GaussianScoreMechanism,
    GOEPreconditionerMechanism,
    ObjectivePerturbationMechanism,
    clipped_mean_gradient,
    gram_sqrt,
)
from botorch_dp.training.objective_perturbation import (
    AMPConfig,
    amp_features,
    clipped_glm_loss,
)
from botorch_dp.utils import child_seeds

__all__ = [
    "AuditResult",
    "StatisticSampler",
    "TradeOffCurve",
    "audit_all",
    "audit_amp_release",
    "audit_clip_count_release",
    "audit_dp_gibo",
    "audit_dp_hypo_score",
    "audit_gradient_release",
    "audit_private_preconditioner",
    "audit_projected_release",
    "audit_score_release",
    "clopper_pearson_upper",
    "epsilon_lower_from_rates",
    "gdp_mu_from_rates",
    "run_audit",
    "tradeoff_from_profile",
    "tradeoff_mu",
]

#: A sampler of ``num_runs`` audit statistics from one of the two datasets.
StatisticSampler = Callable[[int, int], Tensor]

#: A claimed trade-off curve: false-positive rates ``α`` (a numpy array) ↦ the smallest
#: false-negative rates ``f(α)`` that the claim allows (an array of the same shape).
TradeOffCurve = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class AuditResult:
    r"""Outcome of one audit.

    Attributes:
        mechanism: Name of the audited mechanism.
        claimed_mu: The GDP parameter the mechanism claims; for a claim given as a
            trade-off curve ``f`` (AMP), ``Φ⁻¹(1 − ᾱ) − Φ⁻¹(f(ᾱ))`` at the counted runs'
            Clopper–Pearson bound ``ᾱ`` of the false-positive rate (``tradeoff_mu``).
        empirical_mu: ``Φ⁻¹(1 − α̂) − Φ⁻¹(β̂)`` at the chosen threshold (point estimate).
        empirical_mu_lower: The same with Clopper–Pearson upper bounds of ``α``, ``β``.
        num_runs: Releases per dataset (half select the threshold, half are counted).
        threshold: The threshold ``τ`` chosen on the held-out half.
        false_positive_rate: ``α̂`` on the counted half.
        false_negative_rate: ``β̂`` on the counted half.
        confidence: Joint confidence of the lower bound.
        delta: For audits run at a ``δ`` (AMP), that ``δ``; else ``None``.
        claimed_epsilon: The ``ε`` the mechanism claims at ``delta`` (or ``None``).
        empirical_epsilon_lower: A lower bound, at the same confidence, on the ``ε`` of any
            ``(ε, delta)``-DP guarantee the mechanism can have (``epsilon_lower_from_rates``
            at the Clopper–Pearson bounds), or ``None``.
    """

    mechanism: str
    claimed_mu: float
    empirical_mu: float
    empirical_mu_lower: float
    num_runs: int
    threshold: float
    false_positive_rate: float
    false_negative_rate: float
    confidence: float
    delta: float | None = None
    claimed_epsilon: float | None = None
    empirical_epsilon_lower: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def gdp_mu_from_rates(false_positive_rate: float, false_negative_rate: float) -> float:
    r"""``max(0, Φ⁻¹(1 − α) − Φ⁻¹(β))``: the smallest ``μ`` whose trade-off curve allows ``(α, β)``.

    A test with ``α + β ≥ 1`` is no better than a coin and proves nothing (0). Rates of 0
    are clamped to ``1e-300`` so the value stays finite.
    """
    if false_positive_rate + false_negative_rate >= 1.0:
        return 0.0
    a = max(false_positive_rate, 1e-300)
    b = max(false_negative_rate, 1e-300)
    return max(float(norm.isf(a) - norm.ppf(b)), 0.0)


def clopper_pearson_upper(successes: int, trials: int, confidence: float) -> float:
    r"""One-sided Clopper–Pearson upper bound of a binomial proportion."""
    if successes >= trials:
        return 1.0
    return float(beta_dist.ppf(confidence, successes + 1, trials - successes))


def tradeoff_mu(false_positive_rate: float, tradeoff_value: float) -> float:
    r"""The ``μ`` of the Gaussian trade-off curve through ``(α, f(α))`` (``f(α)`` given).

    ``Φ⁻¹(1 − α) − Φ⁻¹(f(α))``, floored at 0 (``gdp_mu_from_rates``); ``inf`` when
    ``f(α) ≤ 0`` (the claim allows a perfect test at ``α``, so no test can violate it).
    A test with rates ``(α, β)`` violates the claim exactly when
    ``gdp_mu_from_rates(α, β) > tradeoff_mu(α, f(α))``, i.e. ``β < f(α)``.
    """
    if not tradeoff_value > 0.0:
        return math.inf
    return gdp_mu_from_rates(false_positive_rate, tradeoff_value)


def tradeoff_from_profile(profile: Callable[[float], float], epsilons: Sequence[float]) -> TradeOffCurve:
    r"""The trade-off curve implied by a privacy profile ``δ(ε)``, from a grid of ``ε``.

    A mechanism that is ``(ε, δ(ε))``-DP for neighbours taken in either order bounds the
    false-negative rate ``β`` of every test with false-positive rate ``α`` (Kairouz, Oh &
    Viswanath 2015; Dong, Roth & Su 2022, §2) by

        ``β ≥ 1 − δ(ε) − e^ε α``   and   ``β ≥ e^{−ε} (1 − δ(ε) − α)``   for every ε,

    so ``f(α)`` is the largest of these over the grid, floored at 0. A finite grid keeps
    only some of the constraints: ``f`` is at most the exact curve, i.e. lenient to the
    mechanism (it can hide a leak smaller than the grid's resolution, never invent one).

    Args:
        profile: ``ε ↦ δ(ε)``, the claimed privacy profile.
        epsilons: The grid of ``ε ≥ 0`` at which the profile is evaluated (once, here).

    Returns:
        ``α ↦ f(α)`` on numpy arrays (``TradeOffCurve``).
    """
    eps = np.asarray(epsilons, dtype=np.float64).reshape(-1)
    if eps.size == 0 or not np.all(np.isfinite(eps)):
        raise ValueError(f"epsilons must be a non-empty grid of finite numbers, got {epsilons!r}.")
    slack = 1.0 - np.array([profile(float(e)) for e in eps], dtype=np.float64)
    grow, shrink = np.exp(eps), np.exp(-eps)

    def curve(alpha: np.ndarray) -> np.ndarray:
        a = np.asarray(alpha, dtype=np.float64)[..., None]
        bounds = np.maximum(slack - grow * a, shrink * (slack - a))
        return np.clip(bounds.max(axis=-1), 0.0, 1.0)

    return curve


def epsilon_lower_from_rates(false_positive_rate: float, false_negative_rate: float, delta: float) -> float:
    r"""The smallest ``ε ≥ 0`` for which ``(ε, δ)``-DP allows a test with rates ``(α, β)``.

    ``(ε, δ)``-DP for neighbours in either order needs ``1 − β ≤ e^ε α + δ`` and
    ``1 − α ≤ e^ε β + δ``, so ``ε ≥ max(log((1 − δ − β)/α), log((1 − δ − α)/β), 0)``
    (``inf`` when a rate is 0 and its numerator is positive).
    """
    best = 0.0
    for rate, other in ((false_positive_rate, false_negative_rate), (false_negative_rate, false_positive_rate)):
        numerator = 1.0 - delta - other
        if numerator > 0.0:
            best = max(best, math.inf if rate <= 0.0 else math.log(numerator / rate))
    return best


def _rates(stat_d: np.ndarray, stat_d_prime: np.ndarray, threshold: float) -> tuple[int, int]:
    false_positives = int((stat_d > threshold).sum())
    false_negatives = int((stat_d_prime <= threshold).sum())
    return false_positives, false_negatives


def _lower_bound(stat_d: np.ndarray, stat_d_prime: np.ndarray, threshold: float, confidence: float) -> float:
    fp, fn = _rates(stat_d, stat_d_prime, threshold)
    each = 1.0 - (1.0 - confidence) / 2.0  # Bonferroni over the two rates
    return gdp_mu_from_rates(
        clopper_pearson_upper(fp, len(stat_d), each), clopper_pearson_upper(fn, len(stat_d_prime), each)
    )


def _best_threshold(stat_d: np.ndarray, stat_d_prime: np.ndarray, confidence: float) -> float:
    r"""The threshold with the largest lower bound on the selection runs (not the point
    estimate, which favours extreme thresholds whose rates are mostly noise)."""
    pooled = np.concatenate([stat_d, stat_d_prime])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return 0.0
    candidates = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, 101)))
    bounds = [_lower_bound(stat_d, stat_d_prime, float(tau), confidence) for tau in candidates]
    return float(candidates[int(np.argmax(bounds))])


def _best_threshold_against(
    stat_d: np.ndarray, stat_d_prime: np.ndarray, confidence: float, claim: TradeOffCurve
) -> float:
    r"""The threshold with the largest margin ``lower bound − tradeoff_mu(ᾱ, f(ᾱ))`` on the
    selection runs. The candidates reach further into the upper tail than for a GDP claim,
    where a curve such as AMP's lies closest to the Gaussian one."""
    pooled = np.concatenate([stat_d, stat_d_prime])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return 0.0
    # down to about 25 expected exceedances in each half: further out the rates are mostly noise
    levels = np.concatenate([np.linspace(0.0, 1.0, 101), 1.0 - np.logspace(-1.0, math.log10(50.0 / pooled.size), 30)])
    candidates = np.unique(np.quantile(pooled, np.clip(levels, 0.0, 1.0)))
    sorted_d, sorted_d_prime = np.sort(stat_d), np.sort(stat_d_prime)
    false_positives = len(stat_d) - np.searchsorted(sorted_d, candidates, side="right")
    false_negatives = np.searchsorted(sorted_d_prime, candidates, side="right")
    each = 1.0 - (1.0 - confidence) / 2.0
    alpha_upper = [clopper_pearson_upper(int(k), len(stat_d), each) for k in false_positives]
    beta_upper = [clopper_pearson_upper(int(k), len(stat_d_prime), each) for k in false_negatives]
    claimed = claim(np.asarray(alpha_upper))
    margins = [
        gdp_mu_from_rates(a, b) - tradeoff_mu(a, float(f)) for a, b, f in zip(alpha_upper, beta_upper, claimed)
    ]
    return float(candidates[int(np.argmax(margins))])


def _as_statistics(values: Tensor) -> np.ndarray:
    out = values.detach().to(torch.float64).cpu().numpy().copy()
    out[~np.isfinite(out)] = np.inf  # a NaN or inf release is the most suspicious outcome
    return out


def run_audit(
    name: str,
    sample_d: StatisticSampler,
    sample_d_prime: StatisticSampler,
    claimed_mu: float | TradeOffCurve,
    *,
    num_runs: int,
    seed: int = 0,
    confidence: float = 0.95,
    delta: float | None = None,
    claimed_epsilon: float | None = None,
) -> AuditResult:
    r"""Audit a mechanism from samplers of its statistic on ``D`` and ``D′``.

    For a GDP claim ``μ`` the threshold maximises the lower bound on the selection half.
    For a claim given as a trade-off curve ``f`` it maximises the margin over the claim,
    ``gdp_mu_from_rates(ᾱ, β̄) − tradeoff_mu(ᾱ, f(ᾱ))``, and the reported ``claimed_mu``
    is ``tradeoff_mu(ᾱ, f(ᾱ))`` at the counted half's bound ``ᾱ``: the lower bound exceeds
    it exactly when ``β̄ < f(ᾱ)``. With probability at least ``confidence`` the true rates
    satisfy ``α ≤ ᾱ`` and ``β ≤ β̄``; a true claim gives ``β ≥ f(α) ≥ f(ᾱ)`` (``f``
    non-increasing), so the lower bound stays below the claim.

    Args:
        name: Name for the report.
        sample_d: ``(num, seed) -> num`` statistics of releases on ``D``.
        sample_d_prime: The same on ``D′`` (the dataset the test looks for: larger values).
        claimed_mu: The mechanism's GDP claim ``μ``, or its claimed trade-off curve
            (``TradeOffCurve``, e.g. ``tradeoff_from_profile``).
        num_runs: Releases per dataset; the first half selects the threshold.
        seed: Seed of the audit's noise (an audit must be reproducible).
        confidence: Joint confidence of ``empirical_mu_lower``.
        delta: Also bound ``ε`` at this ``δ`` (``empirical_epsilon_lower``).
        claimed_epsilon: The claimed ``ε`` at ``delta``, for the report.

    Returns:
        The ``AuditResult``.
    """
    if num_runs < 4:
        raise ValueError(f"num_runs must be at least 4, got {num_runs}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}.")
    seeds = child_seeds([seed, 0], 2)
    stat_d = _as_statistics(sample_d(num_runs, seeds[0]))
    stat_d_prime = _as_statistics(sample_d_prime(num_runs, seeds[1]))
    half = num_runs // 2
    if callable(claimed_mu):
        threshold = _best_threshold_against(stat_d[:half], stat_d_prime[:half], confidence, claimed_mu)
    else:
        threshold = _best_threshold(stat_d[:half], stat_d_prime[:half], confidence)
    counted_d, counted_d_prime = stat_d[half:], stat_d_prime[half:]
    fp, fn = _rates(counted_d, counted_d_prime, threshold)
    n, m = len(counted_d), len(counted_d_prime)
    each = 1.0 - (1.0 - confidence) / 2.0
    alpha_upper, beta_upper = clopper_pearson_upper(fp, n, each), clopper_pearson_upper(fn, m, each)
    if callable(claimed_mu):
        claimed = tradeoff_mu(alpha_upper, float(np.asarray(claimed_mu(np.array([alpha_upper]))).reshape(-1)[0]))
    else:
        claimed = float(claimed_mu)
    return AuditResult(
        mechanism=name,
        claimed_mu=claimed,
        empirical_mu=gdp_mu_from_rates(fp / n, fn / m),
        empirical_mu_lower=_lower_bound(counted_d, counted_d_prime, threshold, confidence),
        num_runs=num_runs,
        threshold=threshold,
        false_positive_rate=fp / n,
        false_negative_rate=fn / m,
        confidence=confidence,
        delta=None if delta is None else float(delta),
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        empirical_epsilon_lower=None if delta is None else epsilon_lower_from_rates(alpha_upper, beta_upper, delta),
    )


# ---------------------------------------------------------------------------- the audits
def _direction(d: int) -> Tensor:
    return torch.ones(d, dtype=torch.float64) / math.sqrt(d)


def _gradient_samplers(
    mechanism_class: type[GaussianGradientMechanism],
    *,
    A: Tensor,
    num_users: int,
    direction: Tensor,
    release: Callable[[GaussianGradientMechanism, Tensor, Tensor], Tensor],
    **settings: Any,
) -> tuple[Callable[[Tensor], StatisticSampler], float]:
    r"""Samplers of ``directionᵀ g`` for a gradient mechanism whose first user's losses are
    given (every other user's are zero), and the claimed per-release ``μ/√T``.

    ``release(mechanism, A, Y)`` returns the released ``d``-vector ``g``; ``settings`` are
    the mechanism's ``clip_bound``, ``privacy_mu`` and ``num_steps``.
    """

    def sampler(first_user: Tensor) -> StatisticSampler:
        Y = torch.zeros(A.shape[-1], num_users, dtype=torch.float64)
        Y[:, 0] = first_user

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                num_users=num_users, generator=torch.Generator().manual_seed(stream), **settings
            )
            return torch.stack([release(mechanism, A, Y) @ direction for _ in range(num)])

        return sample

    return sampler, GaussianGradientMechanism(num_users=num_users, **settings).step_mu


def audit_gradient_release(
    *,
    num_runs: int,
    mechanism_class: type[GaussianGradientMechanism] = GaussianGradientMechanism,
    privacy_mu: float = 1.0,
    num_steps: int = 1,
    clip_bound: float = 1.0,
    num_users: int = 10,
    dim: int = 3,
    loss_scale_d_prime: float = 1e3,
    seed: int = 0,
) -> AuditResult:
    r"""Audit one release of the gradient mechanism on worst-case neighbours.

    ``A = 100 I`` (``d x d``); every user but the first has zero losses. On ``D`` the
    first user's losses are ``−10 u``, on ``D′`` ``loss_scale_d_prime · u`` (``u`` a unit
    vector); both are clipped to ``∓B u``, so the clipped means differ by exactly the
    sensitivity ``2B/n`` along ``u``. The statistic is ``uᵀ g``. With
    ``loss_scale_d_prime = 1e307`` the audit also covers overflow: ``A y`` is then
    infinite in float64 unless the mechanism scales before it multiplies.

    Args:
        num_runs: Releases per dataset.
        mechanism_class: The mechanism to audit (a test double for a broken one).
        privacy_mu, num_steps, clip_bound, num_users: The mechanism's settings; the claim
            is the per-release ``μ/√T``.
        dim: ``d``.
        loss_scale_d_prime: Size of the first user's losses on ``D′``.
        seed: Seed of the audit.

    Returns:
        The ``AuditResult``.
    """
    u = _direction(dim)
    sampler, claimed = _gradient_samplers(
        mechanism_class, A=100.0 * torch.eye(dim, dtype=torch.float64), num_users=num_users, direction=u,
        release=lambda mechanism, A, Y: mechanism.release(A, Y).gradient,
        clip_bound=clip_bound, privacy_mu=privacy_mu, num_steps=num_steps,
    )
    name = "gradient_release" if loss_scale_d_prime < 1e300 else "gradient_release_overflow"
    return run_audit(
        name, sampler(-10.0 * u), sampler(loss_scale_d_prime * u), claimed, num_runs=num_runs, seed=seed
    )


def audit_score_release(
    *,
    num_runs: int,
    per_trial_mu: float = 1.0,
    loss_clip: float = 1.0,
    num_users: int = 10,
    seed: int = 0,
) -> AuditResult:
    r"""Audit private random search's score of one trial.

    The first user's loss is 0 on ``D`` and ``C`` on ``D′`` (every other user 0), so the
    clipped means differ by the sensitivity ``C/n``; the statistic is the released score.
    """

    def sampler(first_loss: float) -> StatisticSampler:
        losses = torch.zeros(1, num_users, dtype=torch.float64)
        losses[0, 0] = first_loss

        def sample(num: int, stream: int) -> Tensor:
            mechanism = GaussianScoreMechanism(
                loss_clip=loss_clip, per_trial_mu=per_trial_mu, generator=torch.Generator().manual_seed(stream)
            )
            return mechanism.release(losses.expand(num, num_users)).scores

        return sample

    return run_audit(
        "private_random_search_score", sampler(0.0), sampler(loss_clip), per_trial_mu, num_runs=num_runs, seed=seed
    )


def audit_dp_gibo(
    *,
    num_runs: int,
    privacy_mu: float = 1.0,
    num_iterations: int = 3,
    clip_bound: float = 1.0,
    num_users: int = 5,
    dim: int = 2,
    claimed_mu: float | None = None,
    seed: int = 0,
) -> AuditResult:
    r"""Audit a whole DP-GIBO run (``T`` releases, batch selection, steps) end to end.

    Every user but the first has zero losses; the first user's loss is the linear function
    ``∓M uᵀx`` (``M = 1e4``) on ``D``/``D′``, whose GP gradient estimate is clipped to
    about ``∓B u`` at every step. The statistic is ``Σ_t uᵀ g_t`` over the released
    gradients; the claim is the run's total ``μ`` (``claimed_mu`` overrides it, to check
    that the audit detects a run noised for a larger ``μ`` than it claims).
    """
    from gpytorch.kernels import RBFKernel

    from botorch_dp.optim import DPGIBO, DPGIBOConfig

    u = _direction(dim)
    bounds = torch.tensor([[-1.0] * dim, [1.0] * dim], dtype=torch.float64)

    def sampler(sign: float) -> StatisticSampler:
        def objective(X: Tensor) -> Tensor:
            losses = torch.zeros(X.shape[0], num_users, dtype=torch.float64)
            losses[:, 0] = sign * 1e4 * (X @ u)
            return losses

        def sample(num: int, stream: int) -> Tensor:
            out = []
            for run_seed in child_seeds(stream, num):
                kernel = RBFKernel(ard_num_dims=dim)
                kernel.lengthscale = 1.0
                # acqf_maxiter: the (public) candidate search only needs to be cheap here; the
                # audited statistic does not depend on where the batch points land
                config = DPGIBOConfig(
                    bounds=bounds, kernel=kernel, num_iterations=num_iterations, privacy_mu=privacy_mu,
                    clip_bound=clip_bound, step_size=0.1, batch_size=dim + 1, search_radius=0.3,
                    noise_variance=1e-6, num_restarts=1, raw_samples=16, acqf_maxiter=10, seed=run_seed,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # explicit noise seeds warn; audits need them
                    release = DPGIBO(config).run(objective, progress=False).release
                out.append((release.released_gradients @ u).sum())
            return torch.stack(out)

        return sample

    claimed = privacy_mu if claimed_mu is None else claimed_mu
    return run_audit("dp_gibo_loop", sampler(-1.0), sampler(1.0), claimed, num_runs=num_runs, seed=seed)


def _separable_gradient(theta: Tensor, x: Tensor, y: Tensor, b: Tensor, config: AMPConfig) -> Tensor:
    r"""``∇L^P`` of ``N`` independent 1-D perturbed objectives at once: an ``N`` tensor.

    Coordinate ``j`` is ``Σ_i f_C'(x_i θ_j; y_i) x_i + λ θ_j + b_j`` (the trainer's clipped
    loss, ``clipped_glm_loss``), the derivative of the 1-D objective of run ``j``.
    """
    u = theta[:, None] * x[None, :]  # N x n margins
    _, slope = clipped_glm_loss(u, y.expand_as(u), x.abs().expand_as(u), loss=config.loss, clip=config.clip)
    return slope @ x + config.lam * theta + b


def _solve_separable(x: Tensor, y: Tensor, b: Tensor, config: AMPConfig, tolerance: float) -> Tensor:
    r"""``θ̃`` with every ``|∇_j L^P(θ̃)| ≤ tolerance``: a vectorised Illinois (regula falsi) search.

    The root of run ``j`` lies in ``±(|b_j| + nC)/λ`` (every clipped gradient is at most
    ``C``, so the derivative is ``≤ 0`` at the left end and ``≥ 0`` at the right one), and
    the derivative increases strictly (slope ``≥ λ``), so the bracket always holds the
    root. Regula falsi is exact in one step where the derivative is linear (the clipped
    pieces); the Illinois rule (halve the value at an end kept twice) keeps it converging
    elsewhere.
    """
    radius = (b.abs() + x.shape[0] * config.clip) / config.lam
    lo, hi = -radius, radius.clone()
    g_lo, g_hi = _separable_gradient(lo, x, y, b, config), _separable_gradient(hi, x, y, b, config)
    kept = torch.zeros_like(b)  # +1: the upper end moved last, −1: the lower one
    theta = lo
    for _ in range(200):
        theta = torch.where(g_hi > g_lo, (lo * g_hi - hi * g_lo) / (g_hi - g_lo), 0.5 * (lo + hi))
        theta = theta.clamp(min=lo, max=hi)
        grad = _separable_gradient(theta, x, y, b, config)
        if bool((grad.abs() <= tolerance).all()):
            break
        above = grad > 0
        g_lo = torch.where(above & (kept > 0), 0.5 * g_lo, g_lo)
        g_hi = torch.where(~above & (kept < 0), 0.5 * g_hi, g_hi)
        hi, g_hi = torch.where(above, theta, hi), torch.where(above, grad, g_hi)
        lo, g_lo = torch.where(above, lo, theta), torch.where(above, g_lo, grad)
        kept = torch.where(above, 1.0, -1.0).to(b)
    return theta  # the mechanism's τ test refuses it if it is not good enough


def _amp_design(
    mechanism_class: type[ObjectivePerturbationMechanism],
    *,
    epsilon: float,
    delta: float,
    loss: str,
    clip: float,
    sigma_out: float,
    tau: float,
) -> tuple[AMPConfig, StatisticSampler, StatisticSampler]:
    r"""The AMP audit's calibrated config and its samplers of releases on ``D`` and ``D′``
    (see ``audit_amp_release``)."""
    if not 0.0 < clip < 1.0:
        raise ValueError(f"clip must lie in (0, 1) so that both records are clipped, got {clip!r}.")
    loss = check_choice(loss, "loss", ("squared", "logistic"))
    labels_d, added_label = {"squared": ([-1.0], 1.0), "logistic": ([0.0], 1.0)}[loss]
    probe = AMPConfig(lam=1e6, sigma=1.0, loss=loss, clip=clip, feature_bound=1.0, fit_intercept=False,
                      sigma_out=sigma_out, tau=tau)
    sigma, lam = calibrate_amp(epsilon, delta, clip=clip, beta=probe.beta, sigma_out=sigma_out, tau=tau)
    config = replace(probe, lam=lam, sigma=sigma)

    def sampler(labels: list[float]) -> StatisticSampler:
        x = amp_features(torch.ones(len(labels), 1, dtype=torch.float64), config)[:, 0]
        y = torch.tensor(labels, dtype=torch.float64)

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                dim=num, **config.privacy_parameters, generator=torch.Generator().manual_seed(stream)
            )
            b = mechanism.perturbation()
            theta_tilde = _solve_separable(x, y, b, config, tolerance=tau / (4.0 * math.sqrt(num)))
            return mechanism.release(theta_tilde, lambda t: _separable_gradient(t, x, y, b, config)).theta

        return sample

    return config, sampler(labels_d), sampler(labels_d + [added_label])


def audit_dp_hypo_score(
    *,
    num_runs: int,
    per_trial_mu: float = 1.0,
    loss_clip: float = 1.0,
    num_users: int = 10,
    mean_trials: float = 1.5,
    ratio_bound: float = 1.0,
    seed: int = 0,
) -> AuditResult:
    r"""Audit DP-HyPO's trial score as ``baselines.dp_hypo`` releases it, one whole run per release.

    The first user's loss is 0 on ``D`` and ``C`` on ``D′`` at every ``θ`` (every other
    user 0), so every trial's clipped mean differs by the sensitivity ``C/n``; the statistic
    is the run's first trial score (``history.extras["noisy_scores"][0]``, one ``μ₀``-GDP
    release; the released best score is one of the trial scores). This checks the noise
    that ``dp_hypo`` itself adds, through its argument handling, seeding and mechanism. The
    selection's bound (``privacy.analysis.dp_hypo``; ``ε`` of several units at these
    settings) is out of reach of a test on this many runs and is checked analytically
    instead (``tests/privacy/analysis/test_dp_hypo.py``). ``ratio_bound = 1`` by default:
    the first trial is drawn from the prior whatever the ratio, and no GP is fitted.
    """
    from botorch_dp.baselines.dp_hypo import dp_hypo  # here: the baselines import privacy
    from botorch_dp.privacy.seeding import PrivacyWarning

    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)

    def sampler(first_loss: float) -> StatisticSampler:
        losses = torch.zeros(1, num_users, dtype=torch.float64)
        losses[0, 0] = first_loss
        objective = lambda X: losses.expand(X.shape[0], num_users)

        def sample(num: int, stream: int) -> Tensor:
            scores = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyWarning)  # the audit seeds its runs on purpose
                for run_seed in child_seeds([stream, 1], num):
                    result = dp_hypo(
                        objective, bounds, mean_trials=mean_trials, per_trial_mu=per_trial_mu, loss_clip=loss_clip,
                        ratio_bound=ratio_bound, num_candidates=8, seed=run_seed,
                    )
                    scores.append(result.history.extras["noisy_scores"][0])
            return torch.stack(scores)

        return sample

    return run_audit("dp_hypo_score", sampler(0.0), sampler(loss_clip), per_trial_mu, num_runs=num_runs, seed=seed)


def audit_amp_release(
    *,
    num_runs: int,
    mechanism_class: type[ObjectivePerturbationMechanism] = ObjectivePerturbationMechanism,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    loss: str = "squared",
    clip: float = 0.1,
    sigma_out: float = 0.015,
    tau: float = 5e-5,
    grid_size: int = 64,
    seed: int = 0,
) -> AuditResult:
    r"""Audit one AMP training release (Redberg et al., Alg. 1) on worst-case add/remove neighbours.

    Design: one feature at the public bound (``x = R = 1``, no intercept), ``D`` = one
    record and ``D′ = D ∪ {z}`` whose clipped gradient pushes ``θ`` up by the full ``C``:
    ``D = {(1, −1)}``, ``z = (1, 1)`` for the squared (Huber) loss, ``D = {(1, 0)}``,
    ``z = (1, 1)`` for the logistic loss. With ``C < 1`` both records sit on the linear
    pieces of their clipped losses wherever ``θ`` lands in practice (``|θ| < 1 − C``
    resp. ``< logit(1 − C)``, over eight standard deviations out): the record of ``D`` has
    slope ``+C``, ``z`` slope ``−C``, so the perturbed minimiser is ``θ^P = −(b + C)/λ``
    on ``D`` and ``−b/λ`` on ``D′``, and the release is Gaussian with means ``C/λ`` apart
    and variance ``σ²/λ² + σ_out²``: exactly ``μ_lin``-GDP with
    ``μ_lin = C/√(σ² + λ² σ_out²)``, the Gaussian lower bound that no linear design can
    beat. The statistic is the released ``θ`` (the likelihood-ratio test for this pair).
    ``(σ, λ)`` come from ``calibrate_amp(epsilon, delta, ...)`` at ``β`` of the config
    (1 for squared, 0.25 for logistic with ``R = 1`` and no intercept).

    Releases: ``num_runs`` independent 1-D runs are packed into ONE mechanism of dimension
    ``num_runs`` (the objective ``Σ_j [Σ_z ℓ_C(θ_j; z) + (λ/2)θ_j² + b_j θ_j]`` is
    separable): the mechanism draws every ``b_j`` and every output noise, a vectorised
    regula falsi search finds ``θ̃`` with ``|∇_j| ≤ τ/(4√N)``, and the mechanism's own τ test checks
    the whole gradient (stricter than one test per run) before it releases. Coordinate
    ``j`` of the release has exactly the law of one 1-D AMP release, and no noise is drawn
    outside ``privacy.mechanisms``.

    Claim and units: AMP claims the privacy profile ``δ_AMP(ε)`` (``amp_delta``), not a
    GDP ``μ``. It is turned into the trade-off curve ``f`` it implies
    (``tradeoff_from_profile`` on ``grid_size`` values of ``ε`` in
    ``[0, amp_epsilon(10⁻³/num_runs)]``), and ``claimed_mu`` is the ``μ`` of the Gaussian
    curve through ``f`` at the counted false-positive bound ``ᾱ``:
    ``Φ⁻¹(1 − ᾱ) − Φ⁻¹(f(ᾱ))``. The empirical values are computed as for every other
    audit, so ``empirical_mu_lower > claimed_mu`` iff ``β̄ < f(ᾱ)``: a violation of the
    claimed profile. The result also carries ``claimed_epsilon = amp_epsilon(delta)`` and
    ``empirical_epsilon_lower``, the lower bound on ``ε`` at ``delta`` from the same test.
    The honest mechanism's point estimate ``empirical_mu`` sits near ``μ_lin``, below the
    claim: the claim's extra terms (the curvature term ``c = −log(1 − β/λ)`` and the folded
    normal ``s|Z|`` of the dominating privacy loss) are not reached by a linear design; a
    design whose records' curvature matters (not attempted here) could come closer.

    Args:
        num_runs: Releases per dataset (cheap: ``10⁶`` take seconds).
        mechanism_class: The mechanism to audit (a test double for a broken one).
        epsilon, delta: The target that ``(σ, λ)`` are calibrated for.
        loss: ``"squared"`` or ``"logistic"``.
        clip: ``C`` (below 1, so both records are clipped).
        sigma_out: ``σ_out``.
        tau: ``τ``.
        grid_size: Number of ``ε`` values on which the claimed profile is evaluated.
        seed: Seed of the audit.

    Returns:
        The ``AuditResult`` (``mechanism="amp_release"``).
    """
    if num_runs < 4:
        raise ValueError(f"num_runs must be at least 4, got {num_runs}.")
    config, sample_d, sample_d_prime = _amp_design(
        mechanism_class, epsilon=epsilon, delta=delta, loss=loss, clip=clip, sigma_out=sigma_out, tau=tau
    )
    params = config.privacy_parameters
    top = amp_epsilon(1e-3 / num_runs, **params)
    claim = tradeoff_from_profile(lambda e: amp_delta(e, **params), np.linspace(0.0, top, grid_size))
    return run_audit(
        "amp_release", sample_d, sample_d_prime, claim, num_runs=num_runs, seed=seed,
        delta=delta, claimed_epsilon=amp_epsilon(delta, **params),
    )


def audit_all(*, quick: bool = False, seed: int = 0) -> list[AuditResult]:
    r"""The audits of every mechanism in the package.

    The validation-side mechanisms (gradient release, its overflow variant, private random
    search's score, DP-HyPO's trial score through a whole ``dp_hypo`` call, a whole DP-GIBO run), one AMP training release (``amp_release``,
    add/remove one training record; its ``claimed_mu`` is the local ``μ`` of AMP's claimed
    trade-off curve, see ``audit_amp_release``), Menart et al.'s noisy-norm release and
    exponential-mechanism selection (``audit_norm_release``, ``audit_exponential_selection``),
    and Kairouz et al.'s public-subspace gradient release and private AdaGrad preconditioner
    (``audit_projected_release``, ``audit_private_preconditioner``).

    Args:
        quick: Small run counts (about a minute on 2 cores) instead of ``≥ 10⁴`` releases
            per mechanism (``10⁵`` resp. ``10⁶`` for AMP, whose releases are vectorised).
        seed: Seed of the audits.

    Returns:
        One ``AuditResult`` per mechanism.
    """
    releases = 2_000 if quick else 20_000
    loop_runs = 100 if quick else 3_400  # T = 3 releases per run: ≥ 10⁴ releases per dataset
    amp_runs = 100_000 if quick else 1_000_000  # vectorised: under a second resp. a few seconds
    hypo_runs = 1_000 if quick else 10_000  # one whole dp_hypo call per release: about 1 ms each
    return [
        audit_gradient_release(num_runs=releases, seed=seed),
        audit_gradient_release(num_runs=releases, loss_scale_d_prime=1e307, seed=seed),
        audit_score_release(num_runs=releases, seed=seed),
        audit_dp_hypo_score(num_runs=hypo_runs, seed=seed),
        audit_dp_gibo(num_runs=loop_runs, seed=seed),
        audit_amp_release(num_runs=amp_runs, seed=seed),
        audit_norm_release(num_runs=releases, seed=seed),  # Menart et al.: adaptive_norm's norm release
        audit_exponential_selection(num_runs=releases, seed=seed),  # Menart et al.: selection of the iterate
        audit_projected_release(num_runs=releases, seed=seed),  # Kairouz et al.: public-subspace release
        audit_private_preconditioner(num_runs=releases, seed=seed),  # Kairouz et al.: AdaGrad preconditioner
        audit_clip_count_release(num_runs=releases, seed=seed),  # Andrew et al.: adaptive clipping's count
    ]


# ------------------------------------------------------- Menart et al.: norm release, exponential mechanism
def audit_norm_release(
    *,
    num_runs: int,
    mechanism_class: type | None = None,
    norm_mu: float = 1.0,
    clip_bound: float = 1.0,
    num_users: int = 10,
    dim: int = 3,
    seed: int = 0,
) -> AuditResult:
    r"""Audit one noisy-norm release of ``noise_schedule="adaptive_norm"``.

    ``A = 100 I``; users 2..n contribute ``+B u`` after clipping (``u`` a unit vector); the
    first user ``−B u`` on ``D`` and ``+B u`` on ``D′``, so ``‖ḡ‖`` is ``(n − 2)B/n`` and
    ``B``: they differ by the sensitivity ``2B/n``. The statistic is the released norm;
    the claim is ``norm_mu``.

    Args:
        num_runs: Releases per dataset.
        mechanism_class: The mechanism (default ``AdaptiveGaussianGradientMechanism``; a
            test double for a broken one).
        norm_mu, clip_bound, num_users, dim: The release's settings.
        seed: Seed of the audit.
    """
    from botorch_dp.privacy.mechanisms import AdaptiveGaussianGradientMechanism

    mechanism_class = AdaptiveGaussianGradientMechanism if mechanism_class is None else mechanism_class
    u = _direction(dim)
    A = 100.0 * torch.eye(dim, dtype=torch.float64)

    def sampler(first_sign: float) -> StatisticSampler:
        Y = (10.0 * u).unsqueeze(-1).repeat(1, num_users)
        Y[:, 0] = first_sign * 10.0 * u

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                clip_bound=clip_bound, num_users=num_users, generator=torch.Generator().manual_seed(stream)
            )
            return torch.tensor([mechanism.clipped_mean(A, Y).release_norm(norm_mu).norm for _ in range(num)])

        return sample

    return run_audit("adaptive_norm_release", sampler(-1.0), sampler(1.0), norm_mu, num_runs=num_runs, seed=seed)


def audit_exponential_selection(
    *,
    num_runs: int,
    mechanism_class: type | None = None,
    epsilon: float = 1.0,
    loss_clip: float = 1.0,
    num_users: int = 10,
    seed: int = 0,
) -> AuditResult:
    r"""Audit the exponential-mechanism choice of the returned iterate (``ε``-DP).

    Two candidates; every user but the first has loss 0 at both; the first user's losses
    are ``(C, 0)`` on ``D`` and ``(0, C)`` on ``D′``, so the clamped mean scores swap
    ``(Δ, 0) ↔ (0, Δ)``, ``Δ = C/n``. The statistic is ``1{chosen index = 0}``. The claim
    is the ledger's charge ``2Φ⁻¹(e^ε/(1 + e^ε))``; a correct sampler shows about
    ``2Φ⁻¹(e^{ε/2}/(1 + e^{ε/2}))`` here (with two candidates the log-ratio of each outcome
    is ``ε/2``), so the lower bound stays well below the claim, and a sampler that drops
    the Gumbel noise (always the argmin) or runs at several times its ``ε`` exceeds it.

    Args:
        num_runs: Selections per dataset.
        mechanism_class: The mechanism (default ``ExponentialLossSelection``; a test double).
        epsilon, loss_clip, num_users: The selection's settings.
        seed: Seed of the audit.
    """
    from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
    from botorch_dp.privacy.mechanisms import ExponentialLossSelection

    mechanism_class = ExponentialLossSelection if mechanism_class is None else mechanism_class

    def sampler(first_user: tuple[float, float]) -> StatisticSampler:
        losses = torch.zeros(2, num_users, dtype=torch.float64)
        losses[:, 0] = torch.tensor(first_user, dtype=torch.float64)

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                epsilon=epsilon, loss_clip=loss_clip, generator=torch.Generator().manual_seed(stream)
            )
            return torch.tensor([float(mechanism.release(losses).index == 0) for _ in range(num)])

        return sample

    return run_audit(
        "exponential_selection", sampler((loss_clip, 0.0)), sampler((0.0, loss_clip)), pure_dp_to_gdp_mu(epsilon),
        num_runs=num_runs, seed=seed,
    )


# ------------------------------------ Kairouz et al.: projected release, private preconditioner
def audit_projected_release(
    *,
    num_runs: int,
    mechanism_class: type[GaussianGradientMechanism] = GaussianGradientMechanism,
    privacy_mu: float = 1.0,
    num_steps: int = 1,
    clip_bound: float = 1.0,
    num_users: int = 10,
    dim: int = 5,
    k: int = 2,
    seed: int = 0,
) -> AuditResult:
    r"""Audit one public-subspace release (``optim.subspace.projected_release``, spec A2).

    ``A = 100 I`` (``d x d``) and a fixed orthonormal ``d x k`` basis ``Ṽ``; every user but
    the first has zero losses. On ``D`` the first user's losses are ``−10 Ṽu`` (``u`` a unit
    ``k``-vector), on ``D′`` ``10³ (Ṽu + w)`` with ``w ⟂ span(Ṽ)``: the projection drops
    ``w``, and clipping in ``k`` dimensions sends both to ``∓B u``, so the projected means
    differ by exactly ``2B/n``. The statistic is ``(Ṽu)ᵀ g`` on the θ-space release
    ``g = Ṽ ũ``; the claim is the per-release ``μ/√T``, as without a subspace.
    """
    from botorch_dp.optim.subspace import orthonormal_basis, projected_release

    grid = torch.arange(dim * (k + 1), dtype=torch.float64).reshape(dim, k + 1)
    Q = orthonormal_basis(torch.cos(grid) + torch.eye(dim, k + 1, dtype=torch.float64))
    basis, w = Q[:, :k], Q[:, k]
    direction = basis @ _direction(k)
    sampler, claimed = _gradient_samplers(
        mechanism_class, A=100.0 * torch.eye(dim, dtype=torch.float64), num_users=num_users, direction=direction,
        release=lambda mechanism, A, Y: projected_release(mechanism, basis, A, Y).release.gradient,
        clip_bound=clip_bound, privacy_mu=privacy_mu, num_steps=num_steps,
    )
    return run_audit(
        "projected_gradient_release", sampler(-10.0 * direction), sampler(1e3 * (direction + w)), claimed,
        num_runs=num_runs, seed=seed,
    )


def audit_private_preconditioner(
    *,
    num_runs: int,
    mechanism_class: type[GOEPreconditionerMechanism] = GOEPreconditionerMechanism,
    privacy_mu: float = 1.0,
    num_steps: int = 3,
    clip_bound: float = 1.0,
    num_users: int = 100,
    seed: int = 0,
) -> AuditResult:
    r"""Audit the private AdaGrad preconditioner's release at step ``t = T`` (spec A3, E2.1).

    ``k = 2``, ``A = 100 I``. Every user but the first has losses ``(1, 0)`` (clipped to
    ``B e₁``); the first user's are ``(0, −10)`` on ``D`` and ``(0, 10³)`` on ``D′``
    (clipped to ``∓B e₂``). Each of the ``t`` columns of ``X_t`` is the clipped mean of
    those users, computed by ``clipped_mean_gradient`` as in the release, so the columns
    differ by exactly ``Δ = 2B/n``, nearly orthogonally to the columns themselves: the
    rank-one worst case, where ``‖G_t − G_t′‖_F`` is within ``10⁻⁴`` of the bound
    ``√(2t) Δ``. The statistic is ``⟨Ĝ_t, E⟩_F`` with ``E`` the unit direction of
    ``G_t′ − G_t``; the claim is ``μ_H/√T``.
    """
    A = 100.0 * torch.eye(2, dtype=torch.float64)
    sensitivity = 2.0 * clip_bound / num_users

    def columns(first_user: Tensor) -> Tensor:
        Y = torch.zeros(2, num_users, dtype=torch.float64)
        Y[0, 1:] = 1.0
        Y[:, 0] = first_user
        mean, _ = clipped_mean_gradient(A, Y, clip_bound)
        return mean.unsqueeze(-1).expand(2, num_steps).clone()

    X, X_prime = columns(torch.tensor([0.0, -10.0])), columns(torch.tensor([0.0, 1e3]))
    E = gram_sqrt(X_prime) - gram_sqrt(X)
    E = E / E.norm()

    def sampler(X_t: Tensor) -> StatisticSampler:
        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                sensitivity=sensitivity, privacy_mu=privacy_mu, num_steps=num_steps,
                generator=torch.Generator().manual_seed(stream),
            )
            return torch.stack([(mechanism.release(X_t).matrix * E).sum() for _ in range(num)])

        return sample

    claimed = GOEPreconditionerMechanism(sensitivity=sensitivity, privacy_mu=privacy_mu, num_steps=num_steps).step_mu
    return run_audit("private_preconditioner", sampler(X), sampler(X_prime), claimed, num_runs=num_runs, seed=seed)


# ------------------------------------------------------- Andrew et al.: adaptive clipping's count release
def audit_clip_count_release(
    *,
    num_runs: int,
    mechanism_class: type | None = None,
    count_mu: float = 1.0,
    clip_bound: float = 1.0,
    num_users: int = 10,
    dim: int = 3,
    seed: int = 0,
) -> AuditResult:
    r"""Audit one clip-count release of ``clip_bound="adaptive"``.

    ``A = I``; users 2..n have estimates of norm ``B/2`` (within ``B``); the first user's is
    ``2B`` on ``D`` (above) and ``B/2`` on ``D′`` (within), so the exact counts are ``n − 1``
    and ``n``: they differ by the sensitivity 1. The statistic is the released count; the
    claim is ``count_mu``.

    Args:
        num_runs: Releases per dataset.
        mechanism_class: The mechanism (default ``GaussianClipCountMechanism``; a test
            double for a broken one).
        count_mu, clip_bound, num_users, dim: The release's settings.
        seed: Seed of the audit.
    """
    from botorch_dp.privacy.mechanisms import GaussianClipCountMechanism

    mechanism_class = GaussianClipCountMechanism if mechanism_class is None else mechanism_class
    u = _direction(dim)
    A = torch.eye(dim, dtype=torch.float64)

    def sampler(first_scale: float) -> StatisticSampler:
        Y = (0.5 * clip_bound * u).unsqueeze(-1).repeat(1, num_users)
        Y[:, 0] = first_scale * clip_bound * u

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(num_users=num_users, generator=torch.Generator().manual_seed(stream))
            return torch.tensor([mechanism.release(A, Y, clip_bound, count_mu).count for _ in range(num)])

        return sample

    return run_audit("adaptive_clip_count", sampler(2.0), sampler(0.5), count_mu, num_runs=num_runs, seed=seed)
