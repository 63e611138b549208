"""Cheap tuning of a DP-SGD model: a subsample tuning phase or a public proxy, then one final run."""

import math
import warnings

import numpy as np
import pytest
import torch
from opacus.accountants.analysis.rdp import compute_rdp

from botorch_dp.methods import cheap_tuning as ct
from botorch_dp.methods.cheap_plan import DEFAULT_TUNING_SHARE
from botorch_dp.methods.cheap_tuning import draw_poisson_subset, tune_on_proxy_then_train, tune_on_subsample
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, DPSGDRun, PrivacyLedger, TrainingMechanism
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective
from tests.methods.test_cheap_plan import _independent_phase_curve

EPS, DELTA = 3.0, 1e-5


def _split(n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()


@pytest.fixture
def objective():
    (Xt, yt), (Xv, yv) = _split(160, 0), _split(40, 1)
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    calls = []

    def sgd(params, **kwargs):
        calls.append(dict(kwargs))
        return torch.optim.SGD(params, **kwargs)

    training = TrainingConfig(epochs=1, batch_size=20, hidden_sizes=(4,))
    obj = TorchModelTuningObjective(
        (Xt, yt, Xv, yv), space, optimizer=sgd, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0)
    )
    obj.optimizer_calls = calls
    return obj


def _proxy():
    (Xp, yp), (Xv, yv) = _split(80, 5), _split(30, 6)
    return (Xp, yp, Xv, yv)


def test_subsample_ledger_holds_one_amplified_phase_and_one_final_run(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=3, seed=0)
    ledger = objective.ledger
    plan = result.settings["plan"]
    records = ledger.training.records()
    assert len(records) == 2  # the phase (one mechanism, before any trial) and the final run: no per-trial record
    phase, final = records[0].event, records[1].event
    assert isinstance(phase, TrainingMechanism) and records[0].run_id == result.settings["phase_run_id"]
    assert isinstance(final, DPSGDRun) and records[1].run_id == "eval-0000-final"
    q, steps = 1 / 8, 8  # 160 records, batch 20: k = 8 batches, one epoch
    expected = _independent_phase_curve(plan.trial_noise_multiplier, q, steps, 3, 0.3)
    assert np.allclose(phase.rdp, expected, rtol=1e-9)
    assert final == DPSGDRun(plan.final_noise_multiplier, q, steps)
    final_curve = np.asarray(
        compute_rdp(q=q, noise_multiplier=plan.final_noise_multiplier, steps=steps, orders=TRAINING_RDP_ORDERS)
    )
    total = rdp_curve_epsilon(expected + final_curve, TRAINING_RDP_ORDERS, DELTA)[0]
    assert ledger.training.epsilon(DELTA) == pytest.approx(total, rel=1e-9)
    assert EPS * 0.99 <= total <= EPS  # the whole budget, never more
    assert result.guarantee["training records"] == (pytest.approx(total, rel=1e-9), DELTA)
    # the amplification is real: the same trials without the subset would spend more
    assert plan.tuning_epsilon < plan.tuning_epsilon_unamplified


def test_the_subset_is_drawn_once_and_every_trial_trains_on_it(objective, monkeypatch):
    drawn, trained_sizes = [], []
    real_draw, real_rows = ct.draw_poisson_subset, ct._with_rows

    def counting_draw(*args, **kwargs):
        drawn.append(real_draw(*args, **kwargs))
        return drawn[-1]

    def spy_rows(data, rows):
        trained_sizes.append(rows.clone())
        return real_rows(data, rows)

    monkeypatch.setattr(ct, "draw_poisson_subset", counting_draw)
    monkeypatch.setattr(ct, "_with_rows", spy_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=4, seed=0)
    assert len(drawn) == 1
    assert len(trained_sizes) == 1 and torch.equal(trained_sizes[0], drawn[0])  # one subset for all 4 trials


def test_the_subset_size_is_binomial_and_each_record_is_in_it_with_probability_gamma():
    m, gamma, draws = 400, 0.3, 400
    masks = np.zeros((draws, m))
    for s in range(draws):
        masks[s, draw_poisson_subset(m, gamma, seed=s).numpy()] = 1
    sizes = masks.sum(1)
    assert abs(sizes.mean() - m * gamma) < 4 * math.sqrt(m * gamma * (1 - gamma) / draws)
    assert sizes.var(ddof=1) == pytest.approx(m * gamma * (1 - gamma), rel=0.2)
    per_record = masks.mean(0)  # each record: Binomial(draws, γ)/draws
    assert np.all(np.abs(per_record - gamma) < 5 * math.sqrt(gamma * (1 - gamma) / draws))


