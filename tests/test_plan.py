r"""``botorch_dp.plan``: the simulated noise equals the private run's (closed form), the
candidates are the proxy's norm quantiles (recomputed independently), the recommendation is
the best trial, the planned config runs privately at exactly its budget, the kernel fit on the
proxy recovers the known length-scales of a GP sample path (without touching the user's kernel),
and a batch rule that is clearly better on the proxy is the one chosen."""

import copy
import math
import warnings

import pytest
import torch
from botorch.models import SingleTaskGP
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import resolve_model
from botorch_dp.plan import fit_kernel_on_proxy, plan_private_run, simulation_config
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
    assert sim.mu_split.steps_mu == pytest.approx(scale * config.mu_split.steps_mu, rel=1e-12)
    assert sim.mu_split.gradient_mu * N_PROXY == pytest.approx(config.mu_split.gradient_mu * N_PRIVATE, rel=1e-12)
    if config.clip_bound == "adaptive":
        assert sim.mu_split.clip_mu * N_PROXY == pytest.approx(config.mu_split.clip_mu * N_PRIVATE, rel=1e-12)
    if config.selection == "noisy_loss":
        assert sim.selection_mu * N_PROXY == pytest.approx(config.selection_mu * N_PRIVATE, rel=1e-15)
    if config.selection == "exponential":  # P(j) ∝ exp(−ε u_j n/(2C)): ε n is what matters
        assert sim.selection_epsilon * N_PROXY == pytest.approx(config.selection_epsilon * N_PRIVATE, rel=1e-15)
        assert sim.mu_split.selection_mu == pytest.approx(pure_dp_to_gdp_mu(sim.selection_epsilon), rel=1e-15)
    if config.max_step_mu is not None:
        assert sim.max_step_mu * N_PROXY == pytest.approx(config.max_step_mu * N_PRIVATE, rel=1e-15)
    assert sim.epsilon is None and sim.validation_mu_budget is None


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
    assert (c.batch_size, c.bias_tolerance) == (3, None) and all(t.bias_tolerance is None for t in plan.trials)
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


def _gp_sample_proxy(lengthscales, outputscale, n=20, features=4000, seed=0):
    r"""Per-user losses whose mean is a sample path of a zero-mean GP with an RBF kernel of the
    given length-scales and outputscale (random Fourier features, Rahimi & Recht), plus
    per-user linear terms that sum to zero over the users."""
    g = torch.Generator().manual_seed(seed)
    d = len(lengthscales)
    W = torch.randn(features, d, generator=g, dtype=torch.float64) / torch.tensor(lengthscales, dtype=torch.float64)
    b = 2 * math.pi * torch.rand(features, generator=g, dtype=torch.float64)
    w = torch.randn(features, generator=g, dtype=torch.float64) * math.sqrt(2 * outputscale / features)
    a = torch.randn(n, d, generator=g, dtype=torch.float64)
    a = a - a.mean(0)

    def proxy(X):
        return (torch.cos(X @ W.T + b) @ w)[:, None] + X @ a.T

    return proxy


def _box(lo, hi):
    return torch.tensor([[lo, lo], [hi, hi]], dtype=torch.float64)


def test_the_kernel_fit_recovers_the_length_scales_of_a_gp_sample():
    # fast along axis 0 (ℓ = 0.3), slow along axis 1 (ℓ = 1.5), outputscale 2, on [0, 3]²
    proxy = _gp_sample_proxy((0.3, 1.5), 2.0)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).requires_grad_(False)  # frozen: never fit on sensitive losses
    before = copy.deepcopy(kernel.state_dict())
    config = DPGIBOConfig(
        bounds=_box(0.0, 3.0), kernel=kernel, privacy_mu=1.0, num_iterations=1, step_size=0.1, batch_size=3,
        search_radius=0.3, acqf_maxiter=20, **FAST,
    )
    plan = plan_private_run(
        proxy, config, num_users=N_PRIVATE, clip_quantiles=(0.5,), step_sizes=(0.1,), num_repeats=1, kernel_fit_points=40
    )
    fit = plan.kernel_fit
    ls = fit.lengthscales
    assert ls[0] < ls[1]
    assert 0.3 / 1.5 < ls[0] < 0.3 * 1.5 and 1.5 / 1.5 < ls[1] < 1.5 * 1.5
    assert 2.0 / 2 < fit.hyperparameters["outputscale"][0] < 2.0 * 2
    assert fit.noise_variance is None and plan.config.noise_variance == 0.0  # σ² = 0 stays 0
    # the fit's data: 40 points in Θ, the proxy's mean losses there
    assert fit.points.shape == (40, 2) and ((fit.points >= 0) & (fit.points <= 3)).all()
    assert torch.allclose(fit.mean_losses, proxy(fit.points).mean(1), rtol=1e-12, atol=0)
    # the returned config carries them in a float64 copy of the same kernel class; the user's is unchanged
    fitted = plan.config.kernel
    assert type(fitted) is ScaleKernel and type(fitted.base_kernel) is RBFKernel and fitted is not kernel
    assert all(p.dtype == torch.float64 and not p.requires_grad for p in fitted.parameters())
    assert fitted.base_kernel.lengthscale.flatten().tolist() == pytest.approx(list(ls), rel=1e-12)
    assert float(fitted.outputscale.detach()) == pytest.approx(fit.hyperparameters["outputscale"][0], rel=1e-12)
    assert all(torch.equal(before[k], v) for k, v in kernel.state_dict().items())
    assert config.kernel is kernel and "lengthscale" in str(plan)
    # the private run's GP is the fitted one: the B candidates are its norm quantiles at θ₀
    A = GradientGP(plan.gradient_points, resolve_model(plan.config)[0], 0.0, jitter=config.jitter).gradient_weights(
        plan.config.theta0 if plan.config.theta0 is not None else torch.full((2,), 1.5, dtype=torch.float64)
    )
    norms = (A @ proxy(plan.gradient_points)).norm(dim=0)
    assert plan.norm_quantiles[0.5] == pytest.approx(float(torch.quantile(norms, 0.5)), rel=1e-9)


