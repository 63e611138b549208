r"""``botorch_dp.plan``: the simulated noise equals the private run's (closed form), the
candidates are the proxy's norm quantiles (recomputed independently), the recommendation is
the best trial, and the planned config runs privately at exactly its budget."""

import math
import warnings

import pytest
import torch

from botorch_dp import DPGIBO
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import clip_count_privacy_mu, resolve_model, split_privacy_mu
from botorch_dp.plan import plan_private_run, simulation_config
from botorch_dp.privacy.analysis.gdp import gdp_mu, pure_dp_to_gdp_mu
from botorch_dp.privacy.mechanisms import count_within_clip
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.optim.loop_helpers import nl_config, normal_location

D, N_PROXY, N_PRIVATE = 2, 30, 120
FAST = dict(num_restarts=1, raw_samples=8)


def _config(**kw):
    base = dict(privacy_mu=None, epsilon=1.0, delta=1e-5, num_iterations=2, step_size=0.5, **FAST)
    base.update(kw)
    return nl_config(d=D, **base)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(clip_bound="adaptive", clip_mu_fraction=0.3),
        dict(selection="noisy_loss", selection_mu=0.1, loss_clip=5.0),
        dict(selection="exponential", selection_epsilon=0.2, loss_clip=5.0),
        dict(noise_schedule="adaptive_norm", max_step_mu=0.1),
    ],
)
def test_simulation_draws_the_private_runs_noise(kw):
    # every release's noise on the scale of the mean, c/(n μ_j), is the same for n_p proxy users
    config = _config(**kw)
    sim = simulation_config(config, N_PRIVATE, N_PROXY, clip_bound=config.clip_bound)
    scale = N_PRIVATE / N_PROXY
    assert sim.steps_privacy_mu == pytest.approx(scale * config.steps_privacy_mu, rel=1e-12)
    assert split_privacy_mu(sim)[0] * N_PROXY == pytest.approx(split_privacy_mu(config)[0] * N_PRIVATE, rel=1e-12)
    if config.clip_bound == "adaptive":
        assert clip_count_privacy_mu(sim) * N_PROXY == pytest.approx(clip_count_privacy_mu(config) * N_PRIVATE, rel=1e-12)
    if config.selection == "noisy_loss":
        assert sim.selection_mu * N_PROXY == pytest.approx(config.selection_mu * N_PRIVATE, rel=1e-15)
    if config.selection == "exponential":  # P(j) ∝ exp(−ε u_j n/(2C)): ε n is what matters
        assert sim.selection_epsilon * N_PROXY == pytest.approx(config.selection_epsilon * N_PRIVATE, rel=1e-15)
        assert sim.selection_privacy_mu == pytest.approx(pure_dp_to_gdp_mu(sim.selection_epsilon), rel=1e-15)
    if config.max_step_mu is not None:
        assert sim.max_step_mu * N_PROXY == pytest.approx(config.max_step_mu * N_PRIVATE, rel=1e-15)
    assert sim.epsilon is None and sim.privacy_budget_mu is None


@pytest.fixture(scope="module")
def planned():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return proxy(X)

    plan = plan_private_run(counted, _config(), num_users=N_PRIVATE, clip_quantiles=(0.5, 0.9), step_sizes=(0.5,), num_repeats=1)
    return plan, proxy, calls


def test_candidates_are_the_proxy_norm_quantiles(planned):
    plan, proxy, _ = planned
    config = plan.config
    kernel, noise, _ = resolve_model(config)
    theta0 = config.theta0
    A = GradientGP(plan.gradient_points, kernel, noise, jitter=config.jitter).gradient_weights(theta0)
    Y = proxy(plan.gradient_points)
    norms = (A @ Y).norm(dim=0)
    for gamma, bound in plan.norm_quantiles.items():
        assert bound == pytest.approx(float(torch.quantile(norms, gamma)), rel=1e-12)
        assert count_within_clip(A, Y, bound) >= math.ceil(gamma * N_PROXY) - 1
    assert [t.clip_bound for t in plan.trials] == list(plan.norm_quantiles.values())
    assert plan.num_proxy_users == N_PROXY and plan.num_users == N_PRIVATE


def test_recommendation_is_the_best_trial_and_the_noise_is_the_private_one(planned):
    plan, _, calls = planned
    assert len(plan.trials) == 2 and all(len(t.proxy_losses) == 1 for t in plan.trials)
    best = plan.trials[plan.best]
    assert best.mean_proxy_loss == min(t.mean_proxy_loss for t in plan.trials)
    c = plan.config
    assert (c.clip_bound, c.step_size, c.num_iterations) == (best.clip_bound, best.step_size, best.num_iterations)
    assert (c.epsilon, c.delta, c.seed) == (1.0, 1e-5, None)  # the private settings are kept
    mu = gdp_mu(1.0, 1e-5)
    for t in plan.trials:  # σ = 2B√T/(nμ) at the PRIVATE n and μ
        assert t.noise_std == pytest.approx(2 * t.clip_bound * math.sqrt(t.num_iterations) / (N_PRIVATE * mu), rel=1e-12)
    assert "*" in plan.table() and f"{N_PROXY} users" in str(plan)
    # the proxy answers: the 10 d kernel-fit points, one probe batch, then per run T batches
    # and the returned iterate
    assert calls[0] == 10 * D and len(calls) == 2 + len(plan.trials) * (2 + 1)


def test_the_planned_config_runs_privately_at_exactly_its_budget(planned):
    plan, _, _ = planned
    _, private = normal_location(n=N_PRIVATE, d=D, seed=2)
    opt = DPGIBO(plan.config)
    result = opt.run(private, progress=False)
    assert result.release.guarantee.epsilon == pytest.approx(1.0, rel=1e-9)
    assert result.release.noise_stds[0] == pytest.approx(plan.trials[plan.best].noise_std, rel=1e-12)


def test_adaptive_clip_plans_the_starting_bound():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the plan's simulated seeds stay silent
        plan = plan_private_run(
            proxy, _config(clip_bound="adaptive"), num_users=N_PRIVATE, clip_quantiles=(0.5,), step_sizes=(0.5,), num_repeats=1
        )
    assert plan.config.clip_bound == "adaptive" and plan.config.clip_init == plan.norm_quantiles[0.5]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(num_users=1), "num_users"),
        (dict(clip_quantiles=()), "clip_quantiles"),
        (dict(clip_quantiles=(1.5,)), "clip_quantiles"),
        (dict(step_sizes=(-1.0,)), "step_sizes"),
        (dict(num_iterations=(0,)), "num_iterations"),
        (dict(num_repeats=0), "num_repeats"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kw, match):
    _, proxy = normal_location(n=N_PROXY, d=D)
    args = dict(num_users=N_PRIVATE) | kw
    with pytest.raises(ValueError, match=match):
        plan_private_run(proxy, _config(), **args)


def test_a_proxy_without_per_user_losses_is_refused():
    _, proxy = normal_location(n=N_PROXY, d=D)
    with pytest.raises(ValueError, match="per-user losses"):
        plan_private_run(lambda X: proxy(X).mean(-1, keepdim=True), _config(), num_users=N_PRIVATE)