def test_the_final_run_carries_the_chosen_lr_and_the_trials_shape(objective):
    configs = [{"lr": 0.002}, {"lr": 0.05}, {"lr": 0.4}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=configs)
    plan = result.settings["plan"]
    lrs = [c["lr"] for c in objective.optimizer_calls]
    assert len(lrs) == 4  # three trials, then the final run
    assert lrs[:3] == pytest.approx([0.002, 0.05, 0.4])
    assert lrs[3] == pytest.approx(result.hyperparameters["lr"])  # the rule: the lr carried unchanged
    assert any(result.hyperparameters["lr"] == pytest.approx(lr) for lr in lrs[:3])
    final = objective.ledger.training.records()[-1].event
    assert (final.sample_rate, final.steps) == (plan.sample_rate, plan.steps)  # trials' q and steps
    assert final.noise_multiplier == plan.final_noise_multiplier != plan.trial_noise_multiplier
    assert "carried unchanged" in result.carried


def test_the_proxy_path_records_nothing_for_tuning(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=3, seed=0)
    records = objective.ledger.training.records()
    assert [r.run_id for r in records] == ["eval-0000-final"]
    sigma = result.settings["final_noise_multiplier"]
    assert records[0].event == DPSGDRun(sigma, 1 / 8, 8)
    assert objective.ledger.training.epsilon(DELTA) <= EPS
    assert "no private data" in result.guarantee_report()
    # the centre of the space and the three random points, 3 proxy trainings each, the 3 best 3 more times
    # each (methods.proxy_search), then the one final run
    assert result.settings["search"]["proxy_trainings"] == 4 * 3 + 3 * 3
    assert len(objective.optimizer_calls) == 4 * 3 + 3 * 3 + 1
    assert objective.optimizer_calls[-1]["lr"] == pytest.approx(result.hyperparameters["lr"])


def _spy_trainings(monkeypatch):
    r"""Every DP-SGD training's (training features, noise seed, noise multiplier), in order."""
    from botorch_dp.objectives import torch_classifier

    seen, real = [], torch_classifier.train_planned_run

    def spy(model_fn, X, y, training, **kwargs):
        seen.append((X, kwargs["noise_seed"], kwargs["dp_sgd"].noise_multiplier))
        return real(model_fn, X, y, training, **kwargs)

    monkeypatch.setattr(torch_classifier, "train_planned_run", spy)
    return seen


def test_the_proxy_search_reads_no_private_record_before_the_one_final_run(objective, monkeypatch):
    seen = _spy_trainings(monkeypatch)
    proxy = _proxy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(
            objective, None, proxy, epsilon=EPS, delta=DELTA, tuner=2, seed=3, repeats=2, finalists=2
        )
    assert len(seen) == 3 * 2 + 2 * 2 + 1  # (centre + 2 random) x 2, 2 finalists x 2, the final run
    *search, final = seen
    assert all(torch.equal(X, proxy[0]) for X, _, _ in search)  # the proxy's public records only
    assert torch.equal(final[0], objective.data.X_train)  # the private records: the last training, once
    sigma = result.settings["final_noise_multiplier"]
    assert final[2] == sigma and all(s == pytest.approx(sigma * 80 / 160, rel=1e-12) for _, _, s in search)
    # every proxy training draws its own noise stream (seeded: public data), the private run OS entropy
    seeds = [noise_seed for _, noise_seed, _ in search]
    assert None not in seeds and len(set(seeds)) == len(seeds) and final[1] is None
    assert [r.run_id for r in objective.ledger.training.records()] == ["eval-0000-final"]


def test_the_proxy_search_is_reproducible_from_its_seed_and_fresh_without_one(objective, monkeypatch):
    seen = _spy_trainings(monkeypatch)
    for seed in (3, 3, 4, None):
        tune_on_proxy_then_train(
            objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=1, seed=seed, repeats=2, finalists=1
        )
    runs = [[s for _, s, _ in seen[j * 5 : j * 5 + 4]] for j in range(4)]  # 2 candidates x 2, no final round
    assert runs[0] == runs[1] and not set(runs[0]) & set(runs[2]) and runs[3] == [None] * 4


