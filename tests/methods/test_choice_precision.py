r"""The precision of a training method's simulated choice (``methods.training_proxy.held_out_scores``;
issue 41): each scoring-half user's fold chooses on the proxy's other ``n_p - 1`` users, topped up with
the real run's extra sampling noise ``Σ̂ (1/n - 1/(n_p - 1))`` and its DP noise, so that on a proxy whose
fitting half is small (11 users) the simulated choice is as precise as the real run's on ``n`` users
(brute force, Gaussian per-user losses with a shared user effect), and the selection and the subsample
method simulate their choice at the objective's own ``n``."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from botorch_dp.methods import training_proxy as tp
from botorch_dp.methods.proxy_split import ProxySplit
from botorch_dp.methods.subsample_tuning import SubsampleTuningMethod
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.methods.training_selection import TrainingSelectionMethod
from tests.methods.method_helpers import TRAINING_SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny draws: a thread pool only adds its start-up time
    yield
    torch.set_num_threads(threads)


RISKS = torch.tensor([0.0, 0.25, 0.5, 0.75], dtype=torch.float64)  # the four models' true mean losses


def _proxy(n_p: int) -> TrainingProxy:
    r"""A proxy of ``n_p`` validation users whose losses the tests give directly (nothing trains)."""
    data = SimpleNamespace(y_val=torch.zeros(n_p), y_train=torch.zeros(10))
    return TrainingProxy(None, data, ProxySplit(0))


def _losses(generator: torch.Generator, users: int, draws: int = 1) -> torch.Tensor:
    r"""``draws x K x users`` Gaussian per-user losses around ``RISKS``: a shared user effect (correlation
    1/2 between models, as on shared validation users) and each model's own unit-variance part."""
    shared = torch.randn(draws, 1, users, generator=generator, dtype=torch.float64)
    own = torch.randn(draws, len(RISKS), users, generator=generator, dtype=torch.float64)
    return RISKS[:, None] + shared + own


def _choice_frequencies(choices: torch.Tensor) -> torch.Tensor:
    return torch.bincount(choices.reshape(-1), minlength=len(RISKS)).double() / choices.numel()


def _real(num_users: int, draws: int = 100_000) -> torch.Tensor:
    r"""Brute force: how often a run choosing by the mean over ``num_users`` fresh users picks each model."""
    losses = _losses(torch.Generator().manual_seed(7), num_users, draws)
    return _choice_frequencies(losses.mean(-1).argmin(-1))


def test_the_fold_scores_are_the_other_users_means_plus_the_closed_form_top_up_and_dp_noise():
    n_p, n, dp = 30, 8, 0.3
    proxy = _proxy(n_p)
    per_model = list(_losses(torch.Generator().manual_seed(1), n_p)[0])
    matrix = torch.stack(per_model)
    users = proxy.split.halves(n_p)[1]
    others = [v for v in range(n_p) if v != int(users[0])]
    means = matrix[:, others].mean(-1)
    # with the real run on at least n_p - 1 users and no DP noise: the fold's plain means, no noise
    exact = proxy.held_out_scores(per_model, n_p - 1, seed=0)[1]
    assert torch.allclose(exact[0], means, rtol=0, atol=1e-12)
    # otherwise fold 0's noise is N(0, Σ̂ (1/n - 1/(n_p - 1)) + dp² I) (Σ̂ over its 29 users): variances and
    # a difference's variance (the correlation) within 5 sd of a sample variance of 3000 draws (rel. sd √(2/N))
    noise = torch.stack([proxy.held_out_scores(per_model, n, seed=s, score_noise=dp)[1][0] for s in range(3000)])
    noise = noise - means
    expected = torch.cov(matrix[:, others]) * (1 / n - 1 / (n_p - 1)) + dp**2 * torch.eye(len(RISKS))
    tolerance = 5 * math.sqrt(2 / len(noise))
    assert noise.mean(0).abs().max() < 5 * math.sqrt(float(expected.diagonal().max()) / len(noise))
    assert torch.allclose(noise.var(0), expected.diagonal(), rtol=tolerance)
    difference = noise[:, 0] - noise[:, 1]
    assert float(difference.var()) == pytest.approx(float(expected[0, 0] + expected[1, 1] - 2 * expected[0, 1]),
                                                    rel=tolerance)  # fmt: skip


