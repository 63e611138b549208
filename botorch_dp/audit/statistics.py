r"""The statistics of an empirical privacy audit: rates, Clopper–Pearson bounds, trade-off curves.

An audit runs a release many times on two neighbouring datasets ``D`` and ``D′``, reduces
each run to one number (larger on ``D′``) and tests "``D′``" against "``D``" with a
threshold ``τ``. Every test of a ``μ``-GDP mechanism obeys ``β ≥ Φ(Φ⁻¹(1 − α) − μ)``, i.e.

    ``μ ≥ Φ⁻¹(1 − α) − Φ⁻¹(β)``,

with ``α`` the false-positive rate on ``D`` and ``β`` the false-negative rate on ``D′``
(Dong, Roth and Su, 2022). With one-sided Clopper–Pearson upper bounds of both rates (each
at ``1 − (1 − confidence)/2``, so that both hold together with probability
``confidence``) in place of the rates, the right-hand side is ``empirical_mu_lower``: a
lower bound on the ``μ`` the release really spends, at that confidence. The threshold is
chosen on the first half of the runs and the rates are counted on the second half
(choosing it on the counted runs would bias the bound upwards).

A claim that is no GDP ``μ`` (AMP claims a privacy profile ``δ(ε)``) is compared through the
trade-off curve ``f`` it implies (``tradeoff_from_profile``): the reported ``claimed_mu`` is
the ``μ`` of the Gaussian curve through ``(ᾱ, f(ᾱ))`` at the counted false-positive bound
``ᾱ``, so ``empirical_mu_lower > claimed_mu`` means ``β̄ < f(ᾱ)``, a violation of the claim.

The claim is what the audited code reports for each run (a ledger's ``validation.mu()``, a
release's recorded ``μ``, a guarantee's parameters), collected by the samplers in
``Observations``; a GDP claim that differs between runs is audited at its largest value
(the most the runs together claim). A non-finite statistic counts as the largest value:
a release that is NaN only on ``D′`` is flagged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from torch import Tensor

from botorch_dp.utils import child_seeds

__all__ = [
    "AuditResult",
    "Observations",
    "StatisticSampler",
    "TradeOffCurve",
    "assess",
    "clopper_pearson_upper",
    "epsilon_lower_from_rates",
    "gdp_mu_from_rates",
    "point_rate",
    "reported_mu",
    "run_audit",
    "sample_both",
    "tradeoff_from_profile",
    "tradeoff_mu",
]

#: A claimed trade-off curve: false-positive rates ``α`` (a numpy array) ↦ the smallest
#: false-negative rates ``f(α)`` that the claim allows (an array of the same shape).
TradeOffCurve = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Observations:
    r"""What ``num`` runs on one dataset gave.

    Attributes:
        statistics: One number per run (float64 tensor; larger values point to ``D′``).
        claimed_mus: The GDP ``μ`` the audited code reported for each run (e.g. its
            ledger's ``validation.mu()``), or ``None`` when the claim is given otherwise.
        reports: Per-run public reports for claims that are no single ``μ`` (e.g. AMP's
            privacy parameters), for the row to turn into its claim.
    """

    statistics: Tensor
    claimed_mus: Tensor | None = None
    reports: tuple[Any, ...] = ()


#: ``(num, seed) -> `` ``num`` runs' ``Observations`` (or just their statistics) on one dataset.
StatisticSampler = Callable[[int, int], Tensor | Observations]


@dataclass(frozen=True)
class AuditResult:
    r"""Outcome of one audit.

    Attributes:
        mechanism: Name of the audited release (the registry's row name).
        claimed_mu: The GDP parameter claimed (the largest of the runs' reports); for a
            claim given as a trade-off curve ``f`` (AMP), ``Φ⁻¹(1 − ᾱ) − Φ⁻¹(f(ᾱ))`` at the
            counted runs' Clopper–Pearson bound ``ᾱ`` of the false-positive rate (``tradeoff_mu``).
        empirical_mu: ``Φ⁻¹(1 − α̂) − Φ⁻¹(β̂)`` at the chosen threshold, a point estimate;
            a rate with no observed error enters as half an error, ``1/(2·runs)``
            (``point_rate``), never as 0.
        empirical_mu_lower: The same with Clopper–Pearson upper bounds of ``α``, ``β``.
        num_runs: Runs per dataset (half select the threshold, half are counted).
        threshold: The threshold ``τ`` chosen on the held-out half.
        false_positive_rate: ``α̂`` on the counted half (observed, may be 0).
        false_negative_rate: ``β̂`` on the counted half (observed, may be 0).
        confidence: Joint confidence of the lower bound.
        delta: For audits run at a ``δ`` (AMP), that ``δ``; else ``None``.
        claimed_epsilon: The ``ε`` claimed at ``delta`` (or ``None``).
        empirical_epsilon_lower: A lower bound, at the same confidence, on the ``ε`` of any
            ``(ε, delta)``-DP guarantee the release can have, or ``None``.
        seconds: Wall time of the audit when run by ``audit_all`` (else ``None``).
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
    seconds: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def leaks(self) -> bool:
        r"""Whether the lower bound exceeds the claim (the release spends more than it claims)."""
        return self.empirical_mu_lower > self.claimed_mu


def gdp_mu_from_rates(false_positive_rate: float, false_negative_rate: float) -> float:
    r"""``max(0, Φ⁻¹(1 − α) − Φ⁻¹(β))``: the smallest ``μ`` whose trade-off curve allows ``(α, β)``.

    A test with ``α + β ≥ 1`` is no better than a coin and proves nothing (0). A rate of
    exactly 0 with the other below 1 is a perfect test on one side, which no finite ``μ``
    allows: the value is ``inf``. (It used to clamp 0 to ``1e-300`` and return about 37, a
    number that looks like a measurement and is not one.) Observed rates should not be
    passed here raw: a count of 0 errors in ``n`` runs is no evidence of a rate of 0; use
    Clopper–Pearson bounds (``clopper_pearson_upper``, never 0) or ``point_rate``.
    """
    a, b = float(false_positive_rate), float(false_negative_rate)
    if not (0.0 <= a <= 1.0 and 0.0 <= b <= 1.0):
        raise ValueError(f"rates must lie in [0, 1], got {a!r} and {b!r}.")
    if a + b >= 1.0:
        return 0.0
    if a == 0.0 or b == 0.0:
        return math.inf
    return max(float(norm.isf(a) - norm.ppf(b)), 0.0)


def point_rate(errors: int, runs: int) -> float:
    r"""The point estimate of an error rate from ``errors`` in ``runs``: ``errors/runs``, but
    ``1/(2·runs)`` when no error was seen.

    A rate of 0 would make ``gdp_mu_from_rates`` infinite (a perfect test); half an error is
    the usual continuity correction and keeps the point estimate finite and below what
    ``runs`` can show (it stays above the Clopper–Pearson lower bound's value, which uses
    ``1 − (1 − c)^{1/runs} > 1/(2·runs)``).
    """
    if runs < 1:
        raise ValueError(f"runs must be positive, got {runs}.")
    return max(errors, 0.5) / runs


def clopper_pearson_upper(successes: int, trials: int, confidence: float) -> float:
    r"""One-sided Clopper–Pearson upper bound of a binomial proportion (positive, at most 1)."""
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
    return gdp_mu_from_rates(false_positive_rate, min(float(tradeoff_value), 1.0))


def tradeoff_from_profile(profile: Callable[[float], float], epsilons: Sequence[float] | np.ndarray) -> TradeOffCurve:
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


# ------------------------------------------------------------------------- thresholds
def _rates(stat_d: np.ndarray, stat_d_prime: np.ndarray, threshold: float) -> tuple[int, int]:
    false_positives = int((stat_d > threshold).sum())
    false_negatives = int((stat_d_prime <= threshold).sum())
    return false_positives, false_negatives


def _each(confidence: float) -> float:
    return 1.0 - (1.0 - confidence) / 2.0  # Bonferroni over the two rates


def _lower_bound(stat_d: np.ndarray, stat_d_prime: np.ndarray, threshold: float, confidence: float) -> float:
    fp, fn = _rates(stat_d, stat_d_prime, threshold)
    each = _each(confidence)
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
    tail = 1.0 - np.logspace(-1.0, math.log10(min(50.0 / pooled.size, 0.1)), 30)
    candidates = np.unique(np.quantile(pooled, np.clip(np.concatenate([np.linspace(0.0, 1.0, 101), tail]), 0.0, 1.0)))
    sorted_d, sorted_d_prime = np.sort(stat_d), np.sort(stat_d_prime)
    false_positives = len(stat_d) - np.searchsorted(sorted_d, candidates, side="right")
    false_negatives = np.searchsorted(sorted_d_prime, candidates, side="right")
    each = _each(confidence)
    alpha_upper = [clopper_pearson_upper(int(k), len(stat_d), each) for k in false_positives]
    beta_upper = [clopper_pearson_upper(int(k), len(stat_d_prime), each) for k in false_negatives]
    claimed = claim(np.asarray(alpha_upper))
    margins = [
        gdp_mu_from_rates(a, b) - tradeoff_mu(a, float(f))
        for a, b, f in zip(alpha_upper, beta_upper, claimed, strict=True)
    ]
    return float(candidates[int(np.argmax(margins))])


# ----------------------------------------------------------------------------- audits
def _as_observations(value: Tensor | Observations, num: int, which: str) -> Observations:
    out = value if isinstance(value, Observations) else Observations(statistics=torch.as_tensor(value))
    if out.statistics.reshape(-1).shape[0] != num:
        raise ValueError(f"The sampler of {which} returned {out.statistics.numel()} statistics for {num} runs.")
    return out


def sample_both(
    sample_d: StatisticSampler, sample_d_prime: StatisticSampler, *, num_runs: int, seed: int = 0
) -> tuple[Observations, Observations]:
    r"""``num_runs`` runs on ``D`` and on ``D′``, from independent child seeds of ``seed``."""
    if num_runs < 4:
        raise ValueError(f"num_runs must be at least 4, got {num_runs}.")
    seeds = child_seeds([seed, 0], 2)
    return (
        _as_observations(sample_d(num_runs, seeds[0]), num_runs, "D"),
        _as_observations(sample_d_prime(num_runs, seeds[1]), num_runs, "D′"),
    )


def _as_statistics(values: Tensor) -> np.ndarray:
    out = values.detach().to(torch.float64).cpu().reshape(-1).numpy().copy()
    out[~np.isfinite(out)] = np.inf  # a NaN or inf release is the most suspicious outcome
    return out


def reported_mu(*observations: Observations) -> float:
    r"""The largest GDP ``μ`` the runs reported (``ValueError`` if a run reported none or NaN)."""
    values = []
    for obs in observations:
        if obs.claimed_mus is None:
            raise ValueError("The runs reported no claimed mu: pass claimed_mu to run_audit.")
        values.append(obs.claimed_mus.detach().to(torch.float64).reshape(-1))
    claims = torch.cat(values)
    if claims.numel() == 0 or bool(torch.isnan(claims).any()):
        raise ValueError("Every run must report a claimed mu (no NaN).")
    return float(claims.max())


def assess(
    name: str,
    observations_d: Observations,
    observations_d_prime: Observations,
    claimed_mu: float | TradeOffCurve,
    *,
    confidence: float = 0.95,
    delta: float | None = None,
    claimed_epsilon: float | None = None,
) -> AuditResult:
    r"""The ``AuditResult`` of runs already made (see ``run_audit``)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}.")
    stat_d, stat_d_prime = _as_statistics(observations_d.statistics), _as_statistics(observations_d_prime.statistics)
    num_runs = len(stat_d)
    half = num_runs // 2
    if callable(claimed_mu):
        threshold = _best_threshold_against(stat_d[:half], stat_d_prime[:half], confidence, claimed_mu)
    else:
        threshold = _best_threshold(stat_d[:half], stat_d_prime[:half], confidence)
    counted_d, counted_d_prime = stat_d[half:], stat_d_prime[half:]
    fp, fn = _rates(counted_d, counted_d_prime, threshold)
    n, m = len(counted_d), len(counted_d_prime)
    each = _each(confidence)
    alpha_upper, beta_upper = clopper_pearson_upper(fp, n, each), clopper_pearson_upper(fn, m, each)
    if callable(claimed_mu):
        claimed = tradeoff_mu(alpha_upper, float(np.asarray(claimed_mu(np.array([alpha_upper]))).reshape(-1)[0]))
    else:
        claimed = float(claimed_mu)
    return AuditResult(
        mechanism=name,
        claimed_mu=claimed,
        empirical_mu=gdp_mu_from_rates(point_rate(fp, n), point_rate(fn, m)),
        empirical_mu_lower=gdp_mu_from_rates(alpha_upper, beta_upper),
        num_runs=num_runs,
        threshold=threshold,
        false_positive_rate=fp / n,
        false_negative_rate=fn / m,
        confidence=confidence,
        delta=None if delta is None else float(delta),
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        empirical_epsilon_lower=None if delta is None else epsilon_lower_from_rates(alpha_upper, beta_upper, delta),
    )


def run_audit(
    name: str,
    sample_d: StatisticSampler,
    sample_d_prime: StatisticSampler,
    claimed_mu: float | TradeOffCurve | None = None,
    *,
    num_runs: int,
    seed: int = 0,
    confidence: float = 0.95,
    delta: float | None = None,
    claimed_epsilon: float | None = None,
) -> AuditResult:
    r"""Audit a release from samplers of its statistic on ``D`` and ``D′``.

    For a GDP claim the threshold maximises the lower bound on the selection half. For a
    claim given as a trade-off curve ``f`` it maximises the margin over the claim,
    ``gdp_mu_from_rates(ᾱ, β̄) − tradeoff_mu(ᾱ, f(ᾱ))``, and the reported ``claimed_mu``
    is ``tradeoff_mu(ᾱ, f(ᾱ))`` at the counted half's bound ``ᾱ``: the lower bound exceeds
    it exactly when ``β̄ < f(ᾱ)``. With probability at least ``confidence`` the true rates
    satisfy ``α ≤ ᾱ`` and ``β ≤ β̄``; a true claim gives ``β ≥ f(α) ≥ f(ᾱ)`` (``f``
    non-increasing), so the lower bound stays below the claim.

    Args:
        name: Name for the report.
        sample_d: ``(num, seed) -> Observations`` (or a tensor of statistics) of runs on ``D``.
        sample_d_prime: The same on ``D′`` (the dataset the test looks for: larger values).
        claimed_mu: The claim: a GDP ``μ``, a trade-off curve (``TradeOffCurve``), or
            ``None`` (default): the largest ``μ`` the runs reported
            (``Observations.claimed_mus``).
        num_runs: Runs per dataset; the first half selects the threshold.
        seed: Seed of the samplers (an audit must be reproducible, unless its sampler
            draws from OS entropy on purpose).
        confidence: Joint confidence of ``empirical_mu_lower``.
        delta: Also bound ``ε`` at this ``δ`` (``empirical_epsilon_lower``).
        claimed_epsilon: The claimed ``ε`` at ``delta``, for the report.

    Returns:
        The ``AuditResult``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}.")
    obs_d, obs_d_prime = sample_both(sample_d, sample_d_prime, num_runs=num_runs, seed=seed)
    claim = reported_mu(obs_d, obs_d_prime) if claimed_mu is None else claimed_mu
    return assess(name, obs_d, obs_d_prime, claim, confidence=confidence, delta=delta, claimed_epsilon=claimed_epsilon)
