r"""Tests of problems/huber.py against a scalar re-implementation, autograd and finite differences."""

from __future__ import annotations

import math

import numpy as np
import torch

from botorch_dp.problems import HuberRegression


def _huber_scalar(theta, x, y, c=1.0):
    r = y - sum(a * b for a, b in zip(x, theta, strict=True))
    rho = 0.5 * r * r if abs(r) <= c else c * abs(r) - 0.5 * c * c
    return rho * min(1.0, 2.0 / sum(a * a for a in x))


def test_huber_against_scalar_reimplementation():
    problem = HuberRegression(seed=2)
    xs, ys = problem.covariates.tolist(), problem.responses.tolist()
    X = problem.sample_in_bounds(3, seed=0)
    Y = problem(X)
    assert Y.shape == (3, 100)
    for j, theta in enumerate(X.tolist()):
        expected = [_huber_scalar(theta, x, y) for x, y in zip(xs, ys, strict=True)]
        np.testing.assert_allclose(Y[j].numpy(), expected, rtol=1e-12, atol=1e-14)
    # Both branches of ρ_c are exercised.
    r = (problem.responses - X @ problem.covariates.T).abs()
    assert (r <= 1).any() and (r > 1).any()


def test_huber_gradient_autograd_and_finite_differences():
    problem = HuberRegression(seed=0)
    X = problem.sample_in_bounds(4, seed=3).requires_grad_(True)
    jac = torch.autograd.functional.jacobian(lambda x: problem.evaluate_true(x), X)
    auto = torch.stack([jac[j, :, j, :] for j in range(4)])
    grad = problem.per_user_gradient(X.detach())
    assert grad.shape == (4, 100, 4)
    torch.testing.assert_close(grad, auto)
    h = 1e-6
    theta = X.detach()[0]
    f = problem.evaluate_true
    fd = torch.stack([(f((theta + h * e)[None]) - f((theta - h * e)[None]))[0] / (2 * h) for e in torch.eye(4)], dim=-1)
    torch.testing.assert_close(grad[0], fd, atol=1e-6, rtol=1e-5)
    # Bounded sensitivity: ‖∇ℓ_i‖ ≤ c · min(‖x_i‖, 2/‖x_i‖) ≤ c√2.
    assert grad.norm(dim=-1).max() <= math.sqrt(2) + 1e-12


def test_huber_optimum():
    problem = HuberRegression(seed=4)
    opt = problem.optimum
    assert problem.per_user_gradient(opt).mean(dim=1).norm() < 1e-9
    gen = torch.Generator().manual_seed(0)
    neighbours = opt + 1e-2 * torch.randn(50, 4, dtype=torch.double, generator=gen)
    assert (problem.objective(neighbours) > problem.optimal_value).all()
    assert (opt - 1).abs().max() < 0.6  # close to θ* = 1 for n = 100
    torch.testing.assert_close(problem.default_theta0(), torch.zeros(4, dtype=torch.double))
