r"""``botorch_dp.plan.kernel_fit``: the kernel fit on the proxy recovers the known length-scales
of a GP sample path (without touching the user's kernel or model), and fits the noise variance
when the model has noise."""

import copy
import math

import pytest
import torch
from botorch.models import SingleTaskGP
from gpytorch.kernels import RBFKernel, ScaleKernel

from botorch_dp import DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.config import resolve_model
from botorch_dp.plan import fit_kernel_on_proxy, plan_private_run

from .plan_helpers import FAST, N_PRIVATE


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
        bounds=_box(0.0, 3.0),
        kernel=kernel,
        privacy_mu=1.0,
        num_iterations=1,
        step_size=0.1,
        batch_size=3,
        search_radius=0.3,
        acqf_maxiter=20,
        **FAST,
    )
    plan = plan_private_run(
        proxy,
        config,
        num_users=N_PRIVATE,
        clip_quantiles=(0.5,),
        step_sizes=(0.1,),
        num_repeats=1,
        kernel_fit_points=40,
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
    assert (
        fitted.model is not model
        and fitted.model.covar_module.base_kernel.lengthscale.flatten().tolist()
        == pytest.approx(list(fit.lengthscales), rel=1e-12)
    )
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the fit box: [θ₀ − 1, θ₀ + 1] around the centre θ₀ = (1.5, 1.5)
    assert torch.equal(fit.region, _box(0.5, 2.5))
    assert ((fit.points >= 0.5) & (fit.points <= 2.5)).all()
