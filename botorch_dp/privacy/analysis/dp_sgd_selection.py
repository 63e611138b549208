r"""A DP-SGD trial as the base of private selection: its RDP curve (Opacus) and privacy profile
(dp_accounting's PLD), the reference curves that bound heterogeneous trials, and the selection's
RDP curve on the training ledger's grid, ready to be recorded once before the first trial.

A trial is Poisson-subsampled Gaussian steps ``(σ, q, T)`` under add-or-remove-one-record
(Opacus's convention). Its RDP curve is Opacus's ``compute_rdp`` (Mironov, Talwar & Zhang 2019),
which overflows to NaN at large orders for some ``(q, σ, T)``; those orders read ``inf`` (a valid
bound). Its privacy profile is dp_accounting's PLD of the subsampled Gaussian composed ``T`` times
(pessimistic discretisation, ``max`` of the add and remove directions). The selection bounds are
``private_selection`` (RDP, Papernot & Steinke 2022) and ``selection_profile`` (profile). Opacus
and dp_accounting are imported only when a function that needs them is called.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from botorch_dp.privacy.analysis.private_selection import ALL_DISTRIBUTIONS, private_selection_rdp_curve
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS
from botorch_dp.privacy.analysis.selection_profile import PrivacyProfile, max_privacy_profile
from botorch_dp.privacy.checks import check_choice, check_history_entry, check_positive

__all__ = [
    "CURVE_ORDERS",
    "PROFILE_EPSILONS",
    "TrialShape",
    "dp_sgd_privacy_profile",
    "dp_sgd_rdp_curve",
    "max_rdp_curve",
    "reference_trial_curves",
    "selection_training_rdp",
]

#: Public grid on which a DP-SGD trial's RDP curve is evaluated once (``DEFAULT_RDP_ORDERS`` and
#: ``1 + 10^x`` for 281 ``x`` in ``[−3, 4]``); between grid orders the curve reads the next order up.
CURVE_ORDERS: tuple[float, ...] = tuple(
    sorted(set(DEFAULT_RDP_ORDERS) | {1.0 + 10.0**x for x in np.linspace(-3.0, 4.0, 281)})
)

#: Default ε grid of a trial's privacy profile: 0 to 40 in steps of 0.01.
PROFILE_EPSILONS: np.ndarray = np.linspace(0.0, 40.0, 4001)

#: One DP-SGD trial: ``(noise_multiplier σ, sample_rate q, steps T)``.
TrialShape = tuple[float, float, int]


def _rdp_values(noise_multiplier: float, sample_rate: float, steps: int, orders: np.ndarray) -> np.ndarray:
    r"""Opacus's ``compute_rdp`` at ``orders``, non-finite values read as ``inf``, rounding below 0 as 0."""
    from opacus.accountants.analysis.rdp import compute_rdp

    if noise_multiplier == 0.0:
        return np.full(orders.shape, math.inf)
    with warnings.catch_warnings():  # overflow in Opacus's series at large orders: read as inf below
        warnings.simplefilter("ignore", RuntimeWarning)
        values = np.asarray(
            compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=orders), dtype=np.float64
        ).reshape(orders.shape)
    return np.where(np.isfinite(values), np.maximum(values, 0.0), math.inf)


def _step_up_curve(values: np.ndarray, orders: np.ndarray) -> Callable[[float], float]:
    r"""``α ↦`` the value at the smallest grid order ``≥ α`` (``inf`` above the grid): an upper bound
    of the curve, as a Rényi divergence does not decrease in its order."""

    def curve(order: float) -> float:
        i = int(np.searchsorted(orders, float(order), side="left"))
        return float(values[i]) if i < orders.size else math.inf

    return curve


