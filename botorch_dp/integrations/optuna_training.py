r"""Optuna objectives that train with DP-SGD inside the trial, charged as ``tune`` charges a torch model.

A study built with ``dp_sgd=`` and ``training_data=`` hands ``tune`` a ``TrainingTrials``: a
``SearchSpaceObjective`` with the charge protocol of ``objectives.charged`` (the one
``TorchModelTuningObjective`` uses). Each evaluated point is one DP-SGD run: ``charge_rows``
charges the batch's runs to the study's ledger BEFORE any of them trains (refused whole against the
training budget and a ``DPSGDConfig`` target), and the objective, run with a ``TrainingTrial``,
trains through ``trial.train_dp_sgd(model_fn, optimizer=..., optimizer_kwargs=...)``: Opacus DP-SGD
(``training.dp_sgd.train_model``) on the study's training records, with the study's
``TrainingConfig`` and noise multiplier, checked against the charged run afterwards. A trial must
train exactly once through it (a second call and a trial that did not train are refused), so
every training the tuner's losses depend on is on the ledger, and ``tune``'s guarantee states the
training records (every run of the procedure composed, not the winner's alone).

``TrainingTrials`` also runs ``tune``'s private selection over whole DP-SGD training runs
(``protect="training"`` or ``"both"``; ``tune``'s default for a DP-SGD objective with
``method="auto"``): ``train_covered`` runs the objective with a ``CoveredTrial``, whose
``train_dp_sgd`` trains under the selection's ``TrainingCover`` (the whole procedure recorded
once before the first trial, no record per trial: their number is the hidden ``K``) at the
cover's noise multiplier, after the same checks as ``TorchModelTuningObjective.train_covered``:
the cover is open, its record is in this ledger and covers the reference curve, and the run's own
curve lies below it; Opacus's history must then be the planned run. The objective's losses are
the trial's per-user scores (``per_user_scores(model)``; ``score="loss"`` only).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from botorch_dp.integrations.optuna_space import OptunaSpace, RunTrial
from botorch_dp.objectives.charged import ChargedTraining, TrainingTicket, same_ledger
from botorch_dp.objectives.search_space import SearchSpaceObjective
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyBudgetExceeded, PrivacyLedger, TrainingMechanism
from botorch_dp.training.cover import TrainingCover, train_planned_run
from botorch_dp.training.dp_sgd import (
    DPSGDConfig,
    TrainingConfig,
    composed_training_epsilon,
    planned_dp_run,
    resolve_dp_sgd,
)

__all__ = ["CoveredTrial", "TrainingTrial", "TrainingTrials", "losses_of"]

#: Relative slack when comparing a composed training ε with its target (root finding).
_TARGET_RTOL = 1e-9
_TWICE = "trial.train_dp_sgd was called twice in one trial: the study charged one DP-SGD run per trial."


def losses_of(value: Any, num_users: int | None, what: str) -> Tensor:
    r"""An objective's return value as the ``n`` per-user losses (float64), or ``ValueError`` naming ``what``."""
    try:
        losses = torch.as_tensor(value.detach() if isinstance(value, Tensor) else value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"{what} returned {type(value).__name__}, not the per-user losses (a length-n array)."
        ) from None
    if losses.dim() != 1 or (num_users is not None and losses.shape[0] != num_users):
        expected = "n" if num_users is None else str(num_users)
        raise ValueError(
            f"{what} returned shape {tuple(losses.shape)}: return the per-user losses, a length-{expected} "
            "array (one loss per validation user), instead of their mean."
        )
    return losses


class _TrainingSplit:
    r"""The study's sensitive training records (what ``SearchSpaceObjective.num_training_records`` counts)."""

    def __init__(self, X_train: Any, y_train: Any) -> None:
        self.X_train, self.y_train = torch.as_tensor(X_train), torch.as_tensor(y_train)
        if self.X_train.shape[0] != self.y_train.shape[0] or self.X_train.shape[0] < 1:
            raise ValueError(
                f"training_data: X_train has {self.X_train.shape[0]} rows and y_train {self.y_train.shape[0]}; "
                "give (X_train, y_train) with one label per row."
            )


class TrainingTrial(RunTrial):
    r"""A ``RunTrial`` whose ``train_dp_sgd`` trains one charged DP-SGD run (see the module docstring)."""

    def __init__(
        self,
        space: OptunaSpace,
        params: dict[str, Any],
        number: int,
        owner: TrainingTrials,
        ticket: TrainingTicket,
        meter: Any = None,
    ) -> None:
        super().__init__(space, params, number)
        self._owner, self._ticket, self._meter = owner, ticket, meter
        self.trained = False

    def train_dp_sgd(
        self,
        model_fn: Callable[[], nn.Module],
        *,
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    ) -> nn.Module:
        r"""Train a fresh model on the study's training records with Opacus DP-SGD (the run this trial was charged).

        Args:
            model_fn: Builds the untrained model (``() -> nn.Module``).
            optimizer: A ``torch.optim.Optimizer`` class (Opacus wraps it).
            optimizer_kwargs: Its keyword arguments (e.g. ``lr`` from ``trial.suggest_float``).
            loss_fn: ``(outputs, targets) -> m`` per-example losses (default cross-entropy for class labels).

        Returns:
            The trained model, in eval mode.
        """
        if self.trained:
            raise RuntimeError(_TWICE)
        self.trained = True
        owner, ticket = self._owner, self._ticket
        if self._meter is not None and ticket.run_id is not None:
            self._meter.record(ticket.run_id)  # a run charged alone: recorded just before it draws its noise
        return train_planned_run(
            model_fn,
            owner.data.X_train,
            owner.data.y_train,
            owner.training,
            dp_sgd=owner.run_dp_sgd,
            planned=ticket.event,
            charged_as=f"run {ticket.run_id!r}, charged as {ticket.event}",
            noise_seed=ticket.noise_seed,
            optimizer=optimizer,
            optimizer_kwargs=optimizer_kwargs,
            loss_fn=loss_fn,
        )


