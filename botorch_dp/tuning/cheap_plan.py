r"""The budget of cheap tuning (``tuning.cheap_tuning``): how ε is split between a tuning phase on a
Poisson subset and the final DP-SGD run, the noise of each, and what the result states.

Everything here is a pure function of public settings (ε, δ, the run's shape, γ, the number of
trials); nothing looks at data. The accounting is RDP on the ledger's grid of orders
(``TRAINING_RDP_ORDERS``), the grid on which the ledger composes the two phases, so the
ledger's statement of the whole procedure is within the ε asked for.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from botorch_dp.privacy.accountants import dp_sgd_rdp
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.analysis.subsampling import poisson_subsampled_rdp
from botorch_dp.privacy.checks import check_delta, check_positive, check_positive_int, check_probability
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger

__all__ = [
    "CARRY_RULE",
    "DEFAULT_SUBSAMPLE_FRACTION",
    "DEFAULT_TUNING_SHARE",
    "SHARE_GRID",
    "CheapTuneResult",
    "SubsamplePlan",
    "plan_subsample_tuning",
    "subsample_phase_rdp",
]

#: The public default of γ, each training record's probability of being in the tuning subset.
DEFAULT_SUBSAMPLE_FRACTION = 0.5
#: The public default tuning share τ (without a proxy): the final run alone is
#: ``(ε·sqrt(1 − τ), δ)``-DP and the tuning phase takes what remains of the composed ``(ε, δ)``.
#: ε² is the unit because RDP curves add: at τ = 0.3 the final run keeps 84% of ε. γ = 0.5 and τ = 0.3
#: did better than γ = 0.25, τ = 0.1 in the pilot (reports/dpsgd-cheap-pilot.md; 3 seeds, weak evidence).
DEFAULT_TUNING_SHARE = 0.3
#: The public grid of τ the proxy simulation chooses from.
SHARE_GRID: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3)
#: How the tuned hyperparameters are carried from the subset to the full data.
CARRY_RULE = (
    "every tuned hyperparameter (learning rate, momentum, ...) is carried unchanged; the trials on the "
    "subset and the final run share the sampling rate q = 1/k and the number of steps (epochs x k), so the "
    "expected batch grows from gamma*m*q to m*q and only the noise multiplier changes (sigma_t -> sigma_f); "
    "the final run's per-step noise relative to a trial's is gamma*sigma_f/sigma_t"
)

#: The amplification is computed at the integer orders 2..64 (the grid's orders above keep the
#: trials' own curve): the phase's optimal order sits far below for any ε this procedure targets.
AMPLIFIED_ORDERS = 64

_ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
_SIGMA_RANGE = (1e-2, 1e4)


def _epsilon(curve: np.ndarray, delta: float) -> float:
    return rdp_curve_epsilon(curve, _ORDERS, delta)[0]


def subsample_phase_rdp(
    *, noise_multiplier: float, sample_rate: float, steps: int, num_trials: int, subsample_fraction: float
) -> np.ndarray:
    r"""RDP curve (on ``TRAINING_RDP_ORDERS``) of the tuning phase for the full data's records.

    The phase is ``M ∘ S_γ``: ONE Poisson subset ``S`` (rate γ) of the training records, then
    ``M`` = ``num_trials`` DP-SGD runs on ``S`` at ``(σ_t, q, steps)`` composed (RDP sums;
    Opacus's ``compute_rdp``), whose outputs the selection post-processes. The subset is drawn
    once, so the amplification (``poisson_subsampled_rdp``, Zhu & Wang 2019) applies to the
    composed curve of ``M``, not to each trial.

    Args:
        noise_multiplier: σ_t of every trial.
        sample_rate: q, the trials' Poisson rate within the subset (public: ``1/k``).
        steps: Steps of each trial.
        num_trials: K, the number of trainings (public; all run).
        subsample_fraction: γ.

    Returns:
        A float64 array, one ε(α) per order of ``TRAINING_RDP_ORDERS``.
    """
    num_trials = check_positive_int(num_trials, "num_trials")

    def composed(orders: np.ndarray) -> np.ndarray:
        one = dp_sgd_rdp(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, orders=orders)
        return num_trials * one

    return poisson_subsampled_rdp(
        composed, sample_rate=subsample_fraction, orders=_ORDERS, max_integer_order=AMPLIFIED_ORDERS
    )


def _smallest_sigma(curve: Callable[[float], np.ndarray], target: float, delta: float, what: str) -> float:
    r"""The smallest σ (to 0.1%) whose curve converts to at most ``target`` at ``delta`` (ε falls with σ)."""
    lo, hi = _SIGMA_RANGE
    if _epsilon(curve(hi), delta) > target:
        raise ValueError(f"{what}: even noise multiplier {hi:g} does not reach epsilon {target:.4g}; raise epsilon.")
    if _epsilon(curve(lo), delta) <= target:
        return lo
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        if _epsilon(curve(mid), delta) <= target:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class SubsamplePlan:
    r"""The public settings and the ε split of subsample tuning (``plan_subsample_tuning``).

    Attributes:
        epsilon, delta: The whole procedure's target for the training records.
        subsample_fraction: γ.
        tuning_share: τ (share of ε², see ``DEFAULT_TUNING_SHARE``).
        num_trials: K, the trainings on the subset.
        sample_rate: q = 1/k of every run (trials and final).
        steps: Steps of every run.
        trial_noise_multiplier: σ_t.
        final_noise_multiplier: σ_f.
        tuning_epsilon: The tuning phase alone at δ (amplified).
        tuning_epsilon_unamplified: The same K trainings without amplification (what the
            subset saves).
        final_epsilon: The final run alone at δ.
        total_epsilon: Both composed (RDP on the ledger's grid), at most ``epsilon``.
        phase_rdp: The tuning phase's RDP curve on ``TRAINING_RDP_ORDERS`` (the ledger's charge).
    """

    epsilon: float
    delta: float
    subsample_fraction: float
    tuning_share: float
    num_trials: int
    sample_rate: float
    steps: int
    trial_noise_multiplier: float
    final_noise_multiplier: float
    tuning_epsilon: float
    tuning_epsilon_unamplified: float
    final_epsilon: float
    total_epsilon: float
    phase_rdp: tuple[float, ...] = field(repr=False)

    def describe(self) -> str:
        r"""The split in words."""
        return (
            f"tuning share tau = {self.tuning_share:g} of epsilon^2: the final run alone is "
            f"(epsilon = {self.final_epsilon:.4g}, delta = {self.delta:.3g})-DP (sigma_f = "
            f"{self.final_noise_multiplier:.4g}); the tuning phase ({self.num_trials} DP-SGD trainings at sigma_t = "
            f"{self.trial_noise_multiplier:.4g} on one Poisson subset, gamma = {self.subsample_fraction:g}) alone "
            f"epsilon = {self.tuning_epsilon:.4g} (without the subset's amplification it would be "
            f"{self.tuning_epsilon_unamplified:.4g}); composed (RDP) epsilon = {self.total_epsilon:.4g}; every run: "
            f"q = {self.sample_rate:.4g}, {self.steps} steps"
        )


@functools.lru_cache(maxsize=64)
def plan_subsample_tuning(
    *,
    epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    num_trials: int,
    subsample_fraction: float,
    tuning_share: float,
) -> SubsamplePlan:
    r"""The noise of the trials and of the final run, from the whole budget and the split.

    The final run's σ_f is the smallest that makes it alone ``(ε·sqrt(1 − τ), δ)``-DP; σ_t is
    then the smallest that keeps the tuning phase (``subsample_phase_rdp``) and the final run
    composed within ``(ε, δ)``, both on the ledger's grid of orders.

    Args:
        epsilon: ε of the whole procedure for the training records.
        delta: δ.
        sample_rate: q of every run.
        steps: Steps of every run.
        num_trials: K.
        subsample_fraction: γ in (0, 1).
        tuning_share: τ in (0, 1).

    Returns:
        The ``SubsamplePlan``.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)
    gamma = check_probability(subsample_fraction, "subsample_fraction")
    share = check_probability(tuning_share, "tuning_share")
    num_trials = check_positive_int(num_trials, "num_trials")
    steps = check_positive_int(steps, "steps")
    rate = check_probability(sample_rate, "sample_rate", allow_one=True)

    def final_curve(sigma: float) -> np.ndarray:
        return dp_sgd_rdp(noise_multiplier=sigma, sample_rate=rate, steps=steps, orders=_ORDERS)

    def phase_curve(sigma: float) -> np.ndarray:
        return subsample_phase_rdp(
            noise_multiplier=sigma, sample_rate=rate, steps=steps, num_trials=num_trials, subsample_fraction=gamma
        )

    final_target = epsilon * math.sqrt(1.0 - share)
    sigma_f = _smallest_sigma(final_curve, final_target, delta, f"the final run (epsilon * sqrt(1 - {share:g}))")
    final = final_curve(sigma_f)
    sigma_t = _smallest_sigma(lambda s: phase_curve(s) + final, epsilon, delta, "the tuning phase")
    phase = phase_curve(sigma_t)
    unamplified = num_trials * dp_sgd_rdp(noise_multiplier=sigma_t, sample_rate=rate, steps=steps, orders=_ORDERS)
    return SubsamplePlan(
        epsilon=epsilon,
        delta=delta,
        subsample_fraction=gamma,
        tuning_share=share,
        num_trials=num_trials,
        sample_rate=rate,
        steps=steps,
        trial_noise_multiplier=sigma_t,
        final_noise_multiplier=sigma_f,
        tuning_epsilon=_epsilon(phase, delta),
        tuning_epsilon_unamplified=_epsilon(unamplified, delta),
        final_epsilon=_epsilon(final, delta),
        total_epsilon=_epsilon(phase + final, delta),
        phase_rdp=tuple(float(v) for v in phase),
    )


