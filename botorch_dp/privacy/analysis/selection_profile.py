r"""Privacy-profile (PLD) accounting of private selection: ``δ(ε)`` of releasing the best of ``K`` trials.

The framework is that of Koskela, Redberg & Wang ("Privacy profiles for private selection", ICML 2024,
PMLR v235 koskela24a): bound the selection's privacy profile ``δ_A(ε)`` (the hockey-stick divergence
``H_{e^ε}(A(X) ‖ A(X'))``) by the trial's profile ``δ_Q`` and the probability generating function
``φ(z) = E[z^K]`` of the hidden number of trials, for ``K`` truncated negative binomial (P&S's
``D_{η,γ}``), Poisson, or binomial. The theorem statements of that paper could not be read from
the stored copies available when this was written (only its abstract), so the bound here is
derived below, in the paper's terms, and checked against brute-force enumeration of the exact
selection profile of small discrete trials (``tests/privacy/analysis/test_selection_profile.py``);
it claims no theorem number of theirs.

What was checked against the paper (issue 41, second pass): the stored copies (the PMLR v235 PDF,
arXiv 2402.06701 on ar5iv, a text dump of the ICML paper) again gave the abstract and the opening
of the introduction only. They confirm the framework — the profiles of ReportNoisyMax and
PrivateTuning bounded by the base algorithm's profile, "improves over the RDP-based accounting in
all regimes of interest", and a binomially distributed number of rounds — which is what this
module implements for PrivateTuning (``K`` truncated negative binomial, Poisson, binomial). Not
checked: their exact formula and whether it equals or is tighter than the bound below. The
derivation below was re-read step by step instead: the law of the best of ``K`` (``P[A ≤ y] =
φ(1 − G(y))``), the three ``ψ`` of ``selection_pgf_derivative`` against the pgfs of P&S Def. 1,
the Poisson and the binomial, the direction of each inequality of steps 1–3, and the handling of
``⊥``; no error was found. Third pass: the same stored copies, the same result (abstract and opening
only); the bound's evaluation was tightened instead (the bins, below), which brought it under the RDP
bound where it had been above (``reports/accounting-tightness.md``).

**The bound** (``selection_delta_pld``). Order the trial outputs by score (ties broken by an
independent uniform, which changes no profile); ``Q = Q(X)``, ``Q' = Q(X')`` with upper tails
``G(y) = Q(>y)``, ``G'(y) = Q'(>y)``. The best of ``K`` trials (``⊥`` when ``K = 0``) has density
``a(y) = q(y) φ'(1 − G(y))``, as ``P[A ≤ y] = φ(1 − G(y))``; write ``ψ(v) = φ'(1 − v)``,
decreasing, ``ψ(0) = E[K]``. ``⊥`` has the same mass ``φ(0)`` under both datasets.

1. ``G ≥ L(G')`` with ``L(v) = max(0, sup_{ε₁ ≥ 0} e^{−ε₁}(v − δ_Q(ε₁)))`` (DP of the set
   ``{> y}``), so ``a(y) ≤ q(y) ψ(L(G'(y)))``.
2. Cut ``v = G'(y) ∈ [0, 1]`` into bins ``[v_k, v_{k+1})`` (sets ``S_k``, ``Q'(S_k) = v_{k+1} − v_k``).
   On ``S_k``: ``ψ(L(G')) ≤ c_k = ψ(L(v_k))`` and ``ψ(G') ≥ ψ(v_{k+1})``, so
   ``[a − e^ε a']_+ ≤ c_k [q − e^{s_k} q']_+`` with ``s_k = ε − log(c_k / ψ(v_{k+1}))``.
3. ``c_k`` does not increase in ``k``; with ``c_J = 0``, summation by parts gives
   ``δ_A(ε) ≤ Σ_k (c_k − c_{k+1}) B_k``, ``B_k = Σ_{j ≤ k} H_{S_j}(s_j)`` where
   ``H_S(s) = ∫_S [q − e^s q']_+``. The ``S_j`` are disjoint, so with ``σ_k = min_{j ≤ k} s_j``,
   ``B_k ≤ H_{S_0 ∪ … ∪ S_k}(σ_k)``, and for a set ``U`` of ``Q'``-mass ``w = v_{k+1}``:
   ``H_U(σ) ≤ min_{ε₁ ≥ max(σ, 0)} (e^{ε₁} − e^σ) w + δ_Q(ε₁)`` (``ε₁ = σ ≥ 0``: ``δ_Q(σ)``;
   ``σ < 0``: ``δ_Q(0) + (1 − e^σ) w``), and ``B_k ≤ 1``.

For ``K ≡ 1`` it returns ``δ_Q(ε)`` exactly. Every discretisation errs on the safe side (the
profile is read at the grid point below, ``L`` is maximised over the grid only, the bins use their
worst end, any ``ε₁ ≥ max(σ, 0)`` bounds ``H_U(σ)``), so a coarse grid is looser, never wrong. The
bins' loss is ``log(ψ(v_k)/ψ(v_{k+1}))`` in ``s_k``: log-spaced ends alone (1,200 of them, until issue
41's third pass) lost up to ``0.027·|d log ψ/dv|`` near ``v = 1`` — 6% of ``ε`` for binomial ``K`` at
``n = 2E[K]`` and Poisson ``K`` on μ = 0.3 Gaussian trials, which made the bound looser than the RDP
one there — so evenly spaced ends are added until ``log ψ`` falls by at most ``2e-3`` across a bin.
``min_{ε₁ ≥ max(σ, 0)}`` in step 3 is taken at ``ε₁ = max(σ, ε*(w))`` with ``ε*(w)`` the grid minimiser
of ``e^{ε₁} w + δ_Q(ε₁)`` (convex in ``e^{ε₁}``, as ``δ_Q`` is a hockey-stick divergence). The trial's
profile must bound both directions (``max(δ_{X‖X'}, δ_{X'‖X})``, as dp_accounting's add-or-remove PLD reports). Pure
functions on numpy arrays; the DP-SGD trial's profile is in ``analysis.dp_sgd_selection``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from botorch_dp.privacy.analysis.private_selection_trials import tnb_gamma_for_mean
from botorch_dp.privacy.checks import check_choice, check_delta, check_greater, check_nonnegative, check_positive_int

__all__ = [
    "SELECTION_DISTRIBUTIONS",
    "PrivacyProfile",
    "gaussian_trial_profile",
    "max_privacy_profile",
    "per_trial_mu_for_epsilon_pld",
    "selection_delta_pld",
    "selection_epsilon_pld",
    "selection_pgf_derivative",
]

#: Distributions of the hidden number of trials ``K`` the profile bound accepts.
SELECTION_DISTRIBUTIONS: tuple[str, ...] = ("truncated_negative_binomial", "poisson", "binomial")

# v-grid of the bins of step 2: 0, log-spaced upper tails from 1e-14 to 1 (fine where v is small), and
# evenly spaced ones (fine where v is large: a bin's ψ(v_k)/ψ(v_{k+1}) is what it loses). The even part has
# enough points that log ψ falls by at most _BIN_LOG_PSI across a bin, between _V_EVEN_MIN and _V_EVEN_MAX.
_V_POINTS = 1200
_V_SMALLEST = 1e-14
_BIN_LOG_PSI = 2e-3
_V_EVEN_MIN, _V_EVEN_MAX = 2000, 40000
# rows of v per block when a (v, ε-grid) array is formed (bounds memory to ~ 500 x the profile grid)
_BLOCK = 500


@dataclass(frozen=True)
class PrivacyProfile:
    r"""A privacy profile ``ε ↦ δ(ε)`` known on a grid, read conservatively between grid points.

    Attributes:
        epsilons: ``m`` increasing grid values ``ε_i ≥ 0``, the first ``0``.
        deltas: ``m`` values ``δ(ε_i) ∈ [0, 1]``, non-increasing (a hockey-stick divergence is).
    """

    epsilons: np.ndarray
    deltas: np.ndarray

    def __post_init__(self) -> None:
        eps = np.asarray(self.epsilons, dtype=np.float64)
        deltas = np.asarray(self.deltas, dtype=np.float64)
        if eps.ndim != 1 or eps.size < 2 or eps.shape != deltas.shape:
            raise ValueError(
                f"epsilons and deltas must be 1-d of one length >= 2, got shapes {eps.shape} and {deltas.shape}."
            )
        if eps[0] != 0.0 or not np.all(np.diff(eps) > 0.0) or not np.all(np.isfinite(eps)):
            raise ValueError(f"epsilons must start at 0 and increase (finite), got {eps[:3]!r}...")
        if not np.all((deltas >= 0.0) & (deltas <= 1.0)):
            raise ValueError(f"deltas must lie in [0, 1], got min {deltas.min()!r}, max {deltas.max()!r}.")
        # a hockey-stick divergence never increases in ε; rounding noise of a numerical profile is
        # removed on the safe side (the running maximum from the right)
        deltas = np.maximum.accumulate(deltas[::-1])[::-1]
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "deltas", deltas)

    def delta(self, epsilon: float | np.ndarray) -> np.ndarray:
        r"""``δ`` at ``epsilon`` (any shape, ``≥ 0``), read at the grid point at or below it (an upper
        bound, as ``δ`` does not increase); beyond the grid, the last value."""
        eps = np.asarray(epsilon, dtype=np.float64)
        if np.any(np.isnan(eps)) or np.any(eps < 0.0):
            raise ValueError("epsilon must be >= 0.")
        i = np.searchsorted(self.epsilons, eps, side="right") - 1
        return self.deltas[np.clip(i, 0, self.epsilons.size - 1)]

    def epsilon(self, delta: float) -> float:
        r"""The smallest grid ``ε_i`` with ``δ(ε_i) ≤ delta`` (``inf`` if none): the trial's ``ε`` at ``δ``."""
        delta = check_delta(delta, "delta")
        ok = np.nonzero(self.deltas <= delta)[0]
        return float(self.epsilons[ok[0]]) if ok.size else math.inf


