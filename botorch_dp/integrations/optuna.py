r"""Optuna objectives tuned privately: ``create_private_study`` and ``PrivateStudy.optimize``.

An objective written for Optuna runs privately when two lines change: the study is
``create_private_study(epsilon=..., delta=...)`` and the objective returns the per-user losses (a
length-``n`` array or tensor) instead of their mean. ``optimize`` reads the search space from the
objective's ``suggest_*`` calls without evaluating anything (``integrations.optuna_space``: a
recording trial, followed into helpers that get it, that stops at the first other call; a
conditional space is refused by name), maps it to a ``SearchSpace`` and runs ``botorch_dp.tune``
on it through ``tune``'s public arguments (``method=``, ``proxy=``, ``strategy=``, ``protect=``,
...), so every method of ``tune`` is chosen as ``tune`` chooses it. The library owns the
evaluations and the ledger; Optuna's sampler, pruner and storage never see a loss.

What the study shows is what ``tune`` released, and nothing else: ``best_params`` (the released
hyperparameters), ``best_trial`` (an ``optuna.trial.FrozenTrial`` with them; its ``value`` is the
released score when the method releases one, else ``+inf``, so that it is a valid COMPLETE trial
for Optuna's readers; ``best_value`` is then ``None``), ``trials`` and ``trials_dataframe()`` (one
trial per released run: every configuration's run of ``"enumerate"``, only the winner of a
selection, whose number of trials and losing trials stay hidden), and ``guarantee`` /
``guarantee_report()`` in ``tune``'s words. With ``storage="sqlite:///..."`` the released trials
and the guarantee (study user attributes) are written to an Optuna RDB storage once the run has
released them, exactly as Optuna writes a study of those trials alone, so ``optuna.load_study``,
``optuna.visualization`` and ``optuna-dashboard`` read it; the stored trials carry no duration
(start = end = the time ``optimize`` was called, which tells nothing of the run). Objectives that
train with DP-SGD inside the trial do so through ``trial.train_dp_sgd`` in a study with
``dp_sgd=`` and ``training_data=`` (``integrations.optuna_training``): the training is charged as
``tune`` charges a ``TorchModelTuningObjective``'s (by default one private selection over whole
training runs, charged once; with ``protect="validation"`` every run on its own), and the
guarantee states the training records too.

Needs ``pip install 'botorch-dp[optuna]'``.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import optuna
import torch
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from botorch_dp.integrations.optuna_space import OptunaSpace, RunTrial, record_space
from botorch_dp.integrations.optuna_training import TrainingTrials, losses_of
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig
from botorch_dp.tuning.one_call import tune
from botorch_dp.tuning.tune_result import TuneGuarantee, TuneResult

__all__ = ["PrivateStudy", "create_private_study"]

#: ``tune``'s arguments that the study sets itself (from its own arguments and ``optimize``'s).
_SET_BY_STUDY = ("objective", "space", "epsilon", "delta", "ledger", "proxy", "num_users", "method", "progress")
#: Optuna ``Study`` methods a private study has no counterpart for, and why.
_UNSUPPORTED = {
    name: "the library owns the evaluations: trials are neither asked for nor told (a told value is a loss)"
    for name in ("ask", "tell", "enqueue_trial", "add_trial", "add_trials")
}
_UNSUPPORTED["best_trials"] = "a private study minimizes one objective; use best_trial"
#: Why ``optimize`` refuses some of Optuna's arguments.
_REFUSED = {
    "timeout": "a run stopped by time stops after a number of trials that depends on them; use n_trials.",
    "callbacks": "a callback sees every trial and its value; read study.best_trial after optimize.",
    "catch": "an exception in a trial ends the procedure (a selection hides which trial raised).",
}
_NO_PROXY_TRAINING = (
    "trial.train_dp_sgd in the proxy: it trains on the study's sensitive training records; the proxy "
    "(public users) must train on public data, with its own training code."
)


class _OptunaTrials:
    r"""``tune``'s objective for an Optuna objective: a list of ``q`` configurations ↦ the ``q x n`` losses,
    one ``RunTrial`` per configuration (a class, so that a thread pool shares one)."""

    def __init__(self, objective: Callable[[Any], Any], space: OptunaSpace, what: str, no_training: str = "") -> None:
        self.objective, self.space, self.what, self.no_training = objective, space, what, no_training
        self.trials_run = 0

    def __call__(self, configurations: list[dict[str, Any]]) -> torch.Tensor:
        rows = []
        for configuration in configurations:
            self.trials_run = number = self.trials_run + 1  # informational (a trial's number)
            trial = RunTrial(self.space, self.space.to_optuna(configuration), number, self.no_training)
            rows.append(losses_of(self.objective(trial), None, self.what))
        if len({r.shape[0] for r in rows}) > 1:
            raise ValueError(
                f"{self.what} returned losses of {sorted({r.shape[0] for r in rows})} users; n must not vary."
            )
        return torch.stack(rows) if rows else torch.empty(0, 0, dtype=torch.float64)


def create_private_study(
    *,
    epsilon: float,
    delta: float,
    method: str = "auto",
    proxy: Callable[[Any], Any] | None = None,
    num_users: int | None = None,
    storage: str | optuna.storages.BaseStorage | None = None,
    study_name: str | None = None,
    direction: str = "minimize",
    dp_sgd: DPSGDConfig | None = None,
    training: TrainingConfig | None = None,
    training_data: Sequence[Any] | None = None,
    ledger: PrivacyLedger | None = None,
    **tune_options: Any,
) -> PrivateStudy:
    r"""A study whose ``optimize`` tunes an Optuna objective at a total ``(epsilon, delta)``.

    Args:
        epsilon: ``ε`` of the whole procedure for the validation users (``tune``'s).
        delta: ``δ``.
        method: ``tune``'s ``method`` (``"auto"``: chosen on ``proxy`` when given, else DP-GIBO).
        proxy: An Optuna objective on PUBLIC users (same suggest calls; its losses are used without
            noise): the run is planned and the method chosen on it (``tune``'s ``proxy``).
        num_users: ``n`` of the objective (public; needed with ``proxy`` and with ``dp_sgd``).
        storage: An Optuna storage URL (``"sqlite:///study.db"``) or ``BaseStorage``: the released trials
            and the guarantee are written there once released (a valid Optuna study of them alone). The
            study is created there now (an existing ``study_name`` is refused before anything runs).
        study_name: The Optuna study's name (default: Optuna's generated one).
        direction: ``"minimize"`` only (the objective returns per-user losses).
        dp_sgd: The objective trains with DP-SGD through ``trial.train_dp_sgd`` (a ``DPSGDConfig``: a
            noise multiplier, or a target ε over ``planned_runs`` runs); needs ``training_data``. With
            ``tune``'s default ``protect="both"`` (or ``"training"``) the selection over whole runs
            calibrates its own noise multiplier and uses this clip norm.
        training: The ``TrainingConfig`` of those runs (epochs, batch size, seed).
        training_data: ``(X_train, y_train)``, the training records DP-SGD protects.
        ledger: The ``PrivacyLedger`` to charge (default a new one).
        **tune_options: Any other keyword of ``botorch_dp.tune`` (``strategy``, ``seed``, ``loss_clip``,
            ``selection_share``, ``mean_trials``, ``checkpoint_dir``, DP-GIBO settings, ...).

    Returns:
        The ``PrivateStudy``.
    """
    if direction != "minimize":
        raise ValueError(
            f"direction={direction!r}: a private study minimizes per-user losses; return each user's loss "
            "(e.g. 1 - accuracy per user) and keep direction='minimize'."
        )
    clash = sorted(set(tune_options) & set(_SET_BY_STUDY))
    if clash:
        raise ValueError(f"{clash[0]}= is set by the study; give it to create_private_study or optimize, not twice.")
    if "max_trials" in tune_options:
        raise ValueError("max_trials= is optimize's n_trials in a private study; pass n_trials to optimize.")
    if "executor" in tune_options:
        raise ValueError("executor= is optimize's n_jobs in a private study (a thread pool); pass n_jobs to optimize.")
    if (dp_sgd is None) != (training_data is None):
        raise ValueError(
            "dp_sgd and training_data go together: give both (a study whose objective trains with DP-SGD through "
            f"trial.train_dp_sgd) or neither, got dp_sgd={dp_sgd!r} and training_data "
            f"{'given' if training_data is not None else 'None'}."
        )
    if training is not None and dp_sgd is None:
        raise ValueError("training= sets the DP-SGD runs of trial.train_dp_sgd; give dp_sgd= and training_data= too.")
    if dp_sgd is not None and (num_users is None or isinstance(num_users, bool) or not isinstance(num_users, int)):
        raise ValueError(f"num_users: a study with dp_sgd needs n, the objective's number of users, got {num_users!r}.")
    if proxy is not None and not callable(proxy):
        raise ValueError(f"proxy must be an Optuna objective, proxy(trial), got {type(proxy).__name__}.")
    return PrivateStudy(
        epsilon=epsilon,
        delta=delta,
        method=method,
        proxy=proxy,
        num_users=num_users,
        storage=storage,
        study_name=study_name,
        dp_sgd=dp_sgd,
        training=training,
        training_data=training_data,
        ledger=ledger,
        tune_options=tune_options,
    )


class PrivateStudy:
    r"""An Optuna-like study over one private ``tune`` call (build it with ``create_private_study``).

    Attributes:
        result: The ``TuneResult`` after ``optimize`` (``None`` before).
        study_name: The Optuna study's name (in ``storage``, if given).
        space: The recorded ``OptunaSpace`` after ``optimize``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        method: str,
        proxy: Callable[[Any], Any] | None,
        num_users: int | None,
        storage: str | optuna.storages.BaseStorage | None,
        study_name: str | None,
        dp_sgd: DPSGDConfig | None,
        training: TrainingConfig | None,
        training_data: Sequence[Any] | None,
        ledger: PrivacyLedger | None,
        tune_options: dict[str, Any],
    ) -> None:
        self.epsilon, self.delta, self.method, self.proxy, self.num_users = epsilon, delta, method, proxy, num_users
        self.dp_sgd, self.training, self.training_data = dp_sgd, training, training_data
        self.given_ledger, self.tune_options = ledger, dict(tune_options)
        self.result: TuneResult | None = None
        self.space: OptunaSpace | None = None
        self._trials: list[FrozenTrial] = []
        self._storage = optuna.storages.get_storage(
            storage if storage is not None else optuna.storages.InMemoryStorage()
        )
        self._study_id = self._storage.create_new_study([StudyDirection.MINIMIZE], study_name)
        self.study_name = self._storage.get_study_name_from_id(self._study_id)
        self.direction = StudyDirection.MINIMIZE

    def __getattr__(self, name: str) -> Any:
        if name in _UNSUPPORTED:
            raise AttributeError(f"PrivateStudy.{name}: {_UNSUPPORTED[name]}.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------ the run
    def optimize(
        self,
        objective: Callable[[Any], Any],
        n_trials: int | None = None,
        timeout: float | None = None,
        n_jobs: int = 1,
        catch: Sequence[type[Exception]] | type[Exception] = (),
        callbacks: Sequence[Callable[..., Any]] | None = None,
        gc_after_trial: bool = False,
        show_progress_bar: bool = False,
    ) -> None:
        r"""Tune ``objective`` privately: read its space, run ``tune``, keep (and store) what it released.

        Args:
            objective: An Optuna objective, ``objective(trial)``, whose ``suggest_*`` calls come first and
                which returns the ``n`` per-user losses.
            n_trials: ``tune``'s ``max_trials``: the public number of trials a selection (private random
                search, DP-HyPO, ``strategy="sample"``) runs whatever its hidden number, so its wall time
                does not reveal it (DP-GIBO's evaluations are set by its own settings and ignore it).
            timeout: Refused (a run stopped by time would stop after a number of trials that depends on them).
            n_jobs: Evaluate each batch's trials on a thread pool of this size (``-1``: one per CPU);
                ``tune``'s ``executor`` (a selection over whole DP-SGD runs trains its trials in turn).
            catch: Refused (an exception in a trial ends the procedure; a selection hides which trial).
            callbacks: Refused (a callback sees every trial and its value).
            gc_after_trial: Ignored.
            show_progress_bar: ``tune``'s progress bars (a selection shows one bar with no count).
        """
        if self.result is not None:
            raise RuntimeError(
                "optimize was called before: this study's (epsilon, delta) is spent on its released result; "
                "create a new study (with its own budget) to tune again."
            )
        for name, given in (("timeout", timeout is not None), ("callbacks", bool(callbacks)), ("catch", bool(catch))):
            if given:
                raise ValueError(f"{name}= is not supported by a private study: {_REFUSED[name]}")
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or not (n_jobs >= 1 or n_jobs == -1):
            raise ValueError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}.")
        workers = (os.cpu_count() or 1) if n_jobs == -1 else n_jobs
        called = datetime.datetime.now()  # the stored trials' time: set before the run, so it tells nothing of it
        self.space = space = record_space(objective)
        if self.dp_sgd is not None:
            assert self.training_data is not None and self.num_users is not None  # checked by create_private_study
            charged: Any = TrainingTrials(
                objective,
                space,
                training_data=self.training_data,
                num_users=self.num_users,
                dp_sgd=self.dp_sgd,
                training=self.training,
                ledger=self.given_ledger,
            )
            ledger = None  # tune charges the objective's own ledger
        else:
            charged, ledger = _OptunaTrials(objective, space, "objective"), self.given_ledger
        proxy = None if self.proxy is None else _OptunaTrials(self.proxy, space, "proxy", _NO_PROXY_TRAINING)
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
        try:
            result = tune(
                charged,
                space.space,
                epsilon=self.epsilon,
                delta=self.delta,
                method=self.method,
                proxy=proxy,
                num_users=self.num_users,
                ledger=ledger,
                progress=show_progress_bar,
                executor=executor,
                max_trials=n_trials,
                **self.tune_options,
            )
        finally:
            if executor is not None:
                executor.shutdown(wait=True)
        self.result = result
        self._trials = _released_trials(result, space, called)
        self._store(result)

    def _store(self, result: TuneResult) -> None:
        r"""Write the released trials and the guarantee (public) to the study's storage."""
        storage, study_id = self._storage, self._study_id
        for key, value in (
            ("botorch_dp.guarantee", result.guarantee_report()),
            ("botorch_dp.epsilon", result.guarantee.epsilon if result.guarantee.holds else "inf"),
            ("botorch_dp.delta", result.guarantee.delta),
            ("botorch_dp.method", result.method),
        ):
            storage.set_study_user_attr(study_id, key, value)
        for trial in self._trials:
            storage.create_new_trial(study_id, template_trial=trial)

    # ------------------------------------------------------------------ what was released
    def _released(self) -> TuneResult:
        if self.result is None:
            raise ValueError("Nothing was released yet: call study.optimize(objective) first.")
        return self.result

    @property
    def best_params(self) -> dict[str, Any]:
        r"""The released hyperparameters, as the objective's ``suggest_*`` calls return them."""
        return dict(self.best_trial.params)

    @property
    def best_trial(self) -> FrozenTrial:
        r"""The released trial (its ``value``: the released noisy score, or ``+inf`` when none was released)."""
        return self._trials[self._released().chosen]

    @property
    def best_value(self) -> float | None:
        r"""The released trial's noisy score (``None`` when the method released no score; its trial's ``value``
        is then ``+inf``, which Optuna's readers and plots take as "no value")."""
        return self._released().runs[self._released().chosen].noisy_score

    @property
    def trials(self) -> list[FrozenTrial]:
        r"""One trial per released run (``tune``'s ``TuneResult.runs``)."""
        self._released()
        return list(self._trials)

    def get_trials(self, deepcopy: bool = True, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return [t for t in self.trials if states is None or t.state in states]

    def trials_dataframe(
        self, attrs: tuple[str, ...] = ("number", "value", "params", "state"), multi_index: bool = False
    ) -> Any:
        r"""Optuna's ``trials_dataframe`` of the released trials (pandas), read back from the study's storage."""
        self._released()
        return optuna.study.Study(self.study_name, self._storage).trials_dataframe(attrs, multi_index)

    @property
    def user_attrs(self) -> dict[str, Any]:
        r"""The study's public attributes (the guarantee, ε, δ, the method) once released."""
        return self._storage.get_study_user_attrs(self._study_id)

    @property
    def guarantee(self) -> TuneGuarantee:
        r"""``tune``'s guarantee of the procedure (``TuneResult.guarantee``)."""
        return self._released().guarantee

    def guarantee_report(self) -> str:
        r"""``tune``'s report of what was protected (``TuneResult.guarantee_report``)."""
        return self._released().guarantee_report()

    @property
    def ledger(self) -> PrivacyLedger:
        r"""The ledger the procedure charged."""
        return self._released().ledger


#: The trial's user attribute that says what its value is (public text).
SCORE_ATTR = "botorch_dp.value"
_SCORED = "the score tune released for this run (TuneResult.runs[i].noisy_score)"
_UNSCORED = "none released: +inf stands for no score (the method releases the point only)"


def _released_trials(result: TuneResult, space: OptunaSpace, when: datetime.datetime) -> list[FrozenTrial]:
    r"""One ``FrozenTrial`` per released run of ``result``: its released point as Optuna values, and its
    released noisy score as the value (``+inf`` without one, so that the trial is a valid COMPLETE trial
    that Optuna's readers accept: ``best_trial``, ``trials_dataframe``, the plots, which leave it out)."""
    trials = []
    for number, run in enumerate(result.runs):
        natural = (
            result.hyperparameters
            if number == result.chosen
            else space.space.to_natural(run.result.release.theta, choice=run.configuration)
        )
        assert isinstance(natural, dict)  # one point
        trials.append(
            FrozenTrial(
                number=number,
                state=TrialState.COMPLETE,
                value=math.inf if run.noisy_score is None else float(run.noisy_score),
                datetime_start=when,
                datetime_complete=when,
                params=space.to_optuna(natural),
                distributions=dict(space.distributions),
                user_attrs={SCORE_ATTR: _UNSCORED if run.noisy_score is None else _SCORED},
                system_attrs={},
                intermediate_values={},
                trial_id=number,
            )
        )
    return trials
