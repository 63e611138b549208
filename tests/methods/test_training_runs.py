"""Tests for botorch_dp/methods/training_runs.py and selection_accounting.py: private selection over
whole DP-SGD runs charges the whole procedure once, before the first trial, with a curve an independent
computation (Opacus's compute_rdp and Papernot & Steinke's theorems written out here) reproduces, meets its
target ε, releases the best trial only, and shows nothing of its number of trials."""

import functools
import json
import math
import re

import numpy as np
import pytest
import torch
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.baselines.selection import HiddenTrialError
from botorch_dp.methods.training_runs import NonPrivateTrainingTrials, select_training_runs
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyBudgetExceeded, PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.training.cover import TrainingCover
from botorch_dp.training.selection_accounting import calibrate_selection_noise, selection_rdp_curve, trial_rdp_curve
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace, TorchModelTuningObjective

ORDERS = np.asarray(TRAINING_RDP_ORDERS)
DELTA = 1e-5
SPACE = SearchSpace([Hyperparameter("lr", 0.05, 0.5, log_scale=True), Hyperparameter("momentum", 0.0, 0.9)])
# 200 training records, batch 20: Opacus's Poisson rate q = 1/10, 10 steps per epoch
TRAINING = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(8,), seed=0)


@pytest.fixture(scope="module")
def small(data):
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


class CountingObjective(TorchModelTuningObjective):
    r"""Notes the ledger's training and validation records each time a trial starts (``seen``), and
    counts the plain calls ``objective(X)`` (``calls``: DP-GIBO's evaluations, none in a selection)."""

    def train_covered(self, hyperparameters, cover, *, noise_seed=None):
        self.seen.append((len(self.ledger.training.records()), len(self.ledger.validation.records())))
        return super().train_covered(hyperparameters, cover, noise_seed=noise_seed)

    def __call__(self, X):
        self.calls += 1
        return super().__call__(X)


def objective(small, space=SPACE, cls=CountingObjective, **kwargs):
    r"""The counting objective, DP-SGD trained (``σ = 1``) unless ``dp_sgd=None`` is given."""
    obj = cls(small, space, training=TRAINING, **{"dp_sgd": DPSGDConfig(noise_multiplier=1.0), **kwargs})
    obj.seen, obj.calls = [], 0
    return obj


# ---------------------------------------------------------------------- the independent computation
@functools.cache
def opacus_curve(sigma, rate, steps):
    values = compute_rdp(q=rate, noise_multiplier=sigma, steps=steps, orders=ORDERS)
    return np.where(np.isfinite(values), values, np.inf)


def ps_tnb_geometric(base, mean_trials):
    r"""P&S Thm. 2 with η = 1 (γ = 1/E[K]), the λ̂-minimum over λ̂ ∈ {1} ∪ grid."""
    log_inv_gamma = math.log(mean_trials)
    hat = min(log_inv_gamma, float(np.min((1 - 1 / ORDERS) * base + log_inv_gamma / ORDERS)))
    return base + 2.0 * hat + math.log(mean_trials) / (ORDERS - 1)


def ps_poisson(base, mean):
    r"""P&S Thm. 6: ε(λ) + m δ̂ + log m/(λ − 1), δ̂ at e^{ε̂} = 1 + 1/(λ − 1) from the base curve (CKS Prop. 12
    and the total-variation bound)."""
    out = []
    for lam, value in zip(ORDERS, base, strict=True):
        eps_hat = math.log1p(1 / (lam - 1))
        log_cks = (ORDERS - 1) * (base - eps_hat + np.log1p(-1 / ORDERS)) - np.log(ORDERS)
        log_tv = 0.5 * np.log1p(-np.exp(-base))
        delta_hat = min(1.0, float(np.exp(np.min(np.minimum(log_cks, log_tv)))))
        out.append(value + mean * delta_hat + math.log(mean) / (lam - 1))
    return np.asarray(out)


def epsilon_at(curve, delta):
    return max(0.0, float(np.min(curve + np.log1p(-1 / ORDERS) - (math.log(delta) + np.log(ORDERS)) / (ORDERS - 1))))


