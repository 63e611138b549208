r"""botorch_dp.integrations.optuna (issue 44): an Optuna objective tuned privately by changing two lines.

How the space is read from the suggest calls is tested in test_optuna_space.py. The study runs ``tune``
itself (the same release as a direct ``tune`` call with the same seed), shows only what was released
(best trial, trials, dataframe, storage: no loss, no losing trial), and a DP-SGD objective's training
runs are charged to the ledger before they train, one per evaluation. Optuna is a test dependency (``dev``).
"""

from __future__ import annotations

import functools
import math
import re
import threading
import warnings

import optuna
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from botorch_dp import tune
from botorch_dp.integrations.optuna import create_private_study
from botorch_dp.privacy.ledger import DPSGDRun, PrivacyLedger
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig, composed_training_epsilon, planned_dp_run

from ..test_docs import ROOT, RUN_IN, python_blocks
from ..test_imports_lazy import _loaded_after

N = 40
FAST = dict(raw_samples=16, num_restarts=1, num_iterations=3)
NOISE = torch.randn(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1


def _losses(lr: float, width: int, act: str) -> torch.Tensor:
    base = (math.log10(lr) + 2.5) ** 2 + ((width - 32) / 32) ** 2 + (0.0 if act == "relu" else 1.0)
    return (0.2 * base + NOISE).clamp(min=0)


def objective(trial, produced=None):
    lr = trial.suggest_float("lr", 10**-4, 1e-1, log=True)
    width = trial.suggest_int("width", 8, 64, step=8)
    act = trial.suggest_categorical("act", ["relu", "tanh"])
    losses = _losses(lr, width, act)
    if produced is not None:
        produced.append(losses)
    return losses


def _optimize(study, objective, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.optimize(objective, **kw)
    return study


def _study(**kw):
    return create_private_study(**{"epsilon": 3.0, "delta": 1e-5, "seed": 3, **FAST, **kw})


# ---------------------------------------------------------------------- the study runs tune
@pytest.fixture(scope="module")
def enumerated():
    produced: list[torch.Tensor] = []

    recording = functools.partial(objective, produced=produced)
    study = _optimize(_study(method="dp_gibo"), recording)  # DP-GIBO per configuration, then the scores
    return study, produced


def _configs_objective(configs):
    return torch.stack([_losses(c["lr"], 8 + 8 * c["width"], c["act"]) for c in configs])


def test_the_study_releases_what_tune_releases_on_the_recorded_space(enumerated):
    study, _ = enumerated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = tune(
            _configs_objective, study.space.space, epsilon=3.0, delta=1e-5, seed=3, progress=False, method="dp_gibo",
            **FAST,
        )  # fmt: skip
    result = study.result
    assert result.hyperparameters == direct.hyperparameters
    assert [r.noisy_score for r in result.runs] == [r.noisy_score for r in direct.runs]
    assert study.best_params == study.space.to_optuna(direct.hyperparameters)
    assert study.best_params["width"] == 8 + 8 * direct.hyperparameters["width"]
    assert study.guarantee == direct.guarantee and study.guarantee.epsilon == pytest.approx(3.0, rel=1e-9)
    assert study.guarantee_report() == result.guarantee_report()
    assert study.guarantee_report().startswith("tune: (epsilon = 3, delta = 1e-05)-DP for the validation users")


def test_best_trial_and_trials_hold_the_released_runs_and_their_noisy_scores_only(enumerated):
    study, _ = enumerated
    result = study.result
    assert isinstance(study.best_trial, optuna.trial.FrozenTrial)
    assert len(study.trials) == len(result.runs) == 2  # "enumerate": each configuration's run is released
    assert study.best_trial.number == result.chosen and study.best_value == result.runs[result.chosen].noisy_score
    assert [t.value for t in study.trials] == [r.noisy_score for r in result.runs]
    assert {t.params["act"] for t in study.trials} == {"relu", "tanh"}
    frame = study.trials_dataframe()
    assert list(frame["value"]) == [r.noisy_score for r in result.runs]
    assert list(frame.columns) == ["number", "value", "params_act", "params_lr", "params_width", "state"]


def test_a_selection_releases_its_winner_only_and_one_dp_gibo_run_no_score():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        selection = _optimize(_study(method="private_random_search"), objective)
        plain = _optimize(_study(), lambda trial: _losses(trial.suggest_float("lr", 1e-4, 1e-1, log=True), 32, "relu"))
    assert len(selection.trials) == 1 and selection.best_value == selection.result.runs[0].noisy_score is not None
    assert selection.result.method == "private_random_search"
    assert len(plain.trials) == 1 and plain.best_value is None and plain.best_trial.value == math.inf
    assert plain.trials_dataframe()["value"].tolist() == [math.inf]  # a valid COMPLETE trial: test_optuna_storage


def test_n_jobs_evaluates_on_threads_and_releases_the_same_point():
    threads = set()

    def watched(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        threads.add(threading.current_thread().name)
        return _losses(lr, 32, "relu")

    one = _optimize(_study(), watched)
    serial = set(threads)
    threads.clear()
    two = _optimize(_study(), watched, n_jobs=2)
    assert serial == {threading.main_thread().name} and threading.main_thread().name not in threads
    assert one.best_params == two.best_params


@pytest.mark.privacy_fast
def test_show_progress_bar_shows_tunes_bars_and_a_selections_bar_has_no_count(capfd):
    produced: list[torch.Tensor] = []
    recording = functools.partial(objective, produced=produced)
    _optimize(_study(method="private_random_search"), recording)
    assert "private selection" not in capfd.readouterr().err  # no bar unless asked, as in Optuna
    _optimize(_study(method="private_random_search"), recording, show_progress_bar=True)
    bar = capfd.readouterr().err.replace("\r", "\n")
    assert "private selection (the number of trials stays hidden)" in bar
    assert not re.search(r"\d+/\d+|\d+it", bar), bar  # no count of trials, no total


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match="direction='maximize'"):
        create_private_study(epsilon=1.0, delta=1e-5, direction="maximize")
    with pytest.raises(ValueError, match="progress= is set by the study"):
        create_private_study(epsilon=1.0, delta=1e-5, progress=True)
    with pytest.raises(ValueError, match="max_trials= is optimize's n_trials"):
        create_private_study(epsilon=1.0, delta=1e-5, max_trials=4)
    with pytest.raises(ValueError, match="dp_sgd and training_data go together"):
        create_private_study(epsilon=1.0, delta=1e-5, dp_sgd=DPSGDConfig(noise_multiplier=1.0), num_users=N)
    study = _study()
    for kw, match in (
        ({"timeout": 10}, "timeout="),
        ({"callbacks": [print]}, "callbacks="),
        ({"catch": ValueError}, "catch="),
        ({"n_jobs": 0}, "n_jobs must be"),
    ):
        with pytest.raises(ValueError, match=match):
            study.optimize(objective, **kw)
    with pytest.raises(ValueError, match=r"optimize\(objective\) first"):
        _ = study.best_params
    with pytest.raises(AttributeError, match="PrivateStudy.tell: the library owns the evaluations"):
        _ = study.tell
    with pytest.raises(ValueError, match="per-user losses, a length-n array"):
        _optimize(study, lambda trial: float(trial.suggest_float("lr", 0.1, 1.0)))
    done = _optimize(_study(), lambda trial: _losses(trial.suggest_float("lr", 1e-4, 1e-1, log=True), 32, "relu"))
    with pytest.raises(RuntimeError, match="optimize was called before"):
        done.optimize(objective)


# ---------------------------------------------------------------------- storage (also test_optuna_storage.py)
def test_an_existing_study_name_is_refused_before_anything_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    _study(storage=url, study_name="taken")
    with pytest.raises(optuna.exceptions.DuplicatedStudyError):
        _study(storage=url, study_name="taken")


# ---------------------------------------------------------------------- DP-SGD inside the trial
_G = torch.Generator().manual_seed(0)
_X = torch.randn(100, 4, generator=_G)
_Y = (_X[:, 0] > 0).long()
TRAIN, VALIDATION = (_X[:60], _Y[:60]), (_X[60:], _Y[60:])
TRAINING = TrainingConfig(epochs=1, batch_size=20)


def _dp_study(ledger, protect="validation", **kw):
    r"""A DP-SGD study; ``protect="validation"``: DP-GIBO with every run charged on its own (short settings),
    else ``tune``'s private selection over whole training runs (``None``: ``tune``'s default, ``"both"``)."""
    settings = {**FAST, "num_iterations": 2} if protect == "validation" else {"mean_trials": 3.0}
    return create_private_study(
        epsilon=3.0,
        num_users=N,
        dp_sgd=DPSGDConfig(noise_multiplier=1.0),
        training=TRAINING,
        training_data=TRAIN,
        ledger=ledger,
        delta=1e-3,
        seed=3,
        **({} if protect is None else {"protect": protect}),
        **{**settings, **kw},
    )


@pytest.mark.privacy_fast
def test_dp_sgd_trials_are_charged_before_they_train_one_run_per_evaluation():
    ledger = PrivacyLedger()
    seen = []

    def dp_objective(trial):
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        before = len(ledger.training.runs())
        model = trial.train_dp_sgd(lambda: nn.Linear(4, 2), optimizer_kwargs={"lr": lr})
        seen.append(before)
        with torch.no_grad():
            return F.cross_entropy(model(VALIDATION[0]), VALIDATION[1], reduction="none")

    study = _optimize(_dp_study(ledger), dp_objective)
    assert study.ledger is ledger and len(seen) == len(ledger.training.runs()) > 0
    assert all(before >= i + 1 for i, before in enumerate(seen))  # each run recorded before it trained
    run = DPSGDRun(*planned_dp_run(60, TRAINING, DPSGDConfig(noise_multiplier=1.0)))
    assert ledger.training.history() == [tuple(run)] * len(seen)
    training = study.result.statement.to_dict()
    report = study.guarantee_report()
    assert "training records (add or remove one record)" in report and f"{len(seen)} DP-SGD run(s)" in report
    expected = composed_training_epsilon([tuple(run)] * len(seen), 1e-3, "rdp", ledger.prv_eps_error)
    assert f"(epsilon = {expected:.4g}, delta = 0.001)" in report, (report, training)


def test_a_dp_trial_trains_exactly_once_and_only_in_a_dp_study():
    def no_training(trial):
        trial.suggest_float("lr", 1e-3, 1.0, log=True)
        return torch.zeros(N)

    def twice(trial):
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        trial.train_dp_sgd(lambda: nn.Linear(4, 2), optimizer_kwargs={"lr": lr})
        trial.train_dp_sgd(lambda: nn.Linear(4, 2), optimizer_kwargs={"lr": lr})
        return torch.zeros(N)

    def trains(trial):
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        trial.train_dp_sgd(lambda: nn.Linear(4, 2), optimizer_kwargs={"lr": lr})
        return torch.zeros(N)

    with pytest.raises(RuntimeError, match="did not train through trial.train_dp_sgd"):
        _optimize(_dp_study(PrivacyLedger()), no_training)
    with pytest.raises(RuntimeError, match="called twice"):
        _optimize(_dp_study(PrivacyLedger()), twice)
    for wrong in (no_training, twice):  # tune's selection over whole runs withholds which trial failed, and why
        with pytest.raises(RuntimeError, match="failed during the hidden trials of a private selection"):
            _optimize(_dp_study(PrivacyLedger(), None), wrong)
    with pytest.raises(ValueError, match="this study has no DP-SGD training"):
        _optimize(_study(), trains)


def test_importing_the_integrations_package_imports_no_optuna():
    loaded = _loaded_after("import botorch_dp.integrations")
    assert sorted(m for m in loaded if m == "optuna" or m.startswith("optuna.")) == []


def test_the_how_to_pages_private_wine_run_is_the_script_and_runs(tmp_path, monkeypatch):
    page = "docs/how-to/optuna.md"
    (code,) = [code for _, above, code in python_blocks(page) if RUN_IN.search(above)]
    script = (ROOT / "scripts" / "optuna_wine_private.py").read_text("utf-8")
    assert script.split('"""', 2)[2].strip() == code.strip()  # the page shows the script
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, page, "exec"), namespace)
    study = namespace["study"]
    # the default rule on an integer and a categorical: private random search, its winner only
    assert set(study.best_params) == {"lr", "width", "activation"} and len(study.trials) == 1
    assert study.result.method == "private_random_search" and study.best_value is not None
    assert 3.0 * (1 - 1e-4) < study.guarantee.epsilon <= 3.0 + 1e-12  # calibrated on the ledger's grid, never above
    assert 8 <= study.best_params["width"] <= 64 and isinstance(study.best_params["width"], int)