def test_the_public_defaults_are_candidates_and_win_when_they_are_best(objective):
    given = [{"lr": 0.2}, {"lr": 0.001}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_proxy_then_train(
            objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=[{"lr": 0.0011}], defaults=given, finalists=1
        )
    assert [c["lr"] for c in result.settings["configurations"]] == pytest.approx([0.2, 0.001, 0.0011])
    lrs = [c["lr"] for c in objective.optimizer_calls]
    assert lrs[:9] == pytest.approx([0.2] * 3 + [0.001] * 3 + [0.0011] * 3)  # 3 repeats each, defaults first
    assert result.hyperparameters["lr"] == pytest.approx(0.2)  # one epoch: the tiny steps learn nothing
    means = result.settings["search"]["screening_means"]
    assert means[0] < min(means[1:])
    centre = tune_on_proxy_then_train(objective, None, _proxy(), epsilon=EPS, delta=DELTA, tuner=1, seed=0)
    assert centre.settings["configurations"][0]["lr"] == pytest.approx(math.sqrt(1e-3 * 1.0), rel=1e-9)


def test_a_proxy_that_shares_a_training_record_is_refused_before_anything_is_recorded(objective):
    Xp, yp, Xv, yv = _proxy()
    Xp[0], yp[0] = objective.data.X_train[3], objective.data.y_train[3]
    with pytest.raises(ValueError, match="proxy shares 1 training record"):
        tune_on_proxy_then_train(objective, None, (Xp, yp, Xv, yv), epsilon=EPS, delta=DELTA, tuner=2, seed=0)
    assert objective.ledger.training.records() == []


def test_the_split_is_stated_default_or_given_or_simulated(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = tune_on_subsample(objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0)
        given = tune_on_subsample(
            objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0, tuning_share=0.3
        )
    assert f"tau = {DEFAULT_TUNING_SHARE:g}" in default.split and "public default" in default.split
    assert "tau = 0.3" in given.split and "chosen by given" in given.split
    assert default.settings["plan"].tuning_share == DEFAULT_TUNING_SHARE
    assert "split: tuning share" in default.guarantee_report()


def test_protect_both_noises_the_scores_and_states_the_validation_guarantee(objective):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(
            objective, epsilon=EPS, delta=DELTA, subsample_fraction=0.3, tuner=2, seed=0, protect="both", score_mu=0.5
        )
    from botorch_dp.privacy.analysis.gdp import gdp_epsilon

    assert result.guarantee["validation users"] == (pytest.approx(gdp_epsilon(0.5, DELTA)), DELTA)
    assert objective.ledger.validation.epsilon(DELTA) == pytest.approx(gdp_epsilon(0.5, DELTA))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 2.0}, "delta"),
        ({"subsample_fraction": 1.5}, "subsample_fraction"),
        ({"subsample_fraction": 0.01}, "subsample_fraction"),
        ({"tuning_share": 0.0}, "tuning_share"),
        ({"tuner": 0}, "tuner"),
        ({"tuner": ["lr"]}, "tuner"),
        ({"protect": "validation"}, "protect"),
        ({"protect": "both"}, "score_mu"),
    ],
)
def test_bad_input_is_refused_by_name_before_anything_is_recorded(objective, kwargs, name):
    args = {"epsilon": EPS, "delta": DELTA, "subsample_fraction": 0.3, "tuner": 2, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=name):
        tune_on_subsample(objective, **args)
    assert objective.ledger.training.records() == []


def test_an_objective_without_dp_sgd_is_refused():
    (Xt, yt), (Xv, yv) = _split(40, 0), _split(10, 1)
    plain = TorchModelTuningObjective((Xt, yt, Xv, yv), SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)]))
    with pytest.raises(ValueError, match="objective must be a TorchModelTuningObjective built with dp_sgd"):
        tune_on_subsample(plain, epsilon=EPS, delta=DELTA)
    with pytest.raises(ValueError, match="objective"):
        tune_on_proxy_then_train(plain, None, _proxy(), epsilon=EPS, delta=DELTA)
    assert isinstance(plain.ledger, PrivacyLedger) and plain.ledger.training.records() == []
