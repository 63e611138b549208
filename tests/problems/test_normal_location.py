r"""Tests of problems/normal_location.py against numpy and autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from botorch_dp.problems import NormalLocation

DTYPES = (torch.float, torch.double)


def test_normal_location_against_numpy():
    problem = NormalLocation(seed=5)
    data = problem.data.numpy()
    assert data.shape == (50, 5)
    theta = np.array([[0.0] * 5, [1.0, -1.0, 2.0, 0.5, 3.0]])
    expected = 0.5 * ((data[None, :, :] - theta[:, None, :]) ** 2).sum(-1)
    for dtype in DTYPES:
        Y = problem(torch.tensor(theta, dtype=dtype))
        rtol = 1e-6 if dtype == torch.float else 1e-12
        np.testing.assert_allclose(Y.numpy(), expected, rtol=rtol)
    # Optimum = sample mean; mean gradient vanishes; optimal value formula.
    np.testing.assert_allclose(problem.optimum.numpy(), data.mean(0), rtol=1e-12)
    g = problem.per_user_gradient(problem.optimum)
    assert g.shape == (1, 50, 5)
    assert g.mean(dim=1).abs().max() < 1e-12
    expected_value = 0.5 * ((data - data.mean(0)) ** 2).sum(1).mean()
    assert problem.optimal_value == pytest.approx(expected_value, rel=1e-12)
    opt = problem.optimum
    assert bool(((opt > problem.bounds[0]) & (opt < problem.bounds[1])).all())
    torch.testing.assert_close(problem.default_theta0(), torch.zeros(5, dtype=torch.double))


def test_normal_location_gradient_and_kernel():
    problem = NormalLocation(seed=1)
    X = problem.sample_in_bounds(3, seed=2).requires_grad_(True)
    jac = torch.autograd.functional.jacobian(lambda x: problem.evaluate_true(x), X)  # q x n x q x d
    auto = torch.stack([jac[j, :, j, :] for j in range(3)])
    torch.testing.assert_close(problem.per_user_gradient(X.detach()), auto)
    kernel = problem.recommended_kernel()
    x, y = torch.randn(4, 5, dtype=torch.double), torch.randn(6, 5, dtype=torch.double)
    torch.testing.assert_close(kernel(x, y).to_dense(), (x @ y.T + 1) ** 2)
    assert not any(p.requires_grad for p in kernel.parameters())