def dp_sgd_rdp_curve(*, noise_multiplier: float, sample_rate: float, steps: int) -> Callable[[float], float]:
    r"""The RDP curve ``α ↦ ε(α)`` of one DP-SGD run, evaluated once on ``CURVE_ORDERS``.

    Opacus's ``compute_rdp`` on the public grid (NaN and overflow read as ``inf``); between grid
    orders the curve reads the next grid order up, a valid bound because ``ε(α)`` does not
    decrease in ``α``. Use it as ``base_rdp`` of ``private_selection_rdp_curve``: evaluating
    ``compute_rdp`` at each order that bound's minimisation visits takes about a minute.

    Args:
        noise_multiplier: ``σ ≥ 0`` (0: no noise, every order ``inf``).
        sample_rate: Poisson rate ``q ∈ (0, 1]``.
        steps: ``T ≥ 1``.

    Returns:
        The curve, a function of the order ``α > 1``.
    """
    noise_multiplier, sample_rate, steps = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
    orders = np.asarray(CURVE_ORDERS)
    return _step_up_curve(_rdp_values(noise_multiplier, sample_rate, steps, orders), orders)


def dp_sgd_privacy_profile(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    epsilons: Sequence[float] | np.ndarray | None = None,
    value_discretization_interval: float = 1e-3,
) -> PrivacyProfile:
    r"""The privacy profile ``δ(ε)`` of one DP-SGD run on a grid, from dp_accounting's PLD.

    ``from_gaussian_mechanism(standard_deviation=σ, sensitivity=1, sampling_prob=q)`` (pessimistic
    estimate, add-or-remove-one) self-composed ``T`` times; ``δ`` is the maximum over both
    directions (``PrivacyLossDistribution.get_delta_for_epsilon``).

    Args:
        noise_multiplier: ``σ > 0``.
        sample_rate: ``q ∈ (0, 1]``.
        steps: ``T ≥ 1``.
        epsilons: Increasing grid starting at 0 (default ``PROFILE_EPSILONS``).
        value_discretization_interval: The PLD's privacy-loss grid (smaller: tighter, slower).

    Returns:
        A ``PrivacyProfile``.
    """
    from dp_accounting.pld import privacy_loss_distribution

    noise_multiplier, sample_rate, steps = check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps")
    if noise_multiplier == 0.0:
        raise ValueError("noise_multiplier must be > 0 for a privacy profile (0 gives no guarantee).")
    interval = check_positive(value_discretization_interval, "value_discretization_interval", allow_inf=False)
    grid = PROFILE_EPSILONS if epsilons is None else np.asarray(epsilons, dtype=np.float64)
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        sensitivity=1.0,
        sampling_prob=sample_rate,
        value_discretization_interval=interval,
    ).self_compose(steps)
    deltas = np.clip(np.asarray(pld.get_delta_for_epsilon(grid), dtype=np.float64), 0.0, 1.0)
    return PrivacyProfile(grid, deltas)


def max_rdp_curve(curves: Sequence[Callable[[float], float]]) -> Callable[[float], float]:
    r"""The pointwise maximum ``α ↦ max_i ε_i(α)`` of RDP curves: one curve bounding every trial.

    The selection theorems need every trial bounded by one reference curve; over a public, finite
    search space the maximum of the trials' curves is the smallest such curve. (For a box of
    ``(σ, q, T)``, ``ε(α)`` decreases in ``σ`` and increases in ``q`` and ``T``, so the corner
    ``(σ_min, q_max, T_max)`` bounds the box; pass that one trial.)

    Args:
        curves: One or more curves ``α ↦ ε(α)``.

    Returns:
        The curve of the maximum (a non-finite value of any curve reads ``inf``).
    """
    curves = list(curves)
    if not curves or not all(callable(c) for c in curves):
        raise ValueError(f"curves must be a non-empty sequence of callables, got {curves!r}.")

    def curve(order: float) -> float:
        values = [float(c(order)) for c in curves]
        return math.inf if not all(math.isfinite(v) for v in values) else max(values)

    return curve


