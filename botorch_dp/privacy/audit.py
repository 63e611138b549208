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
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from torch import Tensor

from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, GaussianScoreMechanism
from botorch_dp.utils import child_seeds

#: A sampler of ``num_runs`` audit statistics from one of the two datasets.
StatisticSampler = Callable[[int, int], Tensor]


@dataclass(frozen=True)
class AuditResult:
    r"""Outcome of one audit.

    Attributes:
        mechanism: Name of the audited mechanism.
        claimed_mu: The GDP parameter the mechanism claims.
        empirical_mu: ``Φ⁻¹(1 − α̂) − Φ⁻¹(β̂)`` at the chosen threshold (point estimate).
        empirical_mu_lower: The same with Clopper–Pearson upper bounds of ``α``, ``β``.
        num_runs: Releases per dataset (half select the threshold, half are counted).
        threshold: The threshold ``τ`` chosen on the held-out half.
        false_positive_rate: ``α̂`` on the counted half.
        false_negative_rate: ``β̂`` on the counted half.
        confidence: Joint confidence of the lower bound.
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


def _as_statistics(values: Tensor) -> np.ndarray:
    out = values.detach().to(torch.float64).cpu().numpy().copy()
    out[~np.isfinite(out)] = np.inf  # a NaN or inf release is the most suspicious outcome
    return out


def run_audit(
    name: str,
    sample_d: StatisticSampler,
    sample_d_prime: StatisticSampler,
    claimed_mu: float,
    *,
    num_runs: int,
    seed: int = 0,
    confidence: float = 0.95,
) -> AuditResult:
    r"""Audit a mechanism from samplers of its statistic on ``D`` and ``D′``.

    Args:
        name: Name for the report.
        sample_d: ``(num, seed) -> num`` statistics of releases on ``D``.
        sample_d_prime: The same on ``D′`` (the dataset the test looks for: larger values).
        claimed_mu: The mechanism's GDP claim.
        num_runs: Releases per dataset; the first half selects the threshold.
        seed: Seed of the audit's noise (an audit must be reproducible).
        confidence: Joint confidence of ``empirical_mu_lower``.

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
    threshold = _best_threshold(stat_d[:half], stat_d_prime[:half], confidence)
    counted_d, counted_d_prime = stat_d[half:], stat_d_prime[half:]
    fp, fn = _rates(counted_d, counted_d_prime, threshold)
    n, m = len(counted_d), len(counted_d_prime)
    return AuditResult(
        mechanism=name,
        claimed_mu=float(claimed_mu),
        empirical_mu=gdp_mu_from_rates(fp / n, fn / m),
        empirical_mu_lower=_lower_bound(counted_d, counted_d_prime, threshold, confidence),
        num_runs=num_runs,
        threshold=threshold,
        false_positive_rate=fp / n,
        false_negative_rate=fn / m,
        confidence=confidence,
    )


# ---------------------------------------------------------------------------- the audits
def _direction(d: int) -> Tensor:
    return torch.ones(d, dtype=torch.float64) / math.sqrt(d)


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
    A = 100.0 * torch.eye(dim, dtype=torch.float64)

    def sampler(first_user: Tensor) -> StatisticSampler:
        Y = torch.zeros(dim, num_users, dtype=torch.float64)
        Y[:, 0] = first_user

        def sample(num: int, stream: int) -> Tensor:
            mechanism = mechanism_class(
                clip_bound=clip_bound, num_users=num_users, privacy_mu=privacy_mu, num_steps=num_steps,
                generator=torch.Generator().manual_seed(stream),
            )
            return torch.stack([mechanism.release(A, Y).gradient @ u for _ in range(num)])

        return sample

    name = "gradient_release" if loss_scale_d_prime < 1e300 else "gradient_release_overflow"
    claimed = GaussianGradientMechanism(
        clip_bound=clip_bound, num_users=num_users, privacy_mu=privacy_mu, num_steps=num_steps
    ).step_mu
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
                config = DPGIBOConfig(
                    bounds=bounds, kernel=kernel, num_iterations=num_iterations, privacy_mu=privacy_mu,
                    clip_bound=clip_bound, step_size=0.1, batch_size=dim + 1, search_radius=0.3,
                    noise_variance=1e-6, num_restarts=1, raw_samples=16, seed=run_seed,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # explicit noise seeds warn; audits need them
                    release = DPGIBO(config).run(objective, progress=False).release
                out.append((release.released_gradients @ u).sum())
            return torch.stack(out)

        return sample

    claimed = privacy_mu if claimed_mu is None else claimed_mu
    return run_audit("dp_gibo_loop", sampler(-1.0), sampler(1.0), claimed, num_runs=num_runs, seed=seed)


def audit_all(*, quick: bool = False, seed: int = 0) -> list[AuditResult]:
    r"""The audits of every mechanism in the package.

    Args:
        quick: Small run counts (about a minute on 2 cores) instead of ``≥ 10⁴`` releases
            per mechanism.
        seed: Seed of the audits.

    Returns:
        One ``AuditResult`` per mechanism.
    """
    releases = 2_000 if quick else 20_000
    loop_runs = 100 if quick else 3_400  # T = 3 releases per run: ≥ 10⁴ releases per dataset
    return [
        audit_gradient_release(num_runs=releases, seed=seed),
        audit_gradient_release(num_runs=releases, loss_scale_d_prime=1e307, seed=seed),
        audit_score_release(num_runs=releases, seed=seed),
        audit_dp_gibo(num_runs=loop_runs, seed=seed),
        audit_norm_release(num_runs=releases, seed=seed),  # seed 003: adaptive_norm's norm release
        audit_exponential_selection(num_runs=releases, seed=seed),  # seed 003: selection of the iterate
    ]


# ------------------------------------------------------- seed 003: norm release, exponential mechanism
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
