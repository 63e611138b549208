"""Tests for botorch_dp.baselines.noisy_gd against closed-form optima and the noise calibration."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from botorch_dp.baselines import noisy_gradient_descent
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import HuberRegression, NormalLocation


def test_noisy_gd_without_noise_converges_to_sample_mean():
    problem = NormalLocation(dim=3, num_users=30, seed=0)
    res = noisy_gradient_descent(
        problem,
        problem.bounds,
        num_iterations=60,
        clip_bound=100.0,
        step_size=0.5,
        privacy_mu=math.inf,
        theta0=problem.default_theta0(),
    )
    assert res.guarantee is None
    # f(θ) = ½‖θ − x̄‖² + c, so each step halves the error: 2^-60 after 60 steps
    torch.testing.assert_close(res.theta, problem.optimum, atol=1e-12, rtol=0)
    assert res.history.iterates.shape == (61, 3) and res.num_evaluations == 60


def test_noisy_gd_without_noise_finds_huber_optimum():
    problem = HuberRegression(seed=0)
    # per-user gradients have norm <= c·sqrt(2), so B = 1.5 clips nothing
    res = noisy_gradient_descent(
        problem,
        problem.bounds,
        num_iterations=400,
        clip_bound=1.5,
        step_size=0.5,
        privacy_mu=math.inf,
        theta0=problem.default_theta0(),
    )
    torch.testing.assert_close(res.theta, problem.optimum, atol=1e-6, rtol=0)


def test_noisy_gd_noise_std_matches_2B_sqrtT_over_n_mu():
    n, d, T, B, mu = 50, 5, 400, 1.0, 2.0
    zero = lambda X: torch.zeros(X.shape[0], n, d, dtype=torch.float64)
    bounds = torch.tensor([[-1e6] * d, [1e6] * d], dtype=torch.float64)
    res = noisy_gradient_descent(zero, bounds, num_iterations=T, clip_bound=B, step_size=1e-3, privacy_mu=mu, seed=0)
    expected = 2 * B * math.sqrt(T) / (n * mu)  # = 0.4
    g = res.history.extras["released_gradients"]  # pure noise: T x d = 2000 draws
    assert res.history.extras["noise_std"] == pytest.approx(expected)
    # sample std of 2000 normals: standard error ≈ 0.4 / sqrt(4000) ≈ 0.0063
    assert float(g.std()) == pytest.approx(expected, rel=0.05)
    assert abs(float(g.mean())) < 4 * expected / math.sqrt(g.numel())
    assert res.guarantee.mu == mu
    assert res.guarantee.epsilon == pytest.approx(gdp_epsilon(mu, 1e-5))
    assert res.history.public


def test_noisy_gd_clips_per_user_gradients():
    n, d = 7, 3
    big = torch.tensor([10.0, 0.0, 0.0], dtype=torch.float64)
    oracle = lambda X: big.expand(X.shape[0], n, d)
    bounds = torch.tensor([[-100.0] * d, [100.0] * d], dtype=torch.float64)
    res = noisy_gradient_descent(
        oracle,
        bounds,
        num_iterations=2,
        clip_bound=0.5,
        step_size=1.0,
        privacy_mu=math.inf,
        theta0=torch.zeros(d, dtype=torch.float64),
    )
    torch.testing.assert_close(
        res.history.extras["released_gradients"][0], torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64)
    )
    torch.testing.assert_close(res.theta, torch.tensor([-1.0, 0.0, 0.0], dtype=torch.float64))


def test_noisy_gd_noise_is_from_os_entropy_unless_seeded():
    n, d = 10, 2
    zero = lambda X: torch.zeros(X.shape[0], n, d, dtype=torch.float64)
    bounds = torch.tensor([[-1e6] * d, [1e6] * d], dtype=torch.float64)
    kwargs = dict(num_iterations=5, clip_bound=1.0, step_size=1e-3, privacy_mu=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns
        a = noisy_gradient_descent(zero, bounds, **kwargs)
        b = noisy_gradient_descent(zero, bounds, **kwargs)
    assert not torch.equal(a.history.extras["released_gradients"], b.history.extras["released_gradients"])
    with pytest.warns(PrivacyWarning, match="reproducible"):
        c = noisy_gradient_descent(zero, bounds, seed=11, **kwargs)
    with pytest.warns(PrivacyWarning):
        e = noisy_gradient_descent(zero, bounds, seed=11, **kwargs)
    assert torch.equal(c.history.extras["released_gradients"], e.history.extras["released_gradients"])
    with pytest.raises(TypeError, match="secure_rng"):
        noisy_gradient_descent(zero, bounds, secure_rng=True, **kwargs)
