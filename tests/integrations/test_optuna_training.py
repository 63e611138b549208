r"""DP-SGD inside an Optuna trial, every method of ``tune`` chosen as ``tune`` chooses it (issue 44 items 2, 3).

A study with ``dp_sgd=`` runs ``tune``'s default for a DP-trained objective, private selection over
whole DP-SGD training runs protecting both sets, charged exactly as ``tune`` charges a
``TorchModelTuningObjective`` with the same data and runs (the same ledger record, the same
statement per protected set), once before the first trial and never per trial (the number of
trials stays hidden); ``n_trials`` pads the selection; ``protect="training"`` and a forced method
follow ``tune``'s rules; a trial outside the selection's cover never trains.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from botorch_dp import tune
from botorch_dp.integrations.optuna_space import record_space
from botorch_dp.integrations.optuna_training import TrainingTrials
from botorch_dp.privacy.ledger import PrivacyLedger, TrainingMechanism
from botorch_dp.training.cover import TrainingCover
from botorch_dp.training.dp_sgd import DPSGDConfig
from botorch_dp.training.selection_accounting import trial_rdp_curve
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective

from .test_optuna import TRAIN, TRAINING, VALIDATION, N, _dp_study, _optimize


def _counting(calls):
    def dp_objective(trial):
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        model = trial.train_dp_sgd(lambda: nn.Linear(4, 2), optimizer_kwargs={"lr": lr})
        calls.append(lr)
        with torch.no_grad():
            return F.cross_entropy(model(VALIDATION[0]), VALIDATION[1], reduction="none")

    return dp_objective


def _direct(protect):
    r"""``tune`` on a ``TorchModelTuningObjective`` with the same data, model, runs and settings."""
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    objective = TorchModelTuningObjective(
        (*TRAIN, *VALIDATION),
        space,
        model_fn=lambda: nn.Linear(4, 2),
        training=TRAINING,
        dp_sgd=DPSGDConfig(noise_multiplier=1.0),
        loss_cap=None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {} if protect is None else {"protect": protect}
        result = tune(objective, space, epsilon=3.0, delta=1e-3, mean_trials=3.0, seed=3, progress=False, **kw)
    return result, objective.ledger


@pytest.mark.privacy_fast
@pytest.mark.parametrize("protect", [None, "training"])
def test_a_dp_sgd_study_runs_tunes_selection_over_whole_runs_charged_as_tune_charges_it(protect):
    ledger, calls = PrivacyLedger(), []
    study = _optimize(_dp_study(ledger, protect), _counting(calls))
    direct, direct_ledger = _direct(protect)
    result = study.result
    assert result.method == direct.method == "training_selection" and len(calls) >= 1
    # one training record, written before the first trial, none per trial (their number is hidden)
    (record,) = ledger.training.records()
    (direct_record,) = direct_ledger.training.records()
    assert ledger.training.runs() == {} and study.ledger is ledger
    assert record.event == direct_record.event  # the same entry: a curve, or a profile (ε, δ)
    assert len(ledger.validation.records()) == len(direct_ledger.validation.records()) == (protect is None)
    assert result.protected == direct.protected and study.guarantee == direct.guarantee
    assert ("validation" in result.protected) and (result.protected["validation"] is None) == (protect == "training")
    # what the study shows: the winner only, in tune's words
    assert len(study.trials) == 1 and study.best_value == result.runs[0].noisy_score is not None
    assert study.best_params == {"lr": pytest.approx(result.hyperparameters["lr"], rel=1e-12)}
    assert study.guarantee_report() == result.guarantee_report()
    assert "training records (add or remove one record)" in study.guarantee_report()


def test_n_trials_pads_the_selection_to_a_public_number_of_trials():
    hidden, padded = [], []
    _optimize(_dp_study(PrivacyLedger(), None), _counting(hidden))
    study = _optimize(_dp_study(PrivacyLedger(), None), _counting(padded), n_trials=len(hidden) + 4)
    assert len(padded) == len(hidden) + 4 and len(study.trials) == 1  # the same seed: the same hidden K
    assert f"Padded to max_trials = {len(hidden) + 4} training runs" in study.guarantee_report()


def test_methods_are_chosen_and_refused_as_tune_chooses_them():
    forced = _optimize(_dp_study(PrivacyLedger(), "validation", method="dp_gibo"), _counting([]))
    assert forced.result.method == "dp_gibo"  # every training charged on its own (test_optuna.py)
    with pytest.raises(ValueError, match="method='private_random_search' with protect='both'"):
        _optimize(_dp_study(PrivacyLedger(), "both", method="private_random_search"), _counting([]))
    with pytest.raises(ValueError, match=r"\['num_iterations'\] with protect='both'"):
        _optimize(_dp_study(PrivacyLedger(), "both", num_iterations=2), _counting([]))


@pytest.mark.privacy_fast
def test_a_trial_outside_an_open_cover_of_this_ledger_never_runs():
    calls: list[float] = []
    objective = _counting(calls)
    trials = TrainingTrials(
        objective,
        record_space(objective),
        training_data=TRAIN,
        num_users=N,
        dp_sgd=DPSGDConfig(noise_multiplier=1.0),
        training=TRAINING,
    )
    _, rate, steps = trials.planned_run()
    reference = tuple(trial_rdp_curve(2.0, [(rate, steps)]).tolist())  # one run at sigma = 2
    closed = TrainingCover(trials.ledger, "covered", reference, 2.0)
    closed.close()
    with pytest.raises(RuntimeError, match="only under the open TrainingCover"):
        trials.train_covered({"lr": 0.1}, closed)
    with pytest.raises(RuntimeError, match="holds no training record 'covered'"):
        trials.train_covered({"lr": 0.1}, TrainingCover(trials.ledger, "covered", reference, 2.0))
    with trials.ledger.charge_training({"covered": TrainingMechanism("a selection's curve", reference)}) as meter:
        meter.record("covered")
    with pytest.raises(RuntimeError, match="lies above the cover's reference curve"):  # sigma 1 < 2: not covered
        trials.train_covered({"lr": 0.1}, TrainingCover(trials.ledger, "covered", reference, 1.0))
    with pytest.raises(ValueError, match="another ledger"):
        trials.train_covered({"lr": 0.1}, TrainingCover(PrivacyLedger(), "covered", reference, 2.0))
    assert calls == []
    trials.train_covered({"lr": 0.1}, TrainingCover(trials.ledger, "covered", reference, 2.0), noise_seed=0)
    assert calls == [0.1] and list(trials.ledger.training.records()) != [] and trials.ledger.training.runs() == {}