def max_privacy_profile(profiles: Sequence[PrivacyProfile]) -> PrivacyProfile:
    r"""The pointwise maximum ``max_i δ_i(ε)`` of profiles: one profile that bounds every trial.

    For heterogeneous trials (a public, finite search space whose trials differ in epochs, clip
    norm, batch size or noise multiplier): each trial is ``(ε, max_i δ_i(ε))``-DP for every ``ε``,
    which is all the selection bound uses. Read on the union of the grids, each profile read
    conservatively (``PrivacyProfile.delta``).

    Args:
        profiles: One or more ``PrivacyProfile``.

    Returns:
        A ``PrivacyProfile``.
    """
    profiles = list(profiles)
    if not profiles or not all(isinstance(p, PrivacyProfile) for p in profiles):
        raise ValueError(f"profiles must be a non-empty sequence of PrivacyProfile, got {profiles!r}.")
    grid = np.unique(np.concatenate([p.epsilons for p in profiles]))
    return PrivacyProfile(grid, np.max(np.stack([p.delta(grid) for p in profiles]), axis=0))


def selection_pgf_derivative(
    *, distribution: str, expected_trials: float, tnb_eta: float = 1.0, max_trials: int | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    r"""``ψ(v) = φ'(1 − v)`` of the number of trials ``K`` (``φ(z) = E[z^K]``), ``v ∈ [0, 1]``.

    - Truncated negative binomial ``D_{η,γ}`` (P&S Def. 1; ``γ`` from ``E[K]``):
      ``φ(z) = ((1 − (1−γ)z)^{−η} − 1)/(γ^{−η} − 1)``, ``ψ(v) = η(1−γ) u^{−η−1}/(γ^{−η} − 1)`` with
      ``u = γ + (1−γ)v``; ``η = 0`` (logarithmic): ``ψ(v) = (1−γ)/(u log(1/γ))``.
    - Poisson with mean ``m``: ``ψ(v) = m e^{−m v}``.
    - Binomial ``(n, p)`` with ``p = E[K]/n``: ``ψ(v) = n p (1 − p v)^{n−1}``.

    ``ψ(0) = E[K]`` and ``ψ`` decreases in ``v``.

    Args:
        distribution: One of ``SELECTION_DISTRIBUTIONS``.
        expected_trials: ``E[K]`` (``> 1`` for the truncated negative binomial; ``≤ max_trials``
            for the binomial).
        tnb_eta: ``η ∈ (−1, ∞)`` of the truncated negative binomial.
        max_trials: ``n`` of the binomial (required for it, ignored otherwise).

    Returns:
        ``ψ``, vectorised over numpy arrays.
    """
    check_choice(distribution, "distribution", SELECTION_DISTRIBUTIONS)
    mean = check_nonnegative(expected_trials, "expected_trials", allow_inf=False)
    if distribution == "poisson":
        if mean <= 0.0:
            raise ValueError(f"expected_trials must be > 0, got {expected_trials!r}.")
        return lambda v: mean * np.exp(-mean * np.asarray(v, dtype=np.float64))
    if distribution == "binomial":
        if max_trials is None:
            raise ValueError("max_trials (n of the binomial) is required for distribution='binomial'.")
        n = check_positive_int(max_trials, "max_trials")
        if not 0.0 < mean <= n:
            raise ValueError(f"expected_trials must be in (0, max_trials={n}], got {expected_trials!r}.")
        p = mean / n
        return lambda v: n * p * (1.0 - p * np.asarray(v, dtype=np.float64)) ** (n - 1)
    eta = check_greater(tnb_eta, "tnb_eta", -1.0)
    gamma = tnb_gamma_for_mean(eta=eta, mean_trials=mean)
    if eta == 0.0:
        scale = (1.0 - gamma) / math.log(1.0 / gamma)
        return lambda v: scale / (gamma + (1.0 - gamma) * np.asarray(v, dtype=np.float64))
    scale = eta * (1.0 - gamma) / (gamma ** (-eta) - 1.0)
    return lambda v: scale * (gamma + (1.0 - gamma) * np.asarray(v, dtype=np.float64)) ** (-eta - 1.0)


def _bin_ends(psi: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    r"""The v-grid of step 2: ``0``, log-spaced points from ``1e-14`` to ``1``, and evenly spaced points with
    at most ``_BIN_LOG_PSI`` fall of ``log ψ`` across each of their bins (between ``_V_EVEN_MIN`` and
    ``_V_EVEN_MAX`` points). Any grid gives a valid bound; a finer one a tighter one."""
    probe = np.linspace(0.0, 1.0, 4097)
    with np.errstate(divide="ignore"):
        log_psi = np.log(psi(probe))
    steepest = float(np.max(np.abs(np.diff(log_psi)))) * (probe.size - 1)  # max |d log ψ/dv|, to the probe's step
    even = _V_EVEN_MAX if not math.isfinite(steepest) else int(min(steepest / _BIN_LOG_PSI + 2, _V_EVEN_MAX))
    even = max(even, _V_EVEN_MIN)
    logs = np.logspace(math.log10(_V_SMALLEST), 0.0, _V_POINTS)
    return np.unique(np.concatenate([[0.0], logs, np.linspace(0.0, 1.0, even)]))


def _blocks(size: int) -> list[np.ndarray]:
    return np.array_split(np.arange(size), max(1, math.ceil(size / _BLOCK)))


def _selection_bound_parts(profile: PrivacyProfile, psi: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, ...]:
    r"""The ε-free parts of the bound: bin ends ``w = v_{k+1}``, ``c_k``, ``log(c_k / ψ(v_{k+1}))``,
    ``c_k − c_{k+1}``, and per ``w`` the grid ``ε₁`` minimising ``e^{ε₁} w + δ_Q(ε₁)`` with that minimum."""
    v = _bin_ends(psi)
    eps, deltas = profile.epsilons, profile.deltas
    # L(v) = max(0, max_i e^{-ε_i}(v − δ(ε_i))), in blocks of v to bound memory
    exp_neg = np.exp(-eps)
    lower = np.concatenate([np.max(exp_neg[None, :] * (v[i, None] - deltas[None, :]), axis=1) for i in _blocks(v.size)])
    lower = np.maximum.accumulate(np.maximum(lower, 0.0))  # non-decreasing in v (it is; keep it so exactly)
    c = np.minimum(psi(lower), psi(np.zeros(1))[0])
    ck = c[:-1]
    w = v[1:]
    log_ratio = np.log(ck) - np.log(psi(w))
    c_diff = ck - np.concatenate([ck[1:], [0.0]])
    # f_w(ε₁) = e^{ε₁} w + δ(ε₁) falls while Q'(loss > ε₁) > w and then rises: its grid minimiser ε*(w)
    # is, for ε₁ ≥ σ, the best choice when ε*(w) ≥ σ, and ε₁ = σ the best otherwise (step 3)
    exp_eps = np.exp(eps)
    at_min, f_min = np.empty(w.size), np.empty(w.size)
    for i in _blocks(w.size):
        vals = exp_eps[None, :] * w[i, None] + deltas[None, :]
        j = np.argmin(vals, axis=1)
        at_min[i], f_min[i] = eps[j], vals[np.arange(i.size), j]
    return w, ck, log_ratio, np.maximum(c_diff, 0.0), at_min, f_min


def _bound_at(profile: PrivacyProfile, parts: tuple[np.ndarray, ...], epsilon: float) -> float:
    r"""``Σ_k (c_k − c_{k+1}) B_k`` at ``ε`` (step 3 of the module docstring)."""
    w, _, log_ratio, c_diff, at_min, f_min = parts
    sigma = np.minimum.accumulate(epsilon - log_ratio)
    floor = np.maximum(sigma, 0.0)
    # ε₁ = σ itself (σ ≥ 0), or the σ < 0 form
    direct = np.where(sigma >= 0.0, profile.delta(floor), profile.deltas[0] + (1.0 - np.exp(sigma)) * w)
    # ε₁ = ε*(w) where it is allowed (≥ max(σ, 0)): (e^{ε₁} − e^σ) w + δ(ε₁); every allowed ε₁ is a valid bound
    best = np.minimum(direct, np.where(at_min >= floor, f_min - np.exp(sigma) * w, np.inf))
    return float(min(np.sum(c_diff * np.minimum(best, 1.0)), 1.0))


def selection_delta_pld(
    trial_profile: PrivacyProfile,
    epsilon: float,
    *,
    distribution: str = "truncated_negative_binomial",
    expected_trials: float,
    tnb_eta: float = 1.0,
    max_trials: int | None = None,
) -> float:
    r"""An upper bound on the selection's profile ``δ_A(ε)`` from the trial's profile ``δ_Q``.

    The bound of the module docstring (steps 1–3), ``δ_A(ε) ≤ Σ_k (c_k − c_{k+1}) B_k``.

    Args:
        trial_profile: ``δ_Q`` of one trial (both directions), a ``PrivacyProfile``.
        epsilon: ``ε ≥ 0``.
        distribution: One of ``SELECTION_DISTRIBUTIONS``.
        expected_trials: ``E[K]``.
        tnb_eta: ``η`` of the truncated negative binomial.
        max_trials: ``n`` of the binomial.

    Returns:
        ``δ ∈ [0, 1]``.
    """
    if not isinstance(trial_profile, PrivacyProfile):
        raise ValueError(f"trial_profile must be a PrivacyProfile, got {type(trial_profile).__name__}.")
    epsilon = check_nonnegative(epsilon, "epsilon", allow_inf=False)
    psi = selection_pgf_derivative(
        distribution=distribution, expected_trials=expected_trials, tnb_eta=tnb_eta, max_trials=max_trials
    )
    return _bound_at(trial_profile, _selection_bound_parts(trial_profile, psi), epsilon)


def selection_epsilon_pld(
    trial_profile: PrivacyProfile,
    *,
    distribution: str = "truncated_negative_binomial",
    expected_trials: float,
    delta: float,
    tnb_eta: float = 1.0,
    max_trials: int | None = None,
    tolerance: float = 1e-4,
) -> float:
    r"""The selection's ``ε`` at ``δ``: the smallest ``ε`` (to ``tolerance``, rounded up) with
    ``selection_delta_pld(trial_profile, ε, ...) ≤ δ``.

    The bound does not increase in ``ε``, so bisection finds it; the returned ``ε`` satisfies the
    bound (it is the upper end of the final bracket).

    Args:
        trial_profile: ``δ_Q`` of one trial (both directions).
        distribution: One of ``SELECTION_DISTRIBUTIONS``.
        expected_trials: ``E[K]``.
        delta: Target ``δ ∈ (0, 1)``.
        tnb_eta: ``η`` of the truncated negative binomial.
        max_trials: ``n`` of the binomial.
        tolerance: Width of the final bracket (``> 0``).

    Returns:
        ``ε ≥ 0`` (``inf`` when even the profile grid's largest ``ε`` does not reach ``δ``).
    """
    if not isinstance(trial_profile, PrivacyProfile):
        raise ValueError(f"trial_profile must be a PrivacyProfile, got {type(trial_profile).__name__}.")
    delta = check_delta(delta, "delta")
    tolerance = check_greater(tolerance, "tolerance", 0.0)
    psi = selection_pgf_derivative(
        distribution=distribution, expected_trials=expected_trials, tnb_eta=tnb_eta, max_trials=max_trials
    )
    parts = _selection_bound_parts(trial_profile, psi)
    lo, hi = 0.0, float(trial_profile.epsilons[-1])
    if _bound_at(trial_profile, parts, hi) > delta:
        return math.inf
    if _bound_at(trial_profile, parts, lo) <= delta:
        return 0.0
    while hi - lo > tolerance:
        mid = 0.5 * (lo + hi)
        if _bound_at(trial_profile, parts, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_trial_profile(mu: float, *, max_epsilon: float = 40.0, points: int = 2001) -> PrivacyProfile:
    r"""The exact privacy profile of a ``μ``-GDP trial (e.g. one Gaussian score of private selection),
    ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, on ``points`` evenly spaced ``ε ∈ [0, max_epsilon]``.

    Evaluated in log space (``scipy.special.log_ndtr``), clipped to ``[0, 1]``; a GDP profile is the
    same in both directions, as the selection bound needs.
    """
    from scipy.special import log_ndtr

    mu = check_greater(mu, "mu", 0.0)
    eps = np.linspace(0.0, float(max_epsilon), int(points))
    with np.errstate(over="ignore", invalid="ignore"):
        upper = np.exp(log_ndtr(-eps / mu + mu / 2.0))
        lower = np.exp(eps + log_ndtr(-eps / mu - mu / 2.0))
    return PrivacyProfile(eps, np.clip(np.nan_to_num(upper - lower, nan=0.0), 0.0, 1.0))


def per_trial_mu_for_epsilon_pld(
    *,
    target_epsilon: float,
    target_delta: float,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    max_trials: int | None = None,
    rtol: float = 1e-3,
) -> float:
    r"""The largest per-trial ``μ₀`` (to ``rtol``, rounded down) whose Gaussian-scored selection meets
    ``(target_epsilon, target_delta)`` by the privacy-profile bound: ``selection_delta_pld(profile(μ₀),
    target_epsilon) ≤ target_delta`` with the trial's exact GDP profile (``gaussian_trial_profile``).

    The bound at a fixed ``ε`` increases with ``μ₀`` (the trial's profile does), so ``μ₀`` is bisected on
    ``log μ₀`` between ``1e-4`` and ``30``. The validation-side counterpart of the RDP calibration
    ``private_selection.per_trial_mu_for_epsilon`` (compare the two: the cross-check).

    Args:
        target_epsilon: ``ε > 0`` of the whole selection.
        target_delta: ``δ ∈ (0, 1)``.
        mean_trials: ``E[K]``.
        distribution: One of ``SELECTION_DISTRIBUTIONS``.
        tnb_eta: ``η`` of the truncated negative binomial.
        max_trials: ``n`` of the binomial.
        rtol: Relative width of the final bracket on ``μ₀``.

    Returns:
        ``μ₀ > 0``.

    Raises:
        ValueError: If even ``μ₀ = 1e-4`` does not meet the target.
    """
    target_epsilon = check_greater(target_epsilon, "target_epsilon", 0.0)
    target_delta = check_delta(target_delta, "target_delta")
    psi = selection_pgf_derivative(
        distribution=distribution, expected_trials=mean_trials, tnb_eta=tnb_eta, max_trials=max_trials
    )

    def meets(mu: float) -> bool:
        profile = gaussian_trial_profile(mu)
        return _bound_at(profile, _selection_bound_parts(profile, psi), target_epsilon) <= target_delta

    lo, hi = 1e-4, 30.0
    if not meets(lo):
        raise ValueError(
            f"No per-trial mu reaches epsilon={target_epsilon} at delta={target_delta} with E[K]={mean_trials} "
            f"({distribution}) by the privacy-profile bound; allow a larger epsilon or fewer trials."
        )
    if meets(hi):
        return hi
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo
