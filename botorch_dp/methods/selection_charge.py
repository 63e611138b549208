r"""What a private selection over DP-SGD runs charges and states: the training ledger's entry (the
privacy-profile ``(ε, δ)`` or the RDP curve), the up-front record of both sides, and the
``(ε, δ)`` statement of each protected set. Used by ``methods.training_runs`` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from botorch_dp.baselines.base import BaselineGuarantee
from botorch_dp.baselines.selection import trials_tail
from botorch_dp.privacy.ledger import ApproximateDP, PrivacyLedger, TrainingMechanism, ValidationMechanism
from botorch_dp.privacy.ledger.events import SELECTION_PART, TrainingEvent
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.training.selection_accounting import SelectionAccounting, selection_epsilon

__all__ = [
    "k_description",
    "profile_refused",
    "record_up_front",
    "training_event",
    "training_guarantee",
    "validation_guarantee",
]


def k_description(k_args: dict[str, Any]) -> str:
    r"""``K``'s distribution in words: its name, and for the binomial its public rounds ``m`` and ``γ``."""
    rounds = k_args.get("binomial_rounds")
    if k_args["distribution"] == "binomial" and rounds is not None:
        return f"binomial(m = {rounds}, gamma = {k_args['mean_trials'] / rounds:.4g})"
    return str(k_args["distribution"])


def profile_refused(ledger: PrivacyLedger, delta: float) -> str | None:
    r"""Why ``ledger`` cannot take the selection as one ``(ε, δ)`` entry (None: it can)."""
    if ledger.training.run_ids():
        return (
            "the ledger already holds training entries, and it admits an (epsilon, delta) entry only as its "
            "first training entry (privacy.ledger.filters)."
        )
    if ledger.training_delta is not None and delta > ledger.training_delta:
        return f"delta={delta:g} exceeds the ledger's training_delta={ledger.training_delta:g}."
    return None


def training_event(charge: SelectionAccounting, guarantee: BaselineGuarantee) -> TrainingEvent:
    r"""What the training ledger records: the profile's ``(ε, δ)`` or the RDP curve."""
    if charge.accounting == "profile":
        return ApproximateDP(guarantee.description, charge.epsilon, guarantee.delta)
    return TrainingMechanism(guarantee.description, tuple(float(v) for v in charge.rdp_curve))


def record_up_front(
    ledger: PrivacyLedger,
    run_id: str,
    guarantee: dict[str, BaselineGuarantee],
    training: TrainingEvent,
    validation_curve: list[float] | None,
) -> None:
    r"""Admit both sides' charges (both checked before either is recorded), then record them."""
    with ledger.charge_training({run_id: training}) as training_meter:
        if validation_curve is None:
            training_meter.record(run_id)
            return
        validation = ValidationMechanism(guarantee["validation"].description, tuple(validation_curve))
        with ledger.charge({SELECTION_PART: validation}, run_id=run_id, new_run=True) as meter:
            training_meter.record(run_id)
            meter.record(SELECTION_PART, validation)


def training_guarantee(
    charge: SelectionAccounting,
    delta: float,
    shapes: list[tuple[float, int]],
    k_args: dict[str, Any],
    max_trials: int | None,
    timing: str,
) -> BaselineGuarantee:
    distribution, mean_trials, sigma = k_args["distribution"], k_args["mean_trials"], charge.noise_multiplier
    rate, steps = max(q for q, _ in shapes), max(t for _, t in shapes)
    if charge.accounting == "profile":
        accounted = (
            "accounted by its privacy-profile bound (Koskela, Redberg & Wang's framework; the maximum of the "
            f"runs' PLD profiles over the space's {len(shapes)} run shape(s)), charged as one (epsilon, delta); "
            f"the RDP bound at the same noise states epsilon = {charge.rdp_epsilon:.4g}"
        )
    else:
        accounted = (
            f"accounted in RDP (the pointwise maximum of compute_rdp over the space's {len(shapes)} run shape(s))"
        )
    description = (
        f"private selection over E[K] = {mean_trials:g} DP-SGD training runs (Papernot & Steinke; K ~ "
        f"{k_description(k_args)}, hidden), each run with noise_multiplier={sigma:.6g}, sample_rate <= {rate:.6g}, "
        f"steps <= {steps}; {accounted} ({charge.reason})"
    )
    details = {
        "protected": "training records (add/remove one record)",
        "distribution": distribution,
        "binomial_rounds": k_args.get("binomial_rounds"),
        "mean_trials": float(mean_trials),
        "noise_multiplier": sigma,
        "run_shapes": [[q, t] for q, t in shapes],
        "accounting": charge.accounting,
        "accounting_reason": charge.reason,
        "accountant": (
            "privacy profile (dp_accounting PLD; analysis.selection_profile)"
            if charge.accounting == "profile"
            else "rdp (TRAINING_RDP_ORDERS)"
        ),
        "rdp_epsilon": charge.rdp_epsilon,
        "rdp_noise_multiplier": charge.rdp_noise_multiplier,
        "max_trials": max_trials,
        "p_more_than_max_trials": trials_tail(max_trials, **k_args),
        "timing": timing,
    }
    return BaselineGuarantee(charge.epsilon, delta, None, f"{description}. {timing}", details)


def validation_guarantee(
    curve: list[float],
    delta: float,
    mu: float,
    clip: float,
    num_users: int,
    mechanism: GaussianScoreMechanism,
    score: str,
    k_args: dict[str, Any],
    timing: str,
) -> BaselineGuarantee:
    description = (
        f"private selection over E[K] = {k_args['mean_trials']:g} trials (Papernot & Steinke; K ~ "
        f"{k_description(k_args)}, hidden), each scored by a {mu:.4g}-GDP Gaussian of the [0, {clip:g}]-clipped "
        f"mean validation {score}"
    )
    details = {
        "protected": "validation users (replace one user)",
        "per_trial_mu": mu,
        "loss_clip": clip,
        "noise_std": mechanism.noise_std(num_users),
    }
    epsilon = selection_epsilon(np.asarray(curve), delta)
    return BaselineGuarantee(epsilon, delta, None, f"{description}. {timing}", details)
