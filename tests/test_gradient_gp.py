import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize

from botorch_dp.gradient_gp import GradientGP, gradient_posterior, output_gradient_gps
from botorch_dp.kernel_derivatives import KernelDerivatives
from helpers import make_kernel, make_model

CASES = [("rbf", "closed_form"), ("rbf", "derivative_kernel"), ("rbf", "autograd"), ("matern52", "closed_form"), ("matern52", "derivative_kernel"),
         ("poly2", "closed_form"), ("poly2", "derivative_kernel"), ("poly2", "autograd"), ("rq", "autograd")]


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


def test_trace_and_brute_force_dense_solve():
    d, N = 4, 15
    X, _ = _data(d, N, torch.float64)
    kernel = make_kernel("rbf", d)
    for noise in (0.0, 0.05):
        gp = GradientGP(X, kernel, noise)
        theta = torch.rand(3, d, dtype=torch.float64)
        kd = KernelDerivatives(kernel)
        G = kd.cross(theta, X)
        K = kernel(X).to_dense() + max(noise, gp.jitter) * torch.eye(N, dtype=torch.float64)
        expected = kd.prior(theta) - G @ torch.linalg.solve(K, G.transpose(-1, -2))
        torch.testing.assert_close(gp.posterior_covariance(theta), expected, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(gp.posterior_trace(theta), expected.diagonal(dim1=-2, dim2=-1).sum(-1))


def test_condition_on_equals_refit():
    d = 3
    X, _ = _data(d, 10, torch.float64)
    Z = torch.rand(4, d, dtype=torch.float64)
    kernel = make_kernel("matern52", d)
    gp = GradientGP(X, kernel, 0.01)
    cond = gp.condition_on(Z)
    refit = GradientGP(torch.cat([X, Z]), kernel, 0.01)
    torch.testing.assert_close(cond.L, refit.L)
    theta = torch.rand(d, dtype=torch.float64)
    torch.testing.assert_close(cond.posterior_trace(theta), refit.posterior_trace(theta))
    # from an empty data set too
    empty = GradientGP(X[:0], kernel, 0.01)
    torch.testing.assert_close(empty.condition_on(X).L, GradientGP(X, kernel, 0.01).L)
    torch.testing.assert_close(empty.posterior_trace(theta), KernelDerivatives(kernel).prior_trace(theta))


def test_gradient_weights_give_per_user_means():
    """A Y (one solve for all users) equals the posterior mean of each user's GP."""
    d, N, n = 3, 9, 5
    X, _ = _data(d, N, torch.float64)
    Y = torch.randn(N, n, dtype=torch.float64)
    kernel = make_kernel("rbf", d)
    gp = GradientGP(X, kernel, 0.01)
    theta = torch.rand(d, dtype=torch.float64)
    A = gp.gradient_weights(theta)
    assert A.shape == (d, N)
    G = A @ Y
    for i in range(n):
        gp_i = GradientGP(X, kernel, 0.01, train_Y=Y[:, i])
        torch.testing.assert_close(G[:, i], gp_i.posterior(theta).mean)


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


def test_refusals():
    d, N = 2, 5
    X, Y = _data(d, N, torch.float64)
    model = SingleTaskGP(X, Y, input_transform=Normalize(d))
    with pytest.raises(NotImplementedError, match="output_gradient_gps"):
        GradientGP.from_model(model)
    with pytest.raises(ValueError, match="N x d"):
        GradientGP(X[0], make_kernel("rbf", d))
    with pytest.raises(ValueError, match="non-negative"):
        GradientGP(X, make_kernel("rbf", d), -1.0)


def test_tensors_are_buffers_that_move_with_the_module():
    d = 3
    X, _ = _data(d, 8, torch.float64)
    gp = GradientGP(X, make_kernel("rbf", d, torch.float64), 1e-3).condition_on(X[:2] + 0.1)
    assert {"train_X", "train_noise", "L"} <= set(dict(gp.named_buffers()))
    theta = torch.full((1, d), 0.4, dtype=torch.float64)
    expected = gp.posterior_trace(theta)
    moved = gp.to(torch.float32)  # the same call moves everything to a GPU
    assert moved.train_X.dtype == moved.L.dtype == moved.train_noise.dtype == torch.float32
    assert moved.train_X.shape == (10, d) and moved.L.shape == (10, 10)
    torch.testing.assert_close(moved.posterior_trace(theta.float()), expected.float(), rtol=1e-4, atol=1e-6)


def test_condition_on_and_from_factor_keep_every_setting():
    d = 2
    X, _ = _data(d, 6, torch.float64)
    gp = GradientGP(X, make_kernel("matern52", d, torch.float64), 2e-3, mean_constant=0.5, output_scale=1.7, jitter=1e-7)
    conditioned = gp.condition_on(X[:1] + 0.05)
    restored = GradientGP.from_factor(
        conditioned.train_X, conditioned.L, gp.kernel, 2e-3, mean_constant=0.5, output_scale=1.7, jitter=1e-7
    )
    for other in (conditioned, restored):
        assert (other.jitter, other.mean_constant, other.output_scale, other.new_point_noise) == (1e-7, 0.5, 1.7, 2e-3)
    theta = torch.tensor([[0.2, 0.8]], dtype=torch.float64)
    assert torch.equal(restored.posterior_covariance(theta), conditioned.posterior_covariance(theta))
    dense = GradientGP(conditioned.train_X, gp.kernel, 2e-3, output_scale=1.7, jitter=1e-7)
    torch.testing.assert_close(conditioned.posterior_covariance(theta), dense.posterior_covariance(theta), rtol=1e-9, atol=1e-12)


def _warped_normalize(d):
    from botorch.models.transforms.input import ChainedInputTransform, Warp

    warp = Warp(d=d, indices=[1]).to(torch.float64)
    warp.initialize(concentration0=torch.tensor([0.6], dtype=torch.float64), concentration1=torch.tensor([2.0], dtype=torch.float64))
    bounds = torch.tensor([[-1.0] * d, [4.0] * d], dtype=torch.float64)
    return ChainedInputTransform(normalize=Normalize(d, bounds=bounds), warp=warp)


@pytest.mark.parametrize("transform", ["normalize_learned", "normalize_warp"])
def test_gradient_posterior_in_original_inputs(transform):
    """With an input transform the posterior is of ∇_x f: BoTorch autograd / differences in x."""
    d, N, noise = 3, 10, 1e-3
    X, Y = _data(d, N, torch.float64)
    X = 3 * X  # raw inputs in [0, 3]
    tf = Normalize(d) if transform == "normalize_learned" else _warped_normalize(d)
    model = SingleTaskGP(X, Y, covar_module=make_kernel("matern52", d), input_transform=tf, outcome_transform=Standardize(m=1))
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


def test_kernel_changed_and_stale_factor_refused():
    d = 2
    X, _ = _data(d, 6, torch.float64)
    kernel = make_kernel("rbf", d)
    gp = GradientGP(X, kernel, 1e-3)
    child = gp.condition_on(X[:1] + 0.1)
    assert not gp.kernel_changed() and not child.kernel_changed()
    kernel.base_kernel.lengthscale = 2.0
    assert gp.kernel_changed() and child.kernel_changed()  # the child's factor extends the parent's
    with pytest.raises(RuntimeError, match="stale"):
        child.condition_on(X[:1])
    fresh = GradientGP(X, kernel, 1e-3)
    assert not fresh.kernel_changed()
    assert not fresh.to(torch.float32).kernel_changed()  # moving the module (kernel and factor) is no change