@pytest.mark.parametrize("num_users", [20, 8])
def test_on_a_proxy_with_an_11_user_fitting_half_the_choice_is_as_precise_as_the_real_runs(num_users):
    n_p, proxies = 22, 1500  # fitting half: 11 users; the real run chooses on num_users <= n_p - 1
    proxy = _proxy(n_p)
    assert len(proxy.split.halves(n_p)[0]) == 11
    losses = _losses(torch.Generator().manual_seed(3), n_p, proxies)
    simulated = torch.stack([proxy.held_out_choices(list(m), num_users, seed=j)[1] for j, m in enumerate(losses)])
    real = _real(num_users)
    # the proxies are independent; a proxy's 11 folds share most users, so count each proxy once: 5 sd of a
    # frequency over 1500 proxies is at most 5 * sqrt(1/4 / 1500) = 0.065; at n = 20 the old choice by the fitting
    # half alone (11 users) misses the real frequencies by more than that
    bound = 5 * math.sqrt(0.25 / proxies)
    assert (_choice_frequencies(simulated) - real).abs().max() < bound
    fitting_half = losses[:, :, proxy.split.halves(n_p)[0]].mean(-1).argmin(-1)
    if num_users == 20:
        assert (_choice_frequencies(fitting_half) - real).abs().max() > bound


def test_a_real_run_on_more_users_than_the_proxy_has_is_simulated_at_n_p_minus_1_users_not_the_half():
    n_p, proxies = 22, 1500
    proxy = _proxy(n_p)
    losses = _losses(torch.Generator().manual_seed(4), n_p, proxies)
    simulated = torch.stack([proxy.held_out_choices(list(m), 171, seed=j)[1] for j, m in enumerate(losses)])
    frequencies, bound = _choice_frequencies(simulated), 5 * math.sqrt(0.25 / proxies)
    assert (frequencies - _real(n_p - 1)).abs().max() < bound
    assert float(frequencies[0]) > float(_real(11)[0]) + bound  # the best model: chosen more often than by 11 users


def test_the_selection_and_the_subsample_method_simulate_their_choice_at_the_objectives_own_users(
    training_objective, monkeypatch
):
    seen = []

    def spy(self, per_model, num_users, seed, **kwargs):
        seen.append(num_users)
        return self.split.halves(self.num_proxy_users)[1], torch.zeros(len(self.split.halves(30)[1]), dtype=torch.long)

    monkeypatch.setattr(tp.TrainingProxy, "held_out_choices", spy)
    monkeypatch.setattr(tp.TrainingProxy, "copy", lambda self, sigma, seed, rows=None: None)
    monkeypatch.setattr(tp.TrainingProxy, "losses", lambda self, copy, config: torch.full((30,), 2.0))
    proxy = TrainingProxy(training_objective, _proxy_data(), ProxySplit(0))
    for method in (
        TrainingSelectionMethod(TRAINING_SPACE, 3.0, 1e-5, 2.0, "training"),
        SubsampleTuningMethod(TRAINING_SPACE, 3.0, 1e-5, "training", num_configurations=2, subsample_fraction=0.5),
    ):
        assert method.simulate_training(proxy, seed=0) == pytest.approx(2.0)
    assert seen == [training_objective.num_users] * 2 == [40, 40]


def test_the_subsample_method_trains_one_final_per_chosen_configuration_and_each_user_scores_its_own(
    training_objective, monkeypatch
):
    from botorch_dp.methods.training_proxy import random_configurations

    trained = []

    def losses(self, copy, config):  # a model's loss at every user: its configuration's first coordinate
        trained.append(float(config[1][0]))
        return torch.full((30,), float(config[1][0]), dtype=torch.float64)

    proxy = TrainingProxy(training_objective, _proxy_data(), ProxySplit(0))
    users = proxy.split.halves(30)[1]
    picks = torch.arange(len(users)) % 2  # the folds alternate between configurations 0 and 1 (of 3)
    monkeypatch.setattr(tp.TrainingProxy, "held_out_choices", lambda self, *a, **k: (users, picks))
    monkeypatch.setattr(tp.TrainingProxy, "copy", lambda self, sigma, seed, rows=None: None)
    monkeypatch.setattr(tp.TrainingProxy, "losses", losses)
    method = SubsampleTuningMethod(TRAINING_SPACE, 3.0, 1e-5, "training", num_configurations=3, subsample_fraction=0.5)
    theta = [float(t[0]) for _, t in random_configurations(TRAINING_SPACE, 3, 0)]
    score = method.simulate_training(proxy, seed=0)
    assert trained == [*theta, theta[0], theta[1]]  # 3 trials, then one final each for configurations 0 and 1
    assert score == pytest.approx(float(torch.tensor(theta, dtype=torch.float64)[picks].mean()))