def reference_trial_curves(
    trials: Sequence[TrialShape], *, epsilons: Sequence[float] | np.ndarray | None = None, profile: bool = True
) -> tuple[Callable[[float], float], PrivacyProfile | None]:
    r"""One RDP curve and one privacy profile that bound every trial of a public, finite search space.

    The trials may differ in epochs, clip norm (σ is noise std over the clip norm, so a trial's
    ``(σ, q, T)`` already accounts for it), batch size (``q``) and noise multiplier: the pointwise
    maxima ``max_rdp_curve`` and ``max_privacy_profile`` of the trials' own curves.

    Args:
        trials: ``(σ, q, T)`` of each distinct trial.
        epsilons: The profile's ε grid (default ``PROFILE_EPSILONS``).
        profile: Whether to compute the profile as well (``False``: ``None``).

    Returns:
        ``(rdp_curve, privacy_profile)``.
    """
    trials = list(trials)
    if not trials:
        raise ValueError("trials must hold at least one (noise_multiplier, sample_rate, steps).")
    curve = max_rdp_curve([dp_sgd_rdp_curve(noise_multiplier=s, sample_rate=q, steps=t) for s, q, t in trials])
    if not profile:
        return curve, None
    profiles = [
        dp_sgd_privacy_profile(noise_multiplier=s, sample_rate=q, steps=t, epsilons=epsilons) for s, q, t in trials
    ]
    return curve, max_privacy_profile(profiles)


def selection_training_rdp(
    base_rdp: Callable[[float], float],
    *,
    mean_trials: float,
    distribution: str = "truncated_negative_binomial",
    tnb_eta: float = 1.0,
    base_delta: Callable[[float], float] | None = None,
    orders: Sequence[float] = DEFAULT_RDP_ORDERS,
    binomial_rounds: int | None = None,
) -> tuple[float, ...]:
    r"""The whole selection's RDP curve ``ε'(λ_i)`` on the ledger's grid, to be recorded ONCE.

    Papernot & Steinke's bound (Thm. 2, truncated negative binomial; Thm. 6, Poisson; their generic
    pgf bound for the binomial) of
    ``private_selection_rdp_curve`` over the trial's (or the reference) curve, at each order of
    ``orders`` — by default ``DEFAULT_RDP_ORDERS``, which is the training ledger's
    ``TRAINING_RDP_ORDERS``. Record it before the first trial as one training mechanism, e.g.
    ``TrainingMechanism(description, selection_training_rdp(...))`` or
    ``ledger.external.record(TrainingMechanism.from_rdp(description, rdp), run_id=...)``; no per-trial
    training run may be recorded (their count would reveal ``K``). The tighter profile bound
    (``selection_epsilon_pld``) is recorded instead as one ``(ε, δ)`` entry (``ApproximateDP``), which
    the ledger composes with its other entries by basic composition
    (``training.selection_accounting.choose_selection_accounting``; ``select_training_runs``'s
    ``accounting=``).

    Args:
        base_rdp: ``α ↦ ε(α)`` of one trial (e.g. ``dp_sgd_rdp_curve``, ``reference_trial_curves``).
        mean_trials: ``E[K]``.
        distribution: ``"truncated_negative_binomial"``, ``"poisson"`` or ``"binomial"``.
        tnb_eta: ``η`` of the truncated negative binomial.
        base_delta: ``ε ↦ δ(ε)`` of one trial for the Poisson and binomial bounds (``None``: from
            ``base_rdp``).
        orders: The grid (default: the ledger's).
        binomial_rounds: ``m`` of the binomial (required for it).

    Returns:
        ``ε'(λ_i) ≥ 0`` per order (``inf`` allowed), a tuple.
    """
    check_choice(distribution, "distribution", ALL_DISTRIBUTIONS)
    curve = private_selection_rdp_curve(
        base_rdp,
        base_delta=base_delta,
        mean_trials=mean_trials,
        distribution=distribution,
        tnb_eta=tnb_eta,
        binomial_rounds=binomial_rounds,
    )
    return tuple(curve(float(a)) for a in orders)
