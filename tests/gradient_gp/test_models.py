"""Tests for gradient_gp/models.py: gradient GPs read off BoTorch models against BoTorch's
own posterior (autograd and finite differences), through outcome and input transforms (the
chain rule), per output of multi-output models, and the models and transforms it refuses."""

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize

from botorch_dp.gradient_gp.core import GradientGP
from botorch_dp.gradient_gp.models import gradient_posterior, output_gradient_gps
from tests.helpers import make_kernel, make_model

CASES = [
    ("rbf", "closed_form"),
    ("rbf", "derivative_kernel"),
    ("rbf", "autograd"),
    ("matern52", "closed_form"),
    ("matern52", "derivative_kernel"),
    ("poly2", "closed_form"),
    ("poly2", "derivative_kernel"),
    ("poly2", "autograd"),
    ("rq", "autograd"),
]


def _data(d, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(N, d, generator=g, dtype=torch.float64)
    Y = (torch.sin(3 * X).sum(-1) + X[:, 0] ** 2).unsqueeze(-1)
    return X.to(dtype), Y.to(dtype)


def _fd_stencil(theta, h):
    """2d points theta ± h e_j and the matrix mapping their values to central differences."""
    d = theta.shape[-1]
    E = torch.eye(d, dtype=theta.dtype)
    P = torch.cat([theta + h * E, theta - h * E])
    D = torch.cat([E, -E], dim=1) / (2 * h)  # d x 2d
    return P, D


@pytest.mark.parametrize("name,method", CASES)
def test_posterior_matches_botorch_autograd_and_fd(name, method, dtype):
    d, N, noise = 3, 12, 1e-3
    X, Y = _data(d, N, dtype)
    model = make_model(make_kernel(name, d, dtype), X, Y, noise)
    theta = torch.tensor([[0.3, 0.6, 0.45], [0.7, 0.2, 0.5]], dtype=dtype)
    post = gradient_posterior(model, theta, method=method)
    assert post.mean.shape == (2, d) and post.covariance.shape == (2, d, d)
    assert post.mean.dtype == dtype

    # independent 1: autograd through BoTorch's posterior mean
    x = theta.clone().requires_grad_(True)
    (g_auto,) = torch.autograd.grad(model.posterior(x.unsqueeze(-2)).mean.sum(), x)
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == torch.float64 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(post.mean, g_auto, **tol)

    # independent 2: finite differences of BoTorch's posterior (mean and covariance), in float64
    model64 = make_model(make_kernel(name, d), X.double(), Y.double(), noise)
    h = 1e-4
    for b in range(2):
        P, Dm = _fd_stencil(theta[b].double(), h)
        with torch.no_grad():
            p = model64.posterior(P)
        fd_mean = Dm @ p.mean.squeeze(-1)
        fd_cov = Dm @ p.mvn.covariance_matrix @ Dm.T
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float64 else dict(rtol=5e-3, atol=5e-3)
        torch.testing.assert_close(post.mean[b].double(), fd_mean, **tol)
        torch.testing.assert_close(post.covariance[b].double(), fd_cov, **tol)
        assert torch.isclose(post.trace[b].double(), fd_cov.trace(), **tol)


def test_standardize_is_undone():
    d, N = 2, 8
    X, Y = _data(d, N, torch.float64)
    Y = 10 * Y + 3
    k = make_kernel("rbf", d)
    model = SingleTaskGP(X, Y, covar_module=k, outcome_transform=Standardize(m=1))
    model.likelihood.noise = 1e-3
    model.eval()
    gp = GradientGP.from_model(model)
    theta = torch.tensor([0.4, 0.6], dtype=torch.float64)
    x = theta.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(model.posterior(x[None]).mean.sum(), x)
    torch.testing.assert_close(gp.posterior(theta).mean, g, rtol=1e-6, atol=1e-8)


def test_from_model_refuses_an_input_transform():
    d, N = 2, 5
    X, Y = _data(d, N, torch.float64)
    model = SingleTaskGP(X, Y, input_transform=Normalize(d))
    with pytest.raises(NotImplementedError, match="output_gradient_gps"):
        GradientGP.from_model(model)


def _warped_normalize(d):
    from botorch.models.transforms.input import ChainedInputTransform, Warp

    warp = Warp(d=d, indices=[1]).to(torch.float64)
    warp.initialize(
        concentration0=torch.tensor([0.6], dtype=torch.float64), concentration1=torch.tensor([2.0], dtype=torch.float64)
    )
    bounds = torch.tensor([[-1.0] * d, [4.0] * d], dtype=torch.float64)
    return ChainedInputTransform(normalize=Normalize(d, bounds=bounds), warp=warp)


@pytest.mark.parametrize("transform", ["normalize_learned", "normalize_warp"])
def test_gradient_posterior_in_original_inputs(transform):
    """With an input transform the posterior is of ∇_x f: BoTorch autograd / differences in x."""
    d, N, noise = 3, 10, 1e-3
    X, Y = _data(d, N, torch.float64)
    X = 3 * X  # raw inputs in [0, 3]
    tf = Normalize(d) if transform == "normalize_learned" else _warped_normalize(d)
    model = SingleTaskGP(
        X, Y, covar_module=make_kernel("matern52", d), input_transform=tf, outcome_transform=Standardize(m=1)
    )
    model.likelihood.noise = noise
    model.eval()
    theta = torch.tensor([[1.0, 2.0, 1.4], [2.2, 0.6, 1.5]], dtype=torch.float64)
    post = gradient_posterior(model, theta)
    x = theta.clone().requires_grad_(True)
    (g_auto,) = torch.autograd.grad(model.posterior(x.unsqueeze(-2)).mean.sum(), x)
    torch.testing.assert_close(post.mean, g_auto, rtol=1e-6, atol=1e-8)
    for b in range(2):
        P, Dm = _fd_stencil(theta[b], 1e-4)
        with torch.no_grad():
            fd_cov = Dm @ model.posterior(P).mvn.covariance_matrix @ Dm.T
        torch.testing.assert_close(post.covariance[b], fd_cov, rtol=1e-5, atol=1e-7)
    # the GP itself lives on the transformed inputs; the chain rule is what makes these agree
    (part,) = output_gradient_gps(model)
    z_theta = model.transform_inputs(theta)
    assert not torch.allclose(part.gp.posterior(z_theta).mean, post.mean, rtol=1e-2)


def test_multi_output_from_model_and_output_gradient_gps():
    """Output k of a multi-output SingleTaskGP reads as the single-output GP on column k."""
    from gpytorch.kernels import RBFKernel, ScaleKernel

    d, N = 2, 7
    X, Y1 = _data(d, N, torch.float64)
    Y = torch.cat([Y1, 2 * X[:, :1]], dim=-1)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=d, batch_shape=torch.Size([2])), batch_shape=torch.Size([2])).double()
    kernel.base_kernel.lengthscale = torch.tensor([[[0.5, 0.9]], [[1.2, 0.4]]], dtype=torch.float64)
    kernel.outputscale = torch.tensor([1.5, 0.5], dtype=torch.float64)
    model = SingleTaskGP(X, Y, covar_module=kernel, outcome_transform=Standardize(m=2))
    model.likelihood.noise = torch.tensor([[1e-3], [2e-2]], dtype=torch.float64)
    model.eval()
    theta = torch.tensor([0.3, 0.7], dtype=torch.float64)
    parts = output_gradient_gps(model)
    assert len(parts) == 2
    for k in range(2):
        single = SingleTaskGP(X, Y[:, k : k + 1], covar_module=kernel[k], outcome_transform=Standardize(m=1))
        single.likelihood.noise = [1e-3, 2e-2][k]
        single.eval()
        expected = gradient_posterior(single, theta)
        for got in (parts[k].posterior(theta), GradientGP.from_model(model, output=k).posterior(theta)):
            torch.testing.assert_close(got.mean, expected.mean)
            torch.testing.assert_close(got.covariance, expected.covariance)
    with pytest.raises(NotImplementedError, match="output=i"):
        GradientGP.from_model(model)
    with pytest.raises(NotImplementedError, match="2 outputs"):
        gradient_posterior(model, theta)


def test_transform_refusals():
    from botorch.models.transforms.input import AppendFeatures, InputPerturbation, Round

    d = 2
    X, Y = _data(d, 6, torch.float64)
    cases = [
        (Round(integer_indices=[0]), "not differentiable"),
        (InputPerturbation(torch.zeros(2, d, dtype=torch.float64)), "several points"),
        (AppendFeatures(torch.rand(2, 1, dtype=torch.float64)), "several points"),
        (Normalize(d, transform_on_eval=False), "only to training or only to test"),
    ]
    for tf, message in cases:
        model = SingleTaskGP(X, Y, input_transform=tf).eval()
        with pytest.raises(NotImplementedError, match=message):
            output_gradient_gps(model)
