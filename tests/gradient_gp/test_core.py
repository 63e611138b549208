"""Tests for gradient_gp/core.py: GradientGP on explicit data against dense solves and refits
(trace, covariance, per-user gradient weights, Schur updates, a known factor), its buffers,
its argument checks and the stale-factor check."""

import pytest
import torch

from botorch_dp.gradient_gp.core import GradientGP
from botorch_dp.kernel_derivatives import KernelDerivatives
from tests.helpers import make_kernel


def _data(d, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(N, d, generator=g, dtype=torch.float64)
    Y = (torch.sin(3 * X).sum(-1) + X[:, 0] ** 2).unsqueeze(-1)
    return X.to(dtype), Y.to(dtype)


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


def test_refusals():
    d, N = 2, 5
    X, _ = _data(d, N, torch.float64)
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
    gp = GradientGP(
        X, make_kernel("matern52", d, torch.float64), 2e-3, mean_constant=0.5, output_scale=1.7, jitter=1e-7
    )
    conditioned = gp.condition_on(X[:1] + 0.05)
    restored = GradientGP.from_factor(
        conditioned.train_X, conditioned.L, gp.kernel, 2e-3, mean_constant=0.5, output_scale=1.7, jitter=1e-7
    )
    for other in (conditioned, restored):
        assert (other.jitter, other.mean_constant, other.output_scale, other.new_point_noise) == (1e-7, 0.5, 1.7, 2e-3)
    theta = torch.tensor([[0.2, 0.8]], dtype=torch.float64)
    assert torch.equal(restored.posterior_covariance(theta), conditioned.posterior_covariance(theta))
    dense = GradientGP(conditioned.train_X, gp.kernel, 2e-3, output_scale=1.7, jitter=1e-7)
    torch.testing.assert_close(
        conditioned.posterior_covariance(theta), dense.posterior_covariance(theta), rtol=1e-9, atol=1e-12
    )


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
