"""Tests for botorch_dp.baselines against closed-form optima and hand-computed guarantees."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from botorch_dp.baselines import (
    from_dp_gibo_result,
    gibo,
    noisy_gradient_descent,
    per_trial_mu_for_epsilon,
    private_random_search,
    private_selection_epsilon,
    private_selection_rdp,
    random_search,
    rdp_to_epsilon,
    sample_num_trials,
    tnb_gamma_for_mean,
    tnb_log_pmf,
    tnb_mean,
    ucb_bo,
)
from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.problems import HuberRegression, NormalLocation


# ------------------------------------------------------------------------- random search
def test_random_search_gets_close_to_sample_mean():
    problem = NormalLocation(dim=2, num_users=40, seed=3)
    res = random_search(problem, problem.bounds, num_evaluations=2000, seed=1)
    assert res.guarantee is None and not res.is_private and not res.history.public
    assert res.num_evaluations == 2000
    # nearest of 2000 uniform points in a 6 x 6 box is ~0.08 away on average
    assert (res.theta - problem.optimum).norm() < 0.3
    # it returned the best evaluated point, and the history holds the true mean losses
    torch.testing.assert_close(res.history.mean_losses, problem.objective(res.history.points))
    assert torch.equal(res.theta, res.history.points[res.history.mean_losses.argmin()])
    best = problem.objective(res.history.iterates)
    assert (best[1:] <= best[:-1]).all()


def test_random_search_accepts_a_callable_and_rejects_bad_losses():
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    res = random_search(lambda X: X.square().sum(-1, keepdim=True).expand(-1, 3), bounds, num_evaluations=50)
    assert res.theta.shape == (2,)
    with pytest.raises(ValueError, match="non-finite"):
        random_search(lambda X: torch.full((X.shape[0], 3), math.nan, dtype=torch.float64), bounds, num_evaluations=5)


# ------------------------------------------------------------------------- noisy gradient descent
def test_noisy_gd_without_noise_converges_to_sample_mean():
    problem = NormalLocation(dim=3, num_users=30, seed=0)
    res = noisy_gradient_descent(
        problem, problem.bounds, num_iterations=60, clip_bound=100.0, step_size=0.5, privacy_mu=math.inf,
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
        problem, problem.bounds, num_iterations=400, clip_bound=1.5, step_size=0.5, privacy_mu=math.inf,
        theta0=problem.default_theta0(),
    )
    torch.testing.assert_close(res.theta, problem.optimum, atol=1e-6, rtol=0)


def test_noisy_gd_noise_std_matches_2B_sqrtT_over_n_mu():
    n, d, T, B, mu = 50, 5, 400, 1.0, 2.0
    zero = lambda X: torch.zeros(X.shape[0], n, d, dtype=torch.float64)
    bounds = torch.tensor([[-1e6] * d, [1e6] * d], dtype=torch.float64)
    res = noisy_gradient_descent(
        zero, bounds, num_iterations=T, clip_bound=B, step_size=1e-3, privacy_mu=mu, seed=11
    )
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
        oracle, bounds, num_iterations=2, clip_bound=0.5, step_size=1.0, privacy_mu=math.inf,
        theta0=torch.zeros(d, dtype=torch.float64),
    )
    torch.testing.assert_close(res.history.extras["released_gradients"][0], torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(res.theta, torch.tensor([-1.0, 0.0, 0.0], dtype=torch.float64))


# ------------------------------------------------------------------------- UCB-BO
def test_ucb_bo_on_a_2d_quadratic():
    centers = torch.tensor([[0.2, -0.3], [0.4, -0.1], [0.3, -0.5]], dtype=torch.float64)
    optimum = centers.mean(0)  # minimizer of the mean of ‖θ − c_i‖²
    objective = lambda X: (X.unsqueeze(-2) - centers).square().sum(-1)  # q x 3
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    res = ucb_bo(objective, bounds, num_evaluations=24, num_initial=6, beta=0.5, seed=0, raw_samples=64)
    assert res.num_evaluations == 24 and res.guarantee is None
    assert res.history.points.shape == (24, 2)
    assert (res.theta - optimum).norm() < 0.1
    torch.testing.assert_close(res.history.mean_losses, objective(res.history.points).mean(-1))


# ------------------------------------------------------------------------- GIBO wrapper
def test_gibo_wrapper_equals_dp_gibo_with_infinite_mu():
    problem = NormalLocation(dim=2, num_users=20, seed=1)
    kwargs = dict(
        num_iterations=3, clip_bound=5.0, step_size=0.3, batch_size=3, seed=4,
        theta0=problem.default_theta0(), raw_samples=16, num_restarts=1,
    )
    res = gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), **kwargs)
    ref = DPGIBO(
        DPGIBOConfig(bounds=problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=math.inf, **kwargs)
    ).run(problem, progress=False)
    assert res.guarantee is None
    assert torch.equal(res.theta, ref.release.theta)
    assert torch.equal(res.history.iterates, ref.release.iterates)
    assert res.num_evaluations == 9
    assert res.history.evaluations.tolist() == [0, 3, 6, 9]
    with pytest.raises(TypeError):
        gibo(problem, problem.bounds, kernel=problem.recommended_kernel(), privacy_mu=1.0)


def test_from_dp_gibo_result_keeps_the_guarantee():
    problem = NormalLocation(dim=2, num_users=20, seed=1)
    config = DPGIBOConfig(
        bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=2, privacy_mu=0.5,
        clip_bound=1.0, batch_size=2, raw_samples=16, num_restarts=1,
    )
    res = from_dp_gibo_result(DPGIBO(config).run(problem, progress=False))
    assert res.guarantee.mu == pytest.approx(0.5)
    assert res.guarantee.epsilon == pytest.approx(gdp_epsilon(0.5, 1e-5))
    assert res.history.public


# ------------------------------------------------------------------------- private selection: distributions
@pytest.mark.parametrize("eta", [-0.5, 0.0, 1.0, 2.5])
def test_tnb_pmf_normalized_with_requested_mean(eta):
    gamma = tnb_gamma_for_mean(eta=eta, mean_trials=20.0)
    assert tnb_mean(eta=eta, gamma=gamma) == pytest.approx(20.0)
    ks = np.arange(1, 400_000)
    p = np.exp(tnb_log_pmf(ks, eta=eta, gamma=gamma))
    assert p.sum() == pytest.approx(1.0, abs=1e-8)
    assert (ks * p).sum() == pytest.approx(20.0, rel=1e-6)


def test_tnb_special_cases_by_hand():
    # η = 1: geometric P[K = k] = γ(1 − γ)^{k−1}; η = 0: logarithmic (1 − γ)^k / (k log(1/γ))
    g = 0.2
    ks = np.array([1, 2, 5])
    np.testing.assert_allclose(np.exp(tnb_log_pmf(ks, eta=1.0, gamma=g)), g * (1 - g) ** (ks - 1))
    np.testing.assert_allclose(np.exp(tnb_log_pmf(ks, eta=0.0, gamma=g)), (1 - g) ** ks / (ks * math.log(1 / g)))
    assert tnb_gamma_for_mean(eta=1.0, mean_trials=10.0) == pytest.approx(0.1)


@pytest.mark.parametrize("distribution,eta", [("truncated_negative_binomial", 1.0), ("truncated_negative_binomial", 0.0), ("poisson", 1.0)])
def test_sampled_number_of_trials_has_the_right_mean(distribution, eta):
    rng = np.random.default_rng(0)
    ks = np.array([sample_num_trials(distribution=distribution, mean_trials=8.0, rng=rng, tnb_eta=eta) for _ in range(4000)])
    if distribution != "poisson":
        assert ks.min() >= 1
    # sd of K is at most ~ mean here; standard error of the mean ≲ 8/sqrt(4000) = 0.13
    assert ks.mean() == pytest.approx(8.0, abs=0.5)


# ------------------------------------------------------------------------- private selection: guarantee
def test_tnb_rdp_matches_hand_computation():
    # geometric K (η = 1), E[K] = 10 -> γ = 0.1; per-trial μ0 = 0.2 -> ρ = 0.02; order λ = 8
    rho, gamma, lam = 0.02, 0.1, 8.0
    # Papernot-Steinke Thm. 2 with ε(λ) = λρ, minimizing over λ̂ ≥ 1 on a fine grid
    lam_hat = np.linspace(1.0, 50.0, 200_001)
    inner = (2.0 * (1 - 1 / lam_hat) * lam_hat * rho + 2.0 * math.log(1 / gamma) / lam_hat).min()
    by_hand = lam * rho + inner + math.log(10.0) / (lam - 1)
    assert by_hand == pytest.approx(1.307329, abs=1e-5)  # 0.16 + 0.818388 + 0.328941
    value = private_selection_rdp(lam, per_trial_mu=0.2, mean_trials=10.0, tnb_eta=1.0)
    assert value == pytest.approx(by_hand, rel=1e-7)


def test_poisson_rdp_matches_hand_computation():
    mu0, m, lam = 0.2, 10.0, 8.0
    eps_hat = math.log(lam / (lam - 1))  # largest ε̂ allowed by Thm. 6: e^ε̂ = 1 + 1/(λ − 1)
    delta_hat = norm.cdf(-eps_hat / mu0 + mu0 / 2) - math.exp(eps_hat) * norm.cdf(-eps_hat / mu0 - mu0 / 2)
    by_hand = lam * mu0**2 / 2 + m * delta_hat + math.log(m) / (lam - 1)
    value = private_selection_rdp(lam, per_trial_mu=mu0, mean_trials=m, distribution="poisson")
    assert value == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize("distribution", ["truncated_negative_binomial", "poisson"])
def test_epsilon_is_the_optimal_rdp_conversion(distribution):
    kw = dict(per_trial_mu=0.1, mean_trials=50.0, distribution=distribution)
    delta = 1e-5
    eps = private_selection_epsilon(target_delta=delta, **kw)
    orders = 1.0 + np.exp(np.linspace(math.log(1e-2), math.log(1e4), 4001))
    rdp = np.array([private_selection_rdp(o, **kw) for o in orders])
    cks = rdp + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    classic = rdp + math.log(1 / delta) / (orders - 1)
    assert eps == pytest.approx(cks.min(), rel=1e-4)
    assert eps <= classic.min()
    assert eps > 0


@pytest.mark.parametrize("distribution", ["truncated_negative_binomial", "poisson"])
def test_epsilon_monotone_in_per_trial_budget_and_trials(distribution):
    mus = [0.01, 0.03, 0.1, 0.3, 1.0]
    eps = [private_selection_epsilon(per_trial_mu=m, mean_trials=100.0, target_delta=1e-5, distribution=distribution) for m in mus]
    assert all(a < b for a, b in zip(eps, eps[1:]))
    eps_k = [private_selection_epsilon(per_trial_mu=0.1, mean_trials=k, target_delta=1e-5, distribution=distribution) for k in (5.0, 50.0, 500.0)]
    assert all(a < b for a, b in zip(eps_k, eps_k[1:]))
    # a single Gaussian trial is never cheaper than the whole selection
    assert eps[2] > gdp_epsilon(0.1, 1e-5)


def test_per_trial_mu_for_epsilon_inverts_the_guarantee():
    mu0 = per_trial_mu_for_epsilon(target_epsilon=4.3772, target_delta=1e-5, mean_trials=230.0)
    eps = private_selection_epsilon(per_trial_mu=mu0, mean_trials=230.0, target_delta=1e-5)
    assert eps == pytest.approx(4.3772, rel=1e-6)
    mu_p = per_trial_mu_for_epsilon(target_epsilon=4.3772, target_delta=1e-5, mean_trials=230.0, distribution="poisson")
    assert 0 < mu_p < mu0  # the Poisson bound pays m·δ̂ and is looser at this many trials


def test_rdp_to_epsilon_for_a_gaussian_matches_zcdp_conversion():
    from botorch_dp.privacy.analysis.zcdp import zcdp_epsilon_cks

    rho = 0.125
    eps, _ = rdp_to_epsilon(lambda a: a * rho, 1e-5)
    assert eps == pytest.approx(zcdp_epsilon_cks(rho, 1e-5), rel=1e-6)


# ------------------------------------------------------------------------- private selection: the method
def test_private_random_search_without_noise_picks_the_best_trial():
    problem = NormalLocation(dim=2, num_users=25, seed=2)
    res = private_random_search(
        problem, problem.bounds, mean_trials=30.0, per_trial_mu=1e9, loss_clip=1e3, seed=5
    )
    K = res.num_evaluations
    assert K >= 1 and not res.history.public
    # same seed -> same uniform candidates as random search; noise std C/(nμ₀) = 4e-8 is negligible
    ref = random_search(problem, problem.bounds, num_evaluations=K, seed=5)
    torch.testing.assert_close(res.history.points, ref.history.points)
    assert torch.equal(res.theta, ref.theta)
    assert res.history.extras["released_score"] == pytest.approx(float(problem.objective(res.theta)), abs=1e-6)
    assert res.guarantee.details["noise_std"] == pytest.approx(1e3 / (25 * 1e9))
    assert res.guarantee.epsilon == pytest.approx(
        private_selection_epsilon(per_trial_mu=1e9, mean_trials=30.0, target_delta=1e-5)
    )


def test_private_random_search_clips_losses_and_noises_with_C_over_n_mu():
    n, C, mu0 = 10, 1.0, 0.5
    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    constant = lambda X: torch.full((X.shape[0], n), 5.0, dtype=torch.float64)  # clipped to C = 1
    res = private_random_search(constant, bounds, mean_trials=400.0, per_trial_mu=mu0, loss_clip=C, seed=0)
    scores = res.history.extras["noisy_scores"]
    assert scores.numel() == res.num_evaluations > 100
    assert float(scores.mean()) == pytest.approx(C, abs=4 * 0.2 / math.sqrt(scores.numel()))
    assert float(scores.std()) == pytest.approx(C / (n * mu0), rel=0.15)  # 0.2


def test_private_random_search_poisson_with_zero_trials_returns_fallback():
    bounds = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float64)
    calls = []
    objective = lambda X: calls.append(X) or torch.zeros(X.shape[0], 3, dtype=torch.float64)
    # E[K] = 1e-9: K = 0 with probability ≈ 1
    res = private_random_search(
        objective, bounds, mean_trials=1e-9, per_trial_mu=0.1, loss_clip=1.0, distribution="poisson", seed=0
    )
    assert res.num_evaluations == 0 and not calls
    torch.testing.assert_close(res.theta, torch.tensor([0.5, 1.0], dtype=torch.float64))