class CoveredTrial(RunTrial):
    r"""A trial of a private selection over whole training runs: ``train_dp_sgd`` trains under the cover.

    Args:
        space: The recorded ``OptunaSpace``.
        params: ``{name: Optuna value}`` of the trial's configuration.
        owner: The ``TrainingTrials`` (its training records and config).
        run: The planned ``DPSGDRun`` (checked against the cover by ``TrainingTrials.train_covered``).
        dp_sgd: The run's ``DPSGDConfig`` (the cover's noise multiplier).
        noise_seed: The run's DP-SGD seed (``None``: OS entropy).
    """

    def __init__(
        self,
        space: OptunaSpace,
        params: dict[str, Any],
        owner: TrainingTrials,
        run: DPSGDRun,
        dp_sgd: DPSGDConfig,
        noise_seed: int | None,
    ) -> None:
        super().__init__(space, params)
        self._owner, self._run, self._dp_sgd, self._noise_seed = owner, run, dp_sgd, noise_seed
        self.model: nn.Module | None = None

    def train_dp_sgd(
        self,
        model_fn: Callable[[], nn.Module],
        *,
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    ) -> nn.Module:
        r"""Train a fresh model on the study's training records with Opacus DP-SGD, covered by the selection's
        record (the arguments of ``TrainingTrial.train_dp_sgd``)."""
        if self.model is not None:
            raise RuntimeError(_TWICE)
        owner = self._owner
        model = train_planned_run(
            model_fn,
            owner.data.X_train,
            owner.data.y_train,
            owner.training,
            dp_sgd=self._dp_sgd,
            planned=self._run,
            charged_as=f"a covered trial planned as {self._run}",
            noise_seed=self._noise_seed,
            optimizer=optimizer,
            optimizer_kwargs=optimizer_kwargs,
            loss_fn=loss_fn,
            seed_warned=True,  # an explicit seed: the selection warned once
        )
        self.model = model
        return model