# ---------------------------------------------------------------------- the charge
@pytest.mark.parametrize("distribution", ["tnb", "poisson"])
def test_one_record_before_the_first_trial_none_after_and_the_curve_is_recomputed(small, distribution):
    obj = objective(small)
    result = select_training_runs(
        obj,
        epsilon=3.0,
        delta=DELTA,
        mean_trials=3,
        distribution=distribution,
        seed=2,
        non_private_trials=True,
        accounting="rdp",
    )
    assert result.num_trials >= 1
    # exactly one training record exists when each trial starts, and still one afterwards
    assert obj.seen == [(1, 0)] * result.num_trials
    records = obj.ledger.training.records()
    assert len(records) == 1 and obj.num_trainings == 0 and obj.runs == []
    record = records[0]
    assert "private selection over E[K] = 3 DP-SGD training runs" in record.event.description
    # the curve recorded equals Opacus + the theorem, written out here
    sigma = result.guarantee["training"].details["noise_multiplier"]
    base = opacus_curve(sigma, 0.1, 10)
    expected = ps_tnb_geometric(base, 3) if distribution == "tnb" else ps_poisson(base, 3)
    np.testing.assert_allclose(record.event.rdp, expected, rtol=1e-9)
    # the selection's ε at δ is at most the target, and within 1% of it, read from the ledger
    epsilon = obj.ledger.training.epsilon(DELTA)
    assert 0.99 * 3.0 <= epsilon <= 3.0
    assert epsilon == pytest.approx(epsilon_at(expected, DELTA), rel=1e-12)
    assert result.guarantee["training"].epsilon == pytest.approx(epsilon, rel=1e-12)


@pytest.mark.parametrize("target", [1.0, 8.0])
def test_the_selection_epsilon_is_the_target_at_other_budgets(target):
    sigma = calibrate_selection_noise(target_epsilon=target, target_delta=DELTA, shapes=[(0.1, 10)], mean_trials=10)
    epsilon = epsilon_at(ps_tnb_geometric(opacus_curve(sigma, 0.1, 10), 10), DELTA)
    assert 0.99 * target <= epsilon <= target


def test_a_budget_that_cannot_hold_the_selection_refuses_before_any_trial(small):
    obj = objective(small, ledger=PrivacyLedger(training_epsilon_budget=2.0, training_delta=DELTA))
    with pytest.raises(PrivacyBudgetExceeded):
        select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=1)
    assert obj.seen == [] and obj.ledger.training.records() == []


# ---------------------------------------------------------------------- the release
def test_the_winner_is_the_trial_with_the_best_score(small):
    obj = objective(small)
    result = select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=3, non_private_trials=True)
    assert isinstance(result, NonPrivateTrainingTrials) and result.num_trials >= 2  # a real choice
    scores = [t["score"] for t in result.trials]
    best = int(np.argmin(scores))
    assert result.released_score == scores[best]
    assert result.hyperparameters == result.trials[best]["hyperparameters"]
    # protect="training": the score is the plain mean validation loss of the released model
    assert result.released_score == pytest.approx(float(obj.per_user_scores(result.model).mean()), rel=1e-12)
    assert "NON-PRIVATE" in repr(result) and "NON-PRIVATE" not in repr(result.release)


def _masked(text):
    text = re.sub(r"[0-9a-f]{32}", "ID", text)
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)


def test_the_number_of_trials_is_hidden(small):
    counts = {}
    for seed in (1, 2, 3, 4, 5, 6, 7):
        k = select_training_runs(
            objective(small), epsilon=3.0, delta=DELTA, mean_trials=3, seed=seed, non_private_trials=True
        ).num_trials
        counts.setdefault(k, seed)
        if len(counts) == 2:
            break
    assert len(counts) == 2, counts  # two seeds whose K differ
    outputs = []
    for seed in counts.values():
        obj = objective(small)
        result = select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=seed)
        assert type(result).__name__ == "TrainingSelectionResult" and not hasattr(result, "num_trials")
        outputs.append(
            (
                _masked(repr(result)),
                _masked(json.dumps(result.to_json(), sort_keys=True)),
                len(obj.ledger.training.records()),
            )
        )
    assert outputs[0] == outputs[1]
    assert not re.search(r"num_trials|num_evaluations|\bK\s*=\s*\d", outputs[0][1])


def test_an_error_in_a_trial_names_no_trial(small):
    obj = objective(small)

    def sampler(generator):
        return {"lr": 5.0, "momentum": 0.5}  # outside the space: refused inside the hidden trials

    with pytest.raises(HiddenTrialError) as info:
        select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=1, sampler=sampler)
    assert "lr" not in str(info.value)