def test_the_noise_variance_is_fitted_when_the_model_has_noise():
    # a BoTorch model's covar_module and likelihood noise; the proxy adds N(0, 0.2²) per point
    proxy = _gp_sample_proxy((0.3, 1.5), 2.0)
    g = torch.Generator().manual_seed(100)

    def noisy(X):
        return proxy(X) + 0.2 * torch.randn(X.shape[0], 1, generator=g, dtype=torch.float64)

    X0 = torch.zeros(1, 2, dtype=torch.float64)
    model = SingleTaskGP(X0, X0[:, :1], covar_module=ScaleKernel(RBFKernel(ard_num_dims=2)), outcome_transform=None)
    before = copy.deepcopy(model.state_dict())
    config = DPGIBOConfig(bounds=_box(0.0, 3.0), model=model, privacy_mu=1.0, batch_size=3, **FAST)
    fitted, fit = fit_kernel_on_proxy(noisy, config, num_points=40, radius=1.0)
    assert 0.04 / 2.5 < fit.noise_variance < 0.04 * 2.5 and fitted.noise_variance == fit.noise_variance
    assert fit.lengthscales[0] < fit.lengthscales[1]
    assert fitted.model is not model and fitted.model.covar_module.base_kernel.lengthscale.flatten().tolist() == pytest.approx(
        list(fit.lengthscales), rel=1e-12
    )
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the fit box: [θ₀ − 1, θ₀ + 1] around the centre θ₀ = (1.5, 1.5)
    assert torch.equal(fit.region, _box(0.5, 2.5))
    assert ((fit.points >= 0.5) & (fit.points <= 2.5)).all()


def test_a_clearly_better_batch_rule_is_chosen():
    # b = 1 point per step pins down a 2-d gradient badly; a tiny bias tolerance asks for
    # b_max = d + 1 = 3 per step: the fixed rule (tried first, so ties would pick it) loses
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    config = _config(num_iterations=2, batch_size=1, acqf_maxiter=20)
    user_kernel = copy.deepcopy(config.kernel.state_dict())
    plan = plan_private_run(
        proxy, config, num_users=N_PRIVATE, clip_quantiles=(0.9,), step_sizes=(0.5,), num_repeats=1,
        bias_tolerances=(None, 1e-3), fit_kernel=False,
    )
    fixed, adaptive = plan.trials
    assert (fixed.bias_tolerance, adaptive.bias_tolerance) == (None, 1e-3)
    assert adaptive.mean_proxy_loss < fixed.mean_proxy_loss - 0.2
    assert plan.best == 1 and (plan.config.bias_tolerance, plan.config.batch_size) == (1e-3, None)
    assert plan.config.clip_bound == adaptive.clip_bound and "tol 0.001" in plan.table()
    # without the fit the config's kernel is kept as it was
    assert plan.kernel_fit is None and all(torch.equal(user_kernel[k], v) for k, v in plan.config.kernel.state_dict().items())
    assert "not fitted" in str(plan)


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
        (dict(bias_tolerances=()), "bias_tolerances"),
        (dict(bias_tolerances=(None, -1.0)), "bias_tolerances"),
        (dict(bias_tolerances=(math.nan,)), "bias_tolerances"),
        (dict(bias_tolerances=(100.0,)), "bias_tolerances"),  # above the prior gradient trace
        (dict(fit_kernel="yes"), "fit_kernel"),
        (dict(kernel_fit_points=1), "kernel_fit_points"),
        (dict(kernel_fit_points=2.5), "kernel_fit_points"),
        (dict(kernel_fit_radius=-1.0), "kernel_fit_radius"),
        (dict(kernel_fit_radius=torch.ones(3)), "kernel_fit_radius"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kw, match):
    _, proxy = normal_location(n=N_PROXY, d=D)
    calls = []

    def counted(X):
        calls.append(X.shape[0])
        return proxy(X)

    args = dict(num_users=N_PRIVATE) | kw
    with pytest.raises(ValueError, match=match):
        plan_private_run(counted, _config(), **args)
    # refused before the proxy is called, except the trace check, which needs the fitted kernel
    assert calls == ([10 * D] if kw.get("bias_tolerances") == (100.0,) else [])


def test_a_proxy_without_per_user_losses_is_refused():
    _, proxy = normal_location(n=N_PROXY, d=D)
    with pytest.raises(ValueError, match="per-user losses"):
        plan_private_run(lambda X: proxy(X).mean(-1, keepdim=True), _config(), num_users=N_PRIVATE)