@functools.lru_cache(maxsize=64)
def final_only_noise(*, epsilon: float, delta: float, sample_rate: float, steps: int) -> tuple[float, float]:
    r"""``(σ_f, ε of the run)``: the smallest σ making one run ``(ε, δ)``-DP on the ledger's grid (cached:
    a pure function of public settings, asked again by every simulation of ``tune``'s method choice)."""
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    def curve(sigma: float) -> np.ndarray:
        return dp_sgd_rdp(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, orders=_ORDERS)

    sigma = _smallest_sigma(curve, epsilon, delta, "the final run")
    return sigma, _epsilon(curve(sigma), delta)


@dataclass
class CheapTuneResult:
    r"""What cheap tuning releases: the final model, its hyperparameters and the guarantee.

    Attributes:
        hyperparameters: The final run's hyperparameters, natural units.
        model: The final model (trained once on all the training data with DP-SGD).
        method: ``"subsample"`` or ``"proxy"``.
        guarantee: Per protected set, ``{"training records": (ε, δ), "validation users": (ε, δ)
            or None}`` (None: not protected; ``(0, δ)``: nothing of theirs was used).
        split: The ε split and how it was chosen, in words.
        carried: How the hyperparameters were carried to the final run, in words.
        settings: The public settings (σ's, q, steps, γ, the configurations tried, ...).
        ledger: The training ledger all runs were charged to.
        notes: Further statements (e.g. that the tuning used no private data).
    """

    hyperparameters: dict[str, Any]
    model: nn.Module = field(repr=False)
    method: str
    guarantee: dict[str, tuple[float, float] | None]
    split: str
    carried: str
    settings: dict[str, Any] = field(repr=False)
    ledger: PrivacyLedger = field(repr=False)
    notes: tuple[str, ...] = ()

    def guarantee_report(self) -> str:
        r"""What was protected, in plain words, one line per protected set, then the split."""
        lines = []
        for name, value in self.guarantee.items():
            if value is None:
                lines.append(f"cheap tuning ({self.method}): {name}: NOT protected by this procedure")
            else:
                eps, delta = value
                lines.append(
                    f"cheap tuning ({self.method}): (epsilon = {eps:.4g}, delta = {delta:.3g})-DP for the {name}"
                )
        lines.append(f"split: {self.split}")
        lines.append(f"carried to the final run: {self.carried}")
        lines.extend(self.notes)
        return "\n".join(lines)