# ---------------------------------------------------------------------- both protected sets
def test_protect_both_charges_the_validation_users_up_front(small):
    r"""With ``accounting="rdp"`` the scores' selection is recorded as its RDP curve (the profile's
    ``(ε, δ)`` charge: ``test_training_runs_profile``)."""
    from botorch_dp.privacy.analysis.private_selection import private_selection_rdp

    obj = objective(small)
    result = select_training_runs(
        obj, epsilon=3.0, delta=DELTA, mean_trials=3, protect="both", score="error", seed=2, non_private_trials=True,
        accounting="rdp",
    )  # fmt: skip
    assert obj.seen == [(1, 1)] * result.num_trials  # both records before the first trial
    (record,) = obj.ledger.validation.records()
    mu = result.guarantee["validation"].details["per_trial_mu"]
    expected = [private_selection_rdp(a, per_trial_mu=mu, mean_trials=3) for a in TRAINING_RDP_ORDERS]
    np.testing.assert_allclose(record.event.rdp, expected, rtol=1e-12)
    assert 0.99 * 3.0 <= obj.ledger.validation.epsilon(DELTA) <= 3.0
    assert 0.99 * 3.0 <= obj.ledger.training.epsilon(DELTA) <= 3.0
    assert set(result.guarantee) == {"training", "validation"} and result.not_protected == {}
    # the released score is noisy: not the winner's plain error rate
    assert result.released_score != result.trials[int(np.argmin([t["score"] for t in result.trials]))]["plain_score"]


# ---------------------------------------------------------------------- heterogeneous trials
HETEROGENEOUS = SearchSpace(
    [
        Hyperparameter("lr", 0.05, 0.5, log_scale=True),
        Integer("epochs", 1, 2),
        Integer("batch_size", 25, 40),
        Categorical("max_grad_norm", [0.5, 1.0]),
    ]
)


def test_the_reference_curve_bounds_every_trial_of_a_heterogeneous_space(small):
    obj = objective(small, HETEROGENEOUS)
    assert obj.training_routes() == ["epochs", "batch_size", "max_grad_norm"]
    shapes = obj.possible_run_shapes()
    reference = trial_rdp_curve(2.0, shapes)
    for epochs in (1, 2):
        for batch_size in range(25, 41):
            config, dp = obj.trial_settings(
                {"lr": 0.1, "epochs": epochs, "batch_size": batch_size, "max_grad_norm": 1.0}, 2.0
            )
            rate, steps = 1 / math.ceil(200 / batch_size), epochs * math.ceil(200 / batch_size)
            assert (config.epochs, config.batch_size, dp.noise_multiplier) == (epochs, batch_size, 2.0)
            assert np.all(opacus_curve(2.0, rate, steps) <= reference * (1 + 1e-12)), (epochs, batch_size)
    # the maximum is attained: every order's value is some trial's
    curves = np.stack([opacus_curve(2.0, q, t) for q, t in shapes])
    np.testing.assert_array_equal(curves.max(0), reference)


def test_a_selection_over_a_heterogeneous_space_is_charged_once_at_the_target(small):
    obj = objective(small, HETEROGENEOUS)
    result = select_training_runs(
        obj, epsilon=3.0, delta=DELTA, mean_trials=2, seed=1, non_private_trials=True, accounting="rdp"
    )
    assert obj.seen == [(1, 0)] * result.num_trials
    assert len(obj.ledger.training.records()) == 1 and 0.99 * 3 <= obj.ledger.training.epsilon(DELTA) <= 3
    assert {"epochs", "batch_size", "max_grad_norm"} <= set(result.hyperparameters)
    sigma = result.guarantee["training"].details["noise_multiplier"]
    reference = np.max([opacus_curve(sigma, q, t) for q, t in obj.possible_run_shapes()], axis=0)
    np.testing.assert_allclose(obj.ledger.training.records()[0].event.rdp, ps_tnb_geometric(reference, 2), rtol=1e-9)


def test_the_charged_path_refuses_training_hyperparameters(small):
    obj = objective(small, HETEROGENEOUS).with_choice({"max_grad_norm": 1.0})
    with pytest.raises(ValueError, match="set the training run itself"):
        obj(torch.full((1, 3), 0.5, dtype=torch.float64))
    assert obj.ledger.training.records() == []


def test_train_covered_refuses_without_a_covering_record(small):
    obj = objective(small)
    point = {"lr": 0.1, "momentum": 0.5}
    reference = tuple(trial_rdp_curve(1.0, obj.possible_run_shapes()).tolist())
    with pytest.raises(RuntimeError, match="no training record"):  # nothing recorded under the id
        obj.train_covered(point, TrainingCover(obj.ledger, "nothing", reference, 1.0))
    cover = TrainingCover(obj.ledger, "x", reference, 1.0)
    cover.close()
    with pytest.raises(RuntimeError, match="open TrainingCover"):
        obj.train_covered(point, cover)
    # a run noisier than the reference is covered; a less noisy one is not
    curve = selection_rdp_curve(np.asarray(reference), mean_trials=2)
    from botorch_dp.privacy.ledger import TrainingMechanism

    with obj.ledger.charge_training({"sel": TrainingMechanism("a test selection", tuple(curve))}) as meter:
        meter.record("sel")
    assert obj.train_covered(point, TrainingCover(obj.ledger, "sel", reference, 2.0)) is not None
    with pytest.raises(RuntimeError, match="above the cover's reference"):
        obj.train_covered(point, TrainingCover(obj.ledger, "sel", reference, 0.5))
    assert obj.train_covered.__func__ is not None and len(obj.ledger.training.records()) == 1


