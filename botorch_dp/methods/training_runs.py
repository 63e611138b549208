r"""Private selection over whole DP-SGD training runs, with the training data protected.

``select_training_runs`` is Papernot & Steinke's private random search (ICLR 2022) with one
DP-SGD training run per trial: ``K`` random trials (``K`` truncated negative binomial, Poisson, or
binomial over ``m`` public rounds as in Koskela, Redberg & Wang, ICML 2024), each drawing
hyperparameters from a public sampler and training one model with
Opacus DP-SGD; only the best trial's hyperparameters, trained model and score are released.
The WHOLE procedure's charge (``training.selection_accounting``: its privacy-profile bound as one
``(ε, δ)``, where that is tighter, or its Rényi-DP curve) is recorded ONCE on
the training ledger before the first trial (and, when the validation users are protected
too, the scores' selection curve on the validation ledger in the same up-front charge); the
trials themselves record nothing (``TorchModelTuningObjective.train_covered`` under a
``TrainingCover``), so the ledger never counts ``K``. The noise multiplier of every trial is
calibrated so that the selection meets the target ``(ε, δ)`` on the training records; where the
space searches ``noise_multiplier``, each trial trains at its own ``σ`` and the selection is charged
at the space's least ``σ`` (whose curve bounds every trial's), which must meet the target.

``K``, the losing trials and their scores stay hidden (``baselines.selection``'s guards: one
error type, warnings dropped, one progress bar, ``max_trials`` padding); NON-PRIVATE
diagnostics only with ``non_private_trials=True``.
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from botorch_dp.baselines.base import BaselineGuarantee
from botorch_dp.baselines.selection import (
    check_max_trials,
    hidden_trials,
    padded_trials,
    selection_progress,
    timing_note,
)
from botorch_dp.methods.selection_charge import (
    amp_charge,
    is_amp_objective,
    profile_refused,
    record_up_front,
    training_event,
    training_guarantee,
    validation_charge,
    validation_guarantee,
)
from botorch_dp.privacy.analysis.private_selection import (
    ALL_DISTRIBUTIONS,
    sample_num_trials,
)
from botorch_dp.privacy.analysis.private_selection_trials import binomial_probability
from botorch_dp.privacy.checks import check_choice, check_delta, check_greater, check_positive
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import noise_generator
from botorch_dp.training.cover import TrainingCover
from botorch_dp.training.selection_accounting import (
    ACCOUNTINGS,
    choose_selection_accounting,
    selection_accounting_at,
    trial_rdp_curve,
)
from botorch_dp.utils import child_seeds

__all__ = ["PROTECT", "NonPrivateTrainingTrials", "TrainingSelectionResult", "select_training_runs"]

#: What a selection over training runs protects: the training records, or those and the validation users.
PROTECT: tuple[str, ...] = ("training", "both")
_SHORT_NAMES = {"tnb": "truncated_negative_binomial"}

Sampler = Callable[[torch.Generator], Mapping[str, Any]]
"""``generator -> {name: natural value}``: a public distribution over the space's points."""