class TrainingTrials(ChargedTraining, SearchSpaceObjective):
    r"""θ (``q x d``, unit cube) ↦ ``q x n`` per-user losses of an Optuna objective that trains with DP-SGD.

    Args:
        objective: The Optuna objective, ``objective(trial) -> n`` per-user losses; it trains through
            ``trial.train_dp_sgd`` exactly once.
        optuna_space: The recorded ``OptunaSpace``.
        training_data: ``(X_train, y_train)``: the sensitive training records.
        num_users: ``n``, the validation users the objective returns losses for.
        dp_sgd: The ``DPSGDConfig`` (a noise multiplier, or a target over ``planned_runs`` runs).
        training: The ``TrainingConfig`` (epochs, batch size, seed, threads).
        ledger: The ledger that records every run (a fresh one if None).
    """

    def __init__(
        self,
        objective: Callable[[Any], Any],
        optuna_space: OptunaSpace,
        *,
        training_data: Sequence[Any],
        num_users: int,
        dp_sgd: DPSGDConfig,
        training: TrainingConfig | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        if not isinstance(dp_sgd, DPSGDConfig):
            raise ValueError(f"dp_sgd must be a DPSGDConfig, got {type(dp_sgd).__name__}.")
        if not isinstance(training_data, (tuple, list)) or len(training_data) != 2:
            raise ValueError("training_data must be (X_train, y_train), the records DP-SGD protects.")
        self.objective, self.optuna_space, self.space = objective, optuna_space, optuna_space.space
        self.data = _TrainingSplit(*training_data)
        self._num_users = int(num_users)
        self.training = training if training is not None else TrainingConfig()
        self.ledger = ledger if ledger is not None else PrivacyLedger()
        self.dp_sgd = dp_sgd
        self.run_dp_sgd = resolve_dp_sgd(
            dp_sgd,
            len(self.data.y_train),
            self.training,
            accountant=self.ledger.training_accountant,
            eps_error=self.ledger.prv_eps_error,
        )
        self.noise_seed: int | None = None
        self.run_prefix = "trial"
        self.num_trainings = 0
        self.trials_run = 0
        self.loss_cap: float | None = None  # the selection's score clip is tune's loss_clip
        self._scores: weakref.WeakKeyDictionary[nn.Module, Tensor] = weakref.WeakKeyDictionary()

    @property  # n is given: the objective, not the study, holds the validation users
    def num_users(self) -> int:  # type: ignore[override]
        return self._num_users

    def planned_event(self, theta: Tensor | None = None, **options: Any) -> DPSGDRun:
        r"""The ledger event of every run (the same at every θ); refused with a categorical not fixed yet."""
        free = [h.name for h in self.space.categoricals if h.name not in self.space.fixed]
        if free:
            raise ValueError(f"the categorical hyperparameter(s) {free} are not fixed: evaluate with_choice({{...}}).")
        return DPSGDRun.checked(*planned_dp_run(len(self.data.y_train), self.training, self.run_dp_sgd))

    def planned_run(self) -> tuple[float, float, int]:
        r"""``(noise_multiplier, sample_rate, steps)`` of every charged DP-SGD run (public)."""
        return planned_dp_run(len(self.data.y_train), self.training, self.run_dp_sgd)

    def possible_run_shapes(self) -> list[tuple[float, int]]:
        r"""The ``(sample_rate, steps)`` of a trial's run: one shape (the study's ``TrainingConfig``)."""
        _, rate, steps = self.planned_run()
        return [(rate, steps)]

    # ------------------------------------------------------------------ private selection over whole runs
    def train_covered(
        self, hyperparameters: Mapping[str, Any], cover: TrainingCover, *, noise_seed: int | None = None
    ) -> nn.Module:
        r"""Run the objective once at natural ``hyperparameters``, its training covered by ``cover`` (no record).

        Only under an open ``cover`` whose record this objective's ledger holds, and only a run the cover
        covers (``TrainingCover.check_trial``: an RDP record above the run's curve, or a profile record
        over its run shape); all checked before the objective runs.

        Returns:
            The trained model; its per-user losses (the objective's return value) are kept for
            ``per_user_scores``.
        """
        if not isinstance(cover, TrainingCover) or not cover.is_open:
            raise RuntimeError("train_covered trains only under the open TrainingCover of a running private selection.")
        ledger = self._charging_ledger()
        if not same_ledger(cover.ledger, ledger):
            raise ValueError("cover: its record is in another ledger than this objective's.")
        dp_sgd = DPSGDConfig(noise_multiplier=cover.noise_multiplier, max_grad_norm=self.run_dp_sgd.max_grad_norm)
        run = DPSGDRun.checked(*planned_dp_run(len(self.data.y_train), self.training, dp_sgd))
        cover.check_trial(ledger, run)
        self.space.from_natural(hyperparameters)  # a point of the space (ValueError naming a value outside it)
        params = self.optuna_space.to_optuna(dict(hyperparameters))
        trial = CoveredTrial(self.optuna_space, params, self, run, dp_sgd, noise_seed)
        value = self.objective(trial)
        if trial.model is None:
            raise RuntimeError(
                "objective did not train through trial.train_dp_sgd: a selection over whole DP-SGD training runs "
                "scores each trial's own training run."
            )
        self._scores[trial.model] = losses_of(value, self.num_users, "objective")
        return trial.model

    def per_user_scores(self, model: nn.Module, score: str = "loss") -> Tensor:
        r"""SENSITIVE: the per-user losses the objective returned for the trial that trained ``model``."""
        if score != "loss":
            raise ValueError(f"score={score!r}: an Optuna objective returns per-user losses; use score='loss'.")
        return self._scores.pop(model)

    def _check_charge(self, events: list[DPSGDRun | TrainingMechanism]) -> None:
        target = self.dp_sgd.target()
        if target is None:
            return
        target_epsilon, target_delta, planned_runs = target
        runs = [e for e in events if isinstance(e, DPSGDRun)]
        ledger = self._charging_ledger()
        total = composed_training_epsilon(
            [*ledger.training.history(), *runs], target_delta, ledger.training_accountant, ledger.prv_eps_error
        )
        if total > target_epsilon * (1.0 + _TARGET_RTOL):
            raise PrivacyBudgetExceeded(
                f"Training-data target exceeded: {len(events)} more DP-SGD run(s) would bring the training epsilon "
                f"(delta={target_delta:g}) to {total:.6g}, above the target {target_epsilon:g} "
                f"(planned_runs={planned_runs}; the ledger holds {len(ledger.training.runs())} runs)."
            )

    def _train_with(self, theta: Tensor, ticket: TrainingTicket, meter: Any = None, **options: Any) -> Tensor:
        natural = self.space.to_natural(theta)
        assert isinstance(natural, dict)  # one point
        self.trials_run = number = self.trials_run + 1  # informational (a trial's number)
        trial = TrainingTrial(self.optuna_space, self.optuna_space.to_optuna(natural), number, self, ticket, meter)
        value = self.objective(trial)
        if not trial.trained:
            raise RuntimeError(
                "objective did not train through trial.train_dp_sgd: a study with dp_sgd charges one DP-SGD run "
                "per trial, and the trial's training must be that run."
            )
        return losses_of(value, self.num_users, "objective")

    def _validation_losses(self, trained: Tensor) -> Tensor:
        return trained
