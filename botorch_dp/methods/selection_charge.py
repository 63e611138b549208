r"""What a private selection over DP-SGD or AMP runs charges and states: the training ledger's entry (the
privacy-profile ``(ε, δ)`` or the RDP curve), the up-front record of both sides, and the
``(ε, δ)`` statement of each protected set (its training statement's ``details["mechanism"]`` says what the
trials train with: ``training_mechanism``). Used by ``methods.training_runs``; ``tune`` reads which objectives
are AMP's and what they train with here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from botorch_dp.baselines.base import BaselineGuarantee
from botorch_dp.baselines.selection import timing_note, trials_tail
from botorch_dp.privacy.ledger import (
    ApproximateDP,
    PrivacyBudgetExceeded,
    PrivacyLedger,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationMechanism,
)
from botorch_dp.privacy.ledger.events import SELECTION_PART, TrainingEvent, ValidationEvent
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.training.selection_accounting import SelectionAccounting, selection_epsilon

__all__ = [
    "AMP_MECHANISM",
    "DP_SGD_MECHANISM",
    "amp_charge",
    "is_amp_objective",
    "k_description",
    "profile_refused",
    "record_up_front",
    "training_event",
    "training_guarantee",
    "training_mechanism",
    "validation_charge",
    "validation_guarantee",
]


#: What each trial of a selection over whole training runs trains with, as its training statement's
#: ``details["mechanism"]`` names it (``training_guarantee``, ``amp_charge``; ``training_mechanism``).
DP_SGD_MECHANISM = "DP-SGD"
AMP_MECHANISM = "AMP (approximate minima perturbation)"


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


def validation_charge(
    ledger: PrivacyLedger, accounting: str, epsilon: float, delta: float, k_args: dict[str, Any]
) -> dict[str, Any]:
    r"""The Gaussian scores' per-trial ``μ₀`` and how the validation ledger is charged for them.

    ``"rdp"``: ``μ₀`` calibrated by the selection's RDP curve, recorded as that curve (a
    ``ValidationMechanism``). ``"profile"``: ``μ₀`` calibrated by the selection's privacy-profile bound
    (``analysis.selection_profile.per_trial_mu_for_epsilon_pld``, the trial's exact GDP profile), recorded
    as ONE ``ValidationApproximateDP`` ``(epsilon, delta)``, which the ledger admits (with a validation
    budget) only as its validation side's sole entry: refused here (``ValueError`` for ``"profile"``, RDP
    for ``"auto"``) when the ledger would not admit it, before anything is drawn. ``"auto"``: the profile
    where it allows a larger ``μ₀`` (less noise) than RDP and the ledger admits it, else RDP.
    Both ``μ₀`` are computed and stated (the RDP cross-check: RDP's ``ε`` at the profile's ``μ₀``).

    Returns:
        ``{"mu", "event", "curve" (the RDP curve, or None), "accounting", "reason", "rdp_mu",
        "rdp_epsilon" (RDP's ε at the charged μ₀)}``.
    """
    from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon, private_selection_rdp
    from botorch_dp.privacy.analysis.selection_profile import per_trial_mu_for_epsilon_pld
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS

    def curve_at(mu: float) -> list[float]:
        return [private_selection_rdp(a, per_trial_mu=mu, **k_args) for a in TRAINING_RDP_ORDERS]

    rdp_mu = per_trial_mu_for_epsilon(target_epsilon=epsilon, target_delta=delta, orders=TRAINING_RDP_ORDERS, **k_args)

    def rdp(reason: str) -> dict[str, Any]:
        curve = curve_at(rdp_mu)
        return dict(
            mu=rdp_mu, event=None, curve=curve, accounting="rdp", reason=reason, rdp_mu=rdp_mu,
            rdp_epsilon=selection_epsilon(np.asarray(curve), delta),
        )  # fmt: skip

    if accounting == "rdp":
        return rdp("accounting='rdp' was asked for")
    pld_mu = per_trial_mu_for_epsilon_pld(
        target_epsilon=epsilon,
        target_delta=delta,
        mean_trials=k_args["mean_trials"],
        distribution=k_args["distribution"],
        tnb_eta=k_args["tnb_eta"],
        max_trials=k_args.get("binomial_rounds"),
    )
    if accounting == "auto" and pld_mu <= rdp_mu:
        return rdp(f"accounting='auto' uses RDP: its per-trial mu {rdp_mu:.4g} >= the profile's {pld_mu:.4g}")
    rdp_at_pld = selection_epsilon(np.asarray(curve_at(pld_mu)), delta)
    reason = (
        f"the privacy-profile bound allows per-trial mu {pld_mu:.4g} against RDP's {rdp_mu:.4g}; "
        f"RDP at mu {pld_mu:.4g} states epsilon = {rdp_at_pld:.4g} (the cross-check)"
    )
    event = ValidationApproximateDP("(checked)", epsilon, delta)
    refused = None
    if ledger.validation.run_ids():
        refused = "the ledger's validation side already holds releases (an (epsilon, delta) entry must be its only one)"
    else:
        try:
            ledger.validation.check_admits({SELECTION_PART: event}, "the selection's (epsilon, delta) charge")
        except PrivacyBudgetExceeded as err:
            refused = str(err)
    if refused is not None:
        if accounting == "profile":
            raise ValueError(f"accounting='profile' on the validation side: {refused}. Use accounting='rdp' or 'auto'.")
        return rdp(f"accounting='auto' uses RDP on the validation side: {refused}")
    return dict(
        mu=pld_mu, event=event, curve=None, accounting="profile", reason=reason, rdp_mu=rdp_mu, rdp_epsilon=rdp_at_pld
    )


def record_up_front(
    ledger: PrivacyLedger,
    run_id: str,
    guarantee: dict[str, BaselineGuarantee],
    training: TrainingEvent,
    validation_charge: dict[str, Any] | None,
) -> None:
    r"""Admit both sides' charges (both checked before either is recorded), then record them: the
    validation side's as its RDP curve or as one ``ValidationApproximateDP`` (``validation_charge``)."""
    with ledger.charge_training({run_id: training}) as training_meter:
        if validation_charge is None:
            training_meter.record(run_id)
            return
        g = guarantee["validation"]
        validation: ValidationEvent
        if validation_charge["event"] is not None:
            validation = ValidationApproximateDP(g.description, g.epsilon, g.delta)
        else:
            validation = ValidationMechanism(g.description, tuple(validation_charge["curve"]))
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
    noise_multiplier_range: tuple[float, float] | None = None,
) -> BaselineGuarantee:
    r"""The training records' statement of a selection charged as ``charge`` over the run ``shapes``;
    ``noise_multiplier_range``: the ``(least, largest)`` ``σ`` of a trial where the space searches it
    (the charge is at the least), ``None`` where every trial runs at ``charge.noise_multiplier``."""
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
    if noise_multiplier_range is None:
        noise = f"noise_multiplier={sigma:.6g}"
    else:
        noise = (
            f"noise_multiplier searched in [{noise_multiplier_range[0]:.6g}, {noise_multiplier_range[1]:.6g}] "
            f"(charged at its least value, {sigma:.6g}, whose curve bounds every trial's)"
        )
    description = (
        f"private selection over E[K] = {mean_trials:g} {DP_SGD_MECHANISM} training runs (Papernot & Steinke; K ~ "
        f"{k_description(k_args)}, hidden), each run with {noise}, sample_rate <= {rate:.6g}, "
        f"steps <= {steps}; {accounted} ({charge.reason})"
    )
    details = {
        "protected": "training records (add/remove one record)",
        "mechanism": DP_SGD_MECHANISM,
        "distribution": distribution,
        "binomial_rounds": k_args.get("binomial_rounds"),
        "mean_trials": float(mean_trials),
        "noise_multiplier": sigma,
        "noise_multiplier_range": None if noise_multiplier_range is None else list(noise_multiplier_range),
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
    charge: dict[str, Any],
    delta: float,
    epsilon: float,
    clip: float,
    num_users: int,
    mechanism: GaussianScoreMechanism,
    score: str,
    k_args: dict[str, Any],
    timing: str,
) -> BaselineGuarantee:
    r"""The validation users' statement: the profile's ``(epsilon, delta)`` as charged, or the RDP
    curve's conversion (``charge``: ``validation_charge``'s output)."""
    mu = charge["mu"]
    if charge["accounting"] == "profile":
        accounted = (
            "accounted by its privacy-profile bound (Koskela, Redberg & Wang; the trial's exact GDP profile), "
            f"charged as one (epsilon, delta): {charge['reason']}"
        )
    else:
        accounted = f"accounted in RDP ({charge['reason']})"
    description = (
        f"private selection over E[K] = {k_args['mean_trials']:g} trials (Papernot & Steinke; K ~ "
        f"{k_description(k_args)}, hidden), each scored by a {mu:.4g}-GDP Gaussian of the [0, {clip:g}]-clipped "
        f"mean validation {score}; {accounted}"
    )
    details = {
        "protected": "validation users (replace one user)",
        "per_trial_mu": mu,
        "loss_clip": clip,
        "noise_std": mechanism.noise_std(num_users),
        "accounting": charge["accounting"],
        "accounting_reason": charge["reason"],
        "rdp_per_trial_mu": charge["rdp_mu"],
        "rdp_epsilon": charge["rdp_epsilon"],
    }
    if charge["accounting"] != "profile":
        epsilon = selection_epsilon(np.asarray(charge["curve"]), delta)
    return BaselineGuarantee(epsilon, delta, None, f"{description}. {timing}", details)


def is_amp_objective(objective: Any) -> bool:
    r"""Whether ``objective`` trains its selection trials with AMP (``problems.AMPTuningObjective``: it plans the
    selection's per-trial budget itself, ``selection_budget``, and trains a trial under a cover, ``train_covered``)."""
    return callable(getattr(objective, "selection_budget", None)) and callable(
        getattr(objective, "train_covered", None)
    )


def training_mechanism(objective: Any) -> str:
    r"""What ``objective`` trains each selection trial with (``AMP_MECHANISM`` for an AMP objective, else
    ``DP_SGD_MECHANISM``), as the training statement's ``details["mechanism"]`` will name it."""
    return AMP_MECHANISM if is_amp_objective(objective) else DP_SGD_MECHANISM


def amp_charge(
    objective: Any, epsilon: float, delta: float, k_args: dict[str, Any], accounting: str, max_trials: int | None
) -> tuple[BaselineGuarantee, TrainingEvent, tuple]:
    r"""The training side of a private selection over AMP trials, known before anything is charged: the per-trial
    reference of ``plan_amp_selection`` (``objective.selection_budget``; every trial's ``σ`` puts its curve below
    it), the selection's RDP curve of that reference (``problems.run_budgets.selection_curve``, P&S Thm. 2 or 6)
    as the ledger's ``TrainingMechanism``, its statement, and the cover's arguments (reference curve, reference σ).
    ``accounting="profile"`` and ``distribution="binomial"`` are refused (``ValueError`` naming them): the AMP
    selection is planned and charged in RDP over the truncated negative binomial or Poisson ``K`` only."""
    from botorch_dp.problems.run_budgets import selection_curve

    if accounting == "profile":
        raise ValueError(
            "accounting='profile' with an AMP objective: a selection over AMP trials is charged at its RDP curve "
            "(plan_amp_selection); use accounting='rdp' or 'auto'."
        )
    distribution = k_args["distribution"]
    if distribution not in ("truncated_negative_binomial", "poisson"):
        raise ValueError(
            f"distribution={distribution!r} with an AMP objective: plan_amp_selection plans the truncated negative "
            "binomial (tune's plan_options={'distribution': 'geometric'}, the default) or 'poisson' only."
        )
    mean_trials, eta = k_args["mean_trials"], k_args.get("tnb_eta", 1.0)
    budget = objective.selection_budget(epsilon, delta, mean_trials=mean_trials, distribution=distribution, tnb_eta=eta)
    curve = selection_curve(budget.rdp, mean_trials=mean_trials, distribution=distribution, tnb_eta=eta)
    charged = selection_epsilon(curve, delta)
    timing = timing_note(max_trials, per_trial="training run", **k_args)
    description = (
        f"private selection over E[K] = {mean_trials:g} AMP training runs (Papernot & Steinke; K ~ "
        f"{k_description(k_args)}, hidden), each run's RDP curve below one reference AMP run (sigma = "
        f"{budget.sigma:.6g}, lambda = {budget.lam:.6g}, C = {budget.clip:g}, tau = {budget.tau:g}, sigma_out = "
        f"{budget.sigma_out:g}; plan_amp_selection); accounted in RDP (TRAINING_RDP_ORDERS)"
    )
    details = {
        "protected": "training records (add/remove one record)",
        "distribution": distribution,
        "mean_trials": float(mean_trials),
        "mechanism": AMP_MECHANISM,
        "reference_run": dict(budget.privacy_parameters),
        "accounting": "rdp",
        "accountant": "rdp (TRAINING_RDP_ORDERS)",
        "rdp_epsilon": charged,
        "max_trials": max_trials,
        "p_more_than_max_trials": trials_tail(max_trials, **k_args),
        "timing": timing,
    }
    guarantee = BaselineGuarantee(charged, delta, None, f"{description}. {timing}", details)
    event = TrainingMechanism(guarantee.description, tuple(float(v) for v in curve))
    return guarantee, event, (tuple(float(v) for v in budget.rdp_values()), budget.sigma)