@dataclass(frozen=True, eq=False, repr=False)
class TrainingSelectionResult:
    r"""What a private selection over training runs releases: the winner only.

    Attributes:
        hyperparameters: The winning trial's ``{name: natural value}`` (None: no trial, Poisson or binomial ``K = 0``).
        model: Its trained model (the released DP-SGD run; None when ``K = 0``).
        released_score: Its score (noisy with ``protect="both"``; the plain validation score,
            which protects no validation user, with ``protect="training"``; None when ``K = 0``).
        guarantee: Protected set (``"training"``, ``"validation"``) ↦ its ``(ε, δ)`` statement.
        not_protected: The sets the release does not protect, each with why.
    """

    hyperparameters: dict[str, Any] | None
    model: Any
    released_score: float | None
    guarantee: dict[str, BaselineGuarantee]
    not_protected: dict[str, str] = field(default_factory=dict)

    @property
    def is_private(self) -> bool:
        return True

    @property
    def guarantees(self) -> dict[str, tuple[float, float] | None]:
        r"""``{protected set: (ε, δ) or None}`` over ``("validation", "training")`` (as ``MethodRun.guarantees``)."""
        return {
            name: (self.guarantee[name].epsilon, self.guarantee[name].delta) if name in self.guarantee else None
            for name in ("validation", "training")
        }

    def to_json(self) -> dict[str, Any]:
        r"""The public release as plain values (the model's weights are not included)."""
        return {
            "hyperparameters": self.hyperparameters,
            "released_score": self.released_score,
            "guarantee": {
                name: {"epsilon": g.epsilon, "delta": g.delta, "description": g.description, "details": g.details}
                for name, g in self.guarantee.items()
            },
            "not_protected": dict(self.not_protected),
        }

    def __repr__(self) -> str:
        guarantees = ", ".join(f"{k}: (ε={g.epsilon:.4g}, δ={g.delta:.3g})" for k, g in self.guarantee.items())
        return (
            f"TrainingSelectionResult(hyperparameters={self.hyperparameters!r}, "
            f"released_score={self.released_score!r}, guarantee={{{guarantees}}})"
        )

    __str__ = __repr__


@dataclass(frozen=True, eq=False, repr=False)
class NonPrivateTrainingTrials(TrainingSelectionResult):
    r"""NON-PRIVATE: every trial of a selection (``non_private_trials=True`` only; publish ``release``).

    Attributes:
        num_trials: ``K`` (padding trials excluded).
        trials: One ``{"hyperparameters", "score", "plain_score"}`` per trial, in order: the score
            the selection compared and the un-noised mean validation score.
    """

    num_trials: int = 0
    trials: tuple[dict[str, Any], ...] = ()

    NON_PRIVATE = True

    @property
    def release(self) -> TrainingSelectionResult:
        r"""The winner only: what may be published."""
        return TrainingSelectionResult(
            self.hyperparameters, self.model, self.released_score, self.guarantee, self.not_protected
        )

    def __repr__(self) -> str:
        return (
            f"NonPrivateTrainingTrials(NON-PRIVATE: the {self.num_trials} trials of a private selection; "
            "publishing any of them, or their number, voids its guarantee; publish .release only)"
        )

    __str__ = __repr__


def uniform_sampler(space: Any) -> Sampler:
    r"""The default sampler: a uniform point of the unit cube mapped by ``space`` (log-uniform on
    log-scaled ranges), and a uniform choice of every categorical not fixed."""

    def sample(generator: torch.Generator) -> dict[str, Any]:
        theta = torch.rand(space.dim, generator=generator, dtype=torch.float64)
        choice = {}
        for h in space.categoricals:
            if h.name not in space.fixed:
                choice[h.name] = h.choices[int(torch.randint(len(h.choices), (1,), generator=generator))]
        return dict(space.to_natural(theta, choice))

    return sample