def test_non_finite_opacus_values_are_read_as_inf(monkeypatch):
    import botorch_dp.privacy.accountants as accountants

    real = accountants.dp_sgd_rdp

    def overflowing(**kwargs):
        values = real(**kwargs).copy()
        values[-3:] = np.nan  # what compute_rdp gives at large orders for some (q, σ, T)
        return values

    monkeypatch.setattr(accountants, "dp_sgd_rdp", overflowing)
    curve = trial_rdp_curve(3.0, [(0.0625, 240)])
    assert np.all(np.isinf(curve[-3:])) and np.all(np.isfinite(curve[:-3]))
    for distribution in ("truncated_negative_binomial", "poisson"):
        selection = selection_rdp_curve(curve, mean_trials=10, distribution=distribution)
        assert not np.any(np.isnan(selection)) and np.isfinite(epsilon_at(selection, DELTA))


def test_a_poisson_selection_without_trials_releases_nothing(small):
    for seed in range(20):
        obj = objective(small)
        result = select_training_runs(
            obj, epsilon=3.0, delta=DELTA, mean_trials=1.5, distribution="poisson", seed=seed, non_private_trials=True
        )
        if result.num_trials == 0:
            break
    assert result.num_trials == 0 and obj.seen == []
    release = result.release
    assert (release.hyperparameters, release.model, release.released_score) == (None, None, None)
    assert len(obj.ledger.training.records()) == 1  # charged all the same: K = 0 is one of its outcomes


def test_padding_to_max_trials_runs_more_trials_and_releases_the_same(small):
    plain, padded = objective(small), objective(small)
    result = select_training_runs(plain, epsilon=3.0, delta=DELTA, mean_trials=3, seed=2, non_private_trials=True)
    maximum = result.num_trials + 6
    again = select_training_runs(padded, epsilon=3.0, delta=DELTA, mean_trials=3, seed=2, max_trials=maximum)
    assert len(padded.seen) == maximum and len(plain.seen) == result.num_trials
    assert (again.hyperparameters, again.released_score) == (result.hyperparameters, result.released_score)
    assert again.guarantee["training"].details["p_more_than_max_trials"] > 0.0


@pytest.mark.parametrize(
    "hyperparameter",
    [Hyperparameter("epochs", 1.0, 3.0), Hyperparameter("max_grad_norm", 0.0, 1.0), Categorical("batch_size", [0, 20])],
)
def test_a_training_hyperparameter_that_cannot_be_bounded_is_refused_before_anything(small, hyperparameter):
    obj = objective(small, SearchSpace([Hyperparameter("lr", 0.05, 0.5, log_scale=True), hyperparameter]))
    with pytest.raises(ValueError, match=hyperparameter.name):
        select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=3, seed=1)
    assert obj.seen == [] and obj.ledger.training.records() == []


def test_train_covered_under_a_profile_charge_checks_the_run_shapes(small):
    from botorch_dp.privacy.ledger import ApproximateDP

    obj = objective(small)
    point = {"lr": 0.1, "momentum": 0.5}
    (shape,) = obj.possible_run_shapes()  # (0.1, 10)
    reference = tuple(trial_rdp_curve(1.0, [shape]).tolist())
    with obj.ledger.charge_training({"sel": ApproximateDP("a selection at its profile bound", 2.0, DELTA)}) as meter:
        meter.record("sel")
    with pytest.raises(RuntimeError, match="no training record"):  # an (ε, δ) record names no run shapes
        obj.train_covered(point, TrainingCover(obj.ledger, "sel", reference, 1.0))
    with pytest.raises(RuntimeError, match="dominated by none"):  # the bound was over fewer steps
        obj.train_covered(point, TrainingCover(obj.ledger, "sel", reference, 1.0, ((shape[0], shape[1] - 1),)))
    assert obj.train_covered(point, TrainingCover(obj.ledger, "sel", reference, 1.0, (shape,))) is not None
    assert len(obj.ledger.training.records()) == 1
