r"""Tests of problems/gp_regression.py against sklearn's GaussianProcessRegressor."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from botorch_dp.problems import GPRegressionLengthscales


def test_gp_observation_noise_e5():
    problem = GPRegressionLengthscales(dim=2, n_total=30, seed=0, observation_noise_std=0.01)
    X = problem.default_theta0().expand(400, 2)
    eps = (problem(X) - problem.evaluate_true(X))[:, 0]
    assert abs(eps.std().item() - 0.01) < 0.15 * 0.01


def test_gp_regression_against_sklearn():
    problem = GPRegressionLengthscales(dim=3, n_total=120, noise_std=0.1, outputscale=1.5, seed=1)
    assert problem.num_users == 60 and problem.train_X.shape == (60, 3)
    X = torch.tensor([[0.3, 1.0, 4.0], [2.0, 0.7, 0.1]], dtype=torch.double)
    Y = problem(X)
    for j, ls in enumerate(X.tolist()):
        gpr = GaussianProcessRegressor(
            kernel=ConstantKernel(1.5, "fixed") * RBF(ls, "fixed"), alpha=0.1**2, optimizer=None, normalize_y=False
        ).fit(problem.train_X.numpy(), problem.train_Y.numpy())
        expected = (gpr.predict(problem.val_X.numpy()) - problem.val_Y.numpy()) ** 2
        np.testing.assert_allclose(Y[j].numpy(), expected, rtol=1e-7, atol=1e-10)


def test_gp_regression_chunking_projection_and_truth():
    kwargs = dict(dim=4, n_total=400, seed=0, true_lengthscales=torch.tensor([0.8, 1.5, 3.0, 4.0]))
    problem = GPRegressionLengthscales(chunk_size=1, **kwargs)
    X = problem.sample_in_bounds(5, seed=0)
    torch.testing.assert_close(problem(X), GPRegressionLengthscales(chunk_size=16, **kwargs)(X), rtol=1e-9, atol=1e-12)
    # θ outside the box is evaluated at its projection.
    outside = torch.tensor([[0.0, 1.0, 9.0, -1.0]], dtype=torch.double)
    projected = torch.tensor([[0.05, 1.0, 5.0, 0.05]], dtype=torch.double)
    torch.testing.assert_close(problem(outside), problem(projected))
    # At the generating length-scales the loss is near the noise variance and
    # below that of random length-scales.
    at_truth = problem.objective(problem.true_lengthscales).item()
    assert at_truth < 3 * problem.noise_std**2
    assert (problem.objective(X) > at_truth).all()


def test_gp_regression_true_lengthscales_drawn_in_box():
    problem = GPRegressionLengthscales(dim=6, n_total=40, seed=9)
    ls = problem.true_lengthscales
    assert bool(((ls >= 0.05) & (ls <= 5.0)).all())
    assert problem.bounds[0].eq(0.05).all() and problem.bounds[1].eq(5.0).all()