def select_training_runs(
    objective: Any,
    space: Any = None,
    *,
    epsilon: float,
    delta: float,
    mean_trials: float,
    protect: str = "training",
    distribution: str = "tnb",
    tnb_eta: float = 1.0,
    sampler: Sampler | None = None,
    score: str = "loss",
    loss_clip: float | None = None,
    validation_epsilon: float | None = None,
    max_trials: int | None = None,
    seed: int | None = None,
    ledger: PrivacyLedger | None = None,
    progress: bool = False,
    non_private_trials: bool = False,
    accounting: str = "auto",
    binomial_rounds: int | None = None,
) -> TrainingSelectionResult:
    r"""Release the best of ``K`` DP-SGD training runs at random hyperparameters (Papernot & Steinke).

    Before anything trains: every argument is checked; the noise multiplier ``σ`` of every trial
    is calibrated so that the selection meets ``epsilon`` at ``delta`` (within 0.5% below) by the
    ``accounting`` chosen (``training.selection_accounting.choose_selection_accounting``):
    ``"rdp"``: the selection's RDP curve (P&S Thm. 2 for the truncated negative binomial, Thm. 6
    for Poisson) of the reference trial curve — the pointwise maximum of Opacus's
    ``compute_rdp`` over every run shape the space allows (``objective.possible_run_shapes``) —
    converted on the ledger's grid, recorded once as a ``TrainingMechanism``; ``"profile"``: the
    selection's privacy-profile bound (``analysis.selection_profile``) of the reference trial
    profile (dp_accounting's PLD, maximum over the run shapes), recorded once as an
    ``ApproximateDP`` ``(ε, δ)`` which the ledger composes with other entries by basic
    composition (it must be the ledger's first training entry) — used only where its ``ε`` at
    that ``σ`` is at most the RDP bound's (the cross-check; else RDP is used and said);
    ``"auto"`` (default): the profile where it needs less noise and the ledger's training side is
    still empty, else RDP. The charge is "private selection over E[K] = … trials"; with
    ``protect="both"`` the scores' selection curve (each trial's score a ``μ₀``-GDP Gaussian of
    the clipped mean validation score, ``μ₀`` calibrated to
    ``validation_epsilon``) is recorded on the validation side in the same charge. Then ``K``
    is drawn; trial ``j`` draws hyperparameters from ``sampler``, trains one model with
    ``objective.train_covered`` (no record of its own) and is scored on the validation users;
    the lowest score wins (ties: the earlier trial, which by the trials' exchangeability is a
    uniform choice among the tied, i.e. a total order refined by an independent random label).

    Args:
        objective: A ``TorchModelTuningObjective`` built with ``dp_sgd=DPSGDConfig(...)``. Its
            noise multiplier (or target) is NOT used: the selection calibrates ``σ`` itself unless
            the space searches ``noise_multiplier``; its clip norm is used unless the space searches
            ``max_grad_norm``.
        space: The objective's ``SearchSpace`` (default ``objective.space``; another is refused).
            ``epochs``, ``batch_size``, ``max_grad_norm`` and ``noise_multiplier`` may be searched
            (``Integer`` or ``Categorical`` for the first two). A searched ``noise_multiplier`` (a
            ``Hyperparameter``, ``Integer`` or ``Categorical`` in natural units, ``σ > 0``) is not
            calibrated: each trial trains at its own ``σ``, and the selection is charged at the
            space's least ``σ`` (its curve bounds every trial's: more noise is post-processing),
            refused (``ValueError`` naming ``noise_multiplier`` and the least ``σ`` the budget
            allows) where that charge exceeds ``epsilon``. The guarantee then states the charged
            ``ε`` (at most ``epsilon``) and ``details["noise_multiplier_range"]``.
        epsilon: ``ε`` of the whole selection on the training records.
        delta: ``δ`` of every statement.
        mean_trials: ``E[K] > 1``.
        protect: ``"training"`` (the validation users are public: the score is their plain mean
            score) or ``"both"`` (the scores are noised and charged to the validation ledger).
        distribution: ``"tnb"`` (truncated negative binomial), ``"poisson"`` or ``"binomial"``
            (``K ~ Binomial(binomial_rounds, mean_trials/binomial_rounds)``, Koskela, Redberg & Wang: at
            most ``binomial_rounds`` trials, so ``max_trials=binomial_rounds`` hides ``K`` from the wall
            time entirely; ``K = 0`` releases no trial, as for Poisson).
        tnb_eta: ``η`` of the truncated negative binomial (1: geometric).
        sampler: ``generator -> {name: natural value}`` (a public distribution over the space;
            default uniform on the unit cube, log-uniform on log ranges). Its generator is privacy
            randomness (the trial points would reveal the winner's index).
        score: ``"loss"`` (mean capped validation loss) or ``"error"`` (classification error).
        loss_clip: ``C`` of the Gaussian score with ``protect="both"`` (default 1 for
            ``"error"``, the objective's ``loss_cap`` for ``"loss"``).
        validation_epsilon: ``ε`` of the validation users (``protect="both"``; default ``epsilon``).
        max_trials: Run ``max(K, max_trials)`` trials and discard those after the ``K``-th, so the
            run's length does not reveal ``K`` (unless ``K > max_trials``); costs compute.
        seed: ``None`` (default): ``K``, the points and all noise (DP-SGD's included) from OS
            entropy. An integer: reproducible (tests), with a ``PrivacyWarning``; the guarantee
            assumes it stays secret. The objective's own ``noise_seed`` is not used.
        ledger: The objective's ledger (default); another ledger is refused.
        progress: One progress bar for the whole selection (no count).
        non_private_trials: Return the NON-PRIVATE ``NonPrivateTrainingTrials``.
        accounting: ``"auto"``, ``"profile"`` (the selection charged at its privacy-profile bound;
            refused when the ledger already holds training entries) or ``"rdp"``. The guarantee's
            ``details["accounting"]`` and description say which was used and why.
        binomial_rounds: ``m``, the public number of rounds of ``distribution="binomial"`` (required
            for it, refused otherwise).

    Returns:
        The ``TrainingSelectionResult`` (winner only; nothing reveals ``K``).
    """
    settings = _checked_settings(
        objective, space, protect, distribution, mean_trials, score, loss_clip, ledger, sampler, max_trials,
        binomial_rounds,
    )  # fmt: skip
    ledger, sampler, distribution, loss_clip, max_trials = (
        settings[k] for k in ("ledger", "sampler", "distribution", "clip", "max_trials")
    )
    epsilon = check_positive(epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta, "delta")
    validation_epsilon = epsilon if validation_epsilon is None else validation_epsilon
    validation_epsilon = check_positive(validation_epsilon, "validation_epsilon", allow_inf=False)
    k_args: dict[str, Any] = dict(mean_trials=mean_trials, distribution=distribution, tnb_eta=tnb_eta)
    if distribution == "binomial":
        k_args["binomial_rounds"] = binomial_rounds
    accounting = settings["accounting"] = check_choice(accounting, "accounting", ACCOUNTINGS)

    if is_amp_objective(objective):  # AMP trials: the reference of plan_amp_selection, charged in RDP
        return _select(objective, settings, epsilon, delta, validation_epsilon, k_args, protect, score, max_trials,
                       seed, progress, non_private_trials, amp_charge(objective, epsilon, delta, k_args, accounting,
                                                                      max_trials))  # fmt: skip
    shapes = objective.possible_run_shapes()
    # a duck-typed objective (integrations.optuna_training) that does not search σ may lack the method
    searched = getattr(objective, "noise_multiplier_range", lambda: None)()
    charge_args: dict[str, Any] = dict(
        accounting=accounting,
        target_epsilon=epsilon,
        target_delta=delta,
        shapes=shapes,
        profile_refused=profile_refused(ledger, delta),
        **k_args,
    )
    if searched is None:  # one σ for every trial, calibrated to the target
        charge = choose_selection_accounting(**charge_args)
    else:  # each trial at its own σ >= the space's least, whose curve bounds them all (refused above the target)
        charge = selection_accounting_at(noise_multiplier=searched[0], **charge_args)
    sigma = charge.noise_multiplier
    reference = trial_rdp_curve(sigma, shapes)
    timing = timing_note(max_trials, per_trial="training run", **k_args)
    training = training_guarantee(charge, delta, shapes, k_args, max_trials, timing, searched)
    event = training_event(charge, training)
    cover_args = (tuple(reference.tolist()), sigma, tuple(shapes) if charge.accounting == "profile" else ())
    return _select(objective, settings, epsilon, delta, validation_epsilon, k_args, protect, score, max_trials, seed,
                   progress, non_private_trials, (training, event, cover_args))  # fmt: skip


def _select(
    objective: Any,
    settings: dict[str, Any],
    epsilon: float,
    delta: float,
    validation_epsilon: float,
    k_args: dict[str, Any],
    protect: str,
    score: str,
    max_trials: int | None,
    seed: int | None,
    progress: bool,
    non_private_trials: bool,
    training_charge: tuple[BaselineGuarantee, Any, tuple],
) -> TrainingSelectionResult:
    r"""The selection itself, once the training side's statement, ledger event and cover arguments
    (``training_charge``) are known: the validation side, the up-front record, ``K``, the trials."""
    ledger, sampler, loss_clip = settings["ledger"], settings["sampler"], settings["clip"]
    accounting = settings["accounting"]
    timing = timing_note(max_trials, per_trial="training run", **k_args)
    training, event, cover_args = training_charge
    guarantee = {"training": training}
    not_protected: dict[str, str] = {}
    score_generator = noise_generator(seed, stream=1)  # warns (PrivacyWarning) for an explicit seed
    mechanism, scores_charge = None, None
    if protect == "both":  # the scores' μ₀ and charge, by the same ``accounting`` (RDP cross-check stated)
        scores_charge = validation_charge(ledger, accounting, validation_epsilon, delta, k_args)
        mechanism = GaussianScoreMechanism(
            loss_clip=loss_clip, per_trial_mu=scores_charge["mu"], generator=score_generator
        )
        guarantee["validation"] = validation_guarantee(
            scores_charge, delta, validation_epsilon, loss_clip, objective.num_users, mechanism, score, k_args, timing
        )
    else:
        not_protected["validation"] = (
            f"the released score is the validation users' plain mean {score} (they are treated as public)"
        )

    # the whole procedure's curves, admitted and recorded before K is drawn
    run_id = f"{'amp' if is_amp_objective(objective) else 'dp-sgd'}-selection-{uuid.uuid4().hex}"
    cover = TrainingCover(ledger, run_id, *cover_args)
    record_up_front(ledger, run_id, guarantee, event, scores_charge)
    for g in guarantee.values():
        g.details["ledger_run_id"] = run_id

    rng, point_gen, trial_seed = _randomness(seed)
    K = sample_num_trials(rng=rng, **k_args)
    best: tuple[float, dict[str, Any], Any] | None = None
    trials = []
    try:
        with selection_progress(progress), hidden_trials():
            for j in range(padded_trials(K, max_trials)):
                hyperparameters = dict(sampler(point_gen))
                model = objective.train_covered(hyperparameters, cover, noise_seed=trial_seed(j))
                per_user = objective.per_user_scores(model, score).to(torch.float64)
                plain = float(per_user.mean())
                if mechanism is None:
                    value = plain if math.isfinite(plain) else math.inf
                else:  # a non-finite per-user score counts C: each term stays in [0, C]
                    clipped = torch.where(torch.isfinite(per_user), per_user, torch.full_like(per_user, loss_clip))
                    value = float(mechanism.release(clipped.reshape(1, -1)).scores[0])
                if j >= K:
                    continue  # a padding trial: run and discarded
                if non_private_trials:
                    trials.append({"hyperparameters": hyperparameters, "score": value, "plain_score": plain})
                if best is None or value < best[0]:
                    best = (value, hyperparameters, model)
    finally:
        cover.close()
    release: dict[str, Any] = dict(hyperparameters=None, model=None, released_score=None)  # K = 0 (Poisson, binomial)
    if best is not None:
        release = dict(hyperparameters=best[1], model=best[2], released_score=best[0])
    if non_private_trials:
        return NonPrivateTrainingTrials(
            **release, guarantee=guarantee, not_protected=not_protected, num_trials=K, trials=tuple(trials)
        )
    return TrainingSelectionResult(**release, guarantee=guarantee, not_protected=not_protected)


def _checked_settings(
    objective: Any,
    space: Any,
    protect: str,
    distribution: str,
    mean_trials: float,
    score: str,
    loss_clip: float | None,
    ledger: PrivacyLedger | None,
    sampler: Sampler | None,
    max_trials: int | None,
    binomial_rounds: int | None = None,
) -> dict[str, Any]:
    r"""The arguments of ``select_training_runs`` checked (``ValueError`` naming each) before anything runs."""
    from botorch_dp.objectives.charged import same_ledger
    from botorch_dp.objectives.covered import SCORES

    amp = is_amp_objective(objective)
    if not amp and (not callable(getattr(objective, "train_covered", None)) or objective.planned_run() is None):
        raise ValueError(
            "objective must be a TorchModelTuningObjective built with dp_sgd=DPSGDConfig(...) or an "
            f"AMPTuningObjective (a DP-trained objective), got {type(objective).__name__}"
            + (" without DP-SGD" if callable(getattr(objective, "planned_run", None)) else "")
            + "."
        )
    if space is not None and (space is not objective.space and space.describe() != objective.space.describe()):
        raise ValueError("space differs from objective.space: build the objective with this space.")
    if protect not in PROTECT:
        raise ValueError(
            f"protect must be one of {PROTECT}, got {protect!r} (a selection that protects only the validation "
            "users needs no DP-SGD: use baselines.private_random_search)."
        )
    distribution = check_choice(_SHORT_NAMES.get(distribution, distribution), "distribution", ALL_DISTRIBUTIONS)
    check_greater(mean_trials, "mean_trials", 1.0)
    if distribution == "binomial":
        binomial_probability(mean_trials=mean_trials, binomial_rounds=binomial_rounds)
    elif binomial_rounds is not None:
        raise ValueError(
            f"binomial_rounds={binomial_rounds!r} is the number of rounds of distribution='binomial'; "
            f"leave it out with distribution={distribution!r}."
        )
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}.")
    if protect == "both":
        loss_clip = (1.0 if score == "error" else objective.loss_cap) if loss_clip is None else loss_clip
        if loss_clip is None:
            raise ValueError(
                "loss_clip=None: protect='both' with score='loss' needs a clip C (the objective has none)."
            )
        loss_clip = check_positive(loss_clip, "loss_clip", allow_inf=False)
    objective_ledger = objective.ledger
    if ledger is not None and not same_ledger(ledger, objective_ledger):
        raise ValueError("ledger: the selection charges the objective's own ledger (leave ledger out).")
    if sampler is not None and not callable(sampler):
        raise ValueError(f"sampler must be a callable generator -> hyperparameters, got {sampler!r}.")
    if not amp:
        objective.possible_run_shapes()  # refuses a training hyperparameter it cannot bound
    return {
        "ledger": objective_ledger,
        "sampler": uniform_sampler(objective.space) if sampler is None else sampler,
        "distribution": distribution,
        "clip": loss_clip,
        "max_trials": check_max_trials(max_trials),
    }


def _randomness(seed: int | None) -> tuple[np.random.Generator, torch.Generator, Callable[[int], int | None]]:
    r"""The draw of ``K``, the trial points' generator and each trial's DP-SGD seed: OS entropy
    without a seed, else child streams of it (the score noise's generator is ``noise_generator``)."""
    if seed is None:
        return (
            np.random.default_rng(secrets.randbits(128)),
            torch.Generator().manual_seed(secrets.randbits(63)),
            lambda j: None,
        )
    k_seed, point_seed, noise_seed = child_seeds(int(seed), 3)
    return (
        np.random.default_rng(k_seed),
        torch.Generator().manual_seed(point_seed),
        lambda j: child_seeds([noise_seed, j], 1)[0],
    )
