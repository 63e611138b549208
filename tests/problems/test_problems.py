r"""Tests of the per-user benchmark problems against independent computations.

Small instances throughout; the references are numpy / sklearn / autograd, not the problems' code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.svm import SVR

from botorch_dp.problems import (
    PROBLEMS,
    GPRegressionLengthscales,
    HuberRegression,
    KernelSVMRegression,
    NormalLocation,
    PerUserProblem,
    get_problem,
)

DTYPES = (torch.float, torch.double)


def _small(name: str, **kwargs) -> PerUserProblem:
    small = {
        "normal_location": {},
        "huber": {},
        "gp_regression": {"dim": 3, "n_total": 120},
        "svm": {"n_train": 60, "n_val": 40, "num_features": 5},
    }[name]
    return get_problem(name, **{**small, **kwargs})


# ----------------------------------------------------------------- interface
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_interface_shapes_and_determinism(name):
    problem = _small(name, seed=3)
    d, n = problem.dim, problem.num_users
    assert problem.bounds.shape == (2, d) and problem.bounds.dtype == torch.double
    assert problem.name == name
    theta0 = problem.default_theta0()
    assert theta0.shape == (d,)
    assert bool(((theta0 >= problem.bounds[0]) & (theta0 <= problem.bounds[1])).all())
    for dtype in DTYPES:
        X = problem.sample_in_bounds(4, seed=0).to(dtype)
        Y = problem(X)
        assert Y.shape == (4, n) and Y.dtype == torch.double
        assert torch.isfinite(Y).all()
        assert problem(X[0]).shape == (1, n)
        assert problem(X.view(2, 2, d)).shape == (2, 2, n)
        assert problem.objective(X).shape == (4,)
        torch.testing.assert_close(problem.objective(X), Y.mean(dim=-1))
    # Same seed -> same data and losses; another seed -> other data.
    X = problem.sample_in_bounds(2, seed=1)
    torch.testing.assert_close(_small(name, seed=3)(X), problem(X), rtol=0, atol=0)
    assert not torch.allclose(_small(name, seed=4)(X), problem(X))
    with pytest.raises(ValueError):
        problem(torch.zeros(2, d + 1))


def test_get_problem_unknown():
    with pytest.raises(ValueError, match="Unknown problem"):
        get_problem("nope")


def test_sample_in_bounds_does_not_touch_global_rng():
    problem = NormalLocation()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    problem.sample_in_bounds(5, seed=1)
    NormalLocation(seed=7)(torch.zeros(2, 5))
    torch.testing.assert_close(torch.rand(3), expected)


# -------------------------------------------------------- observation noise
def test_observation_noise_shared_across_users_with_stated_std():
    sigma = 0.3
    problem = NormalLocation(seed=0, observation_noise_std=sigma)
    X = torch.rand(20000, 5, dtype=torch.double, generator=torch.Generator().manual_seed(1))
    residual = problem(X) - problem.evaluate_true(X)
    # One draw per evaluated point, shared by every user.
    torch.testing.assert_close(residual, residual[:, :1].expand_as(residual))
    eps = residual[:, 0]
    # std error of the sample std is sigma / sqrt(2 * 20000) ~ 0.5 %.
    assert abs(eps.std().item() - sigma) < 0.03 * sigma
    assert abs(eps.mean().item()) < 4 * sigma / math.sqrt(20000)
    # The mean loss then has noise sigma as well (Appendix E.5: f + λZ).
    assert abs((problem(X).mean(-1) - problem.objective(X)).std().item() - sigma) < 0.03 * sigma
    # Reproducible per seed; the noise stream differs from the data stream.
    first = NormalLocation(seed=0, observation_noise_std=sigma)(X[:10])
    torch.testing.assert_close(NormalLocation(seed=0, observation_noise_std=sigma)(X[:10]), first)
    assert not torch.allclose(NormalLocation(seed=1, observation_noise_std=sigma)(X[:10]), first)
    unit = NormalLocation(seed=0, observation_noise_std=1.0)
    noise_draw = unit(X[:1]) - unit.evaluate_true(X[:1])
    data_draw = problem.data[0, 0] - problem.true_location[0]
    assert not torch.isclose(noise_draw[0, 0], data_draw)
    assert problem.objective(X[:3]).shape == (3,)  # the diagnostic is noise free
    torch.testing.assert_close(problem.objective(X[:3]), problem.evaluate_true(X[:3]).mean(-1))


def test_gp_observation_noise_e5():
    problem = GPRegressionLengthscales(dim=2, n_total=30, seed=0, observation_noise_std=0.01)
    X = problem.default_theta0().expand(400, 2)
    eps = (problem(X) - problem.evaluate_true(X))[:, 0]
    assert abs(eps.std().item() - 0.01) < 0.15 * 0.01


# ---------------------------------------------------------- normal location
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


# -------------------------------------------------------------------- Huber
def _huber_scalar(theta, x, y, c=1.0):
    r = y - sum(a * b for a, b in zip(x, theta))
    rho = 0.5 * r * r if abs(r) <= c else c * abs(r) - 0.5 * c * c
    return rho * min(1.0, 2.0 / sum(a * a for a in x))


def test_huber_against_scalar_reimplementation():
    problem = HuberRegression(seed=2)
    xs, ys = problem.covariates.tolist(), problem.responses.tolist()
    X = problem.sample_in_bounds(3, seed=0)
    Y = problem(X)
    assert Y.shape == (3, 100)
    for j, theta in enumerate(X.tolist()):
        expected = [_huber_scalar(theta, x, y) for x, y in zip(xs, ys)]
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
    fd = torch.stack(
        [(f((theta + h * e)[None]) - f((theta - h * e)[None]))[0] / (2 * h) for e in torch.eye(4)],
        dim=-1,
    )
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


# ------------------------------------------------------------ GP regression
def test_gp_regression_against_sklearn():
    problem = GPRegressionLengthscales(dim=3, n_total=120, noise_std=0.1, outputscale=1.5, seed=1)
    assert problem.num_users == 60 and problem.train_X.shape == (60, 3)
    X = torch.tensor([[0.3, 1.0, 4.0], [2.0, 0.7, 0.1]], dtype=torch.double)
    Y = problem(X)
    for j, ls in enumerate(X.tolist()):
        gpr = GaussianProcessRegressor(
            kernel=ConstantKernel(1.5, "fixed") * RBF(ls, "fixed"),
            alpha=0.1**2,
            optimizer=None,
            normalize_y=False,
        ).fit(problem.train_X.numpy(), problem.train_Y.numpy())
        expected = (gpr.predict(problem.val_X.numpy()) - problem.val_Y.numpy()) ** 2
        np.testing.assert_allclose(Y[j].numpy(), expected, rtol=1e-7, atol=1e-10)


def test_gp_regression_chunking_projection_and_truth():
    kwargs = dict(dim=4, n_total=400, seed=0, true_lengthscales=torch.tensor([0.8, 1.5, 3.0, 4.0]))
    problem = GPRegressionLengthscales(chunk_size=1, **kwargs)
    X = problem.sample_in_bounds(5, seed=0)
    torch.testing.assert_close(
        problem(X), GPRegressionLengthscales(chunk_size=16, **kwargs)(X), rtol=1e-9, atol=1e-12
    )
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


# --------------------------------------------------------------------- SVM
def _rbf_gram(A, B, scale, gamma):
    d2 = (((A[:, None, :] - B[None, :, :]) * scale) ** 2).sum(-1)
    return np.exp(-gamma * d2)


def test_svm_against_precomputed_kernel_svr():
    problem = KernelSVMRegression(n_train=60, n_val=40, num_features=5, seed=0)
    assert problem.dim == 8 and problem.num_users == 40
    theta = torch.tensor(
        [[0.5, -1.0, 0.0, 1.5, -0.3, 0.1, 2.0, 0.7], [-2.0, 2.0, 1.0, 0.0, 0.0, 0.5, 0.5, 3.0]],
        dtype=torch.double,
    )
    Y = problem(theta)
    for j, t in enumerate(theta.numpy()):
        scale = np.exp(-t[:5])
        K_tr = _rbf_gram(problem.train_X, problem.train_X, scale, t[7])
        K_va = _rbf_gram(problem.val_X, problem.train_X, scale, t[7])
        svr = SVR(kernel="precomputed", epsilon=t[5], C=t[6]).fit(K_tr, problem.train_Y)
        expected = (svr.predict(K_va) - problem.val_Y) ** 2
        np.testing.assert_allclose(Y[j].numpy(), expected, rtol=1e-6, atol=1e-8)


def test_svm_standardizes_with_training_statistics_only():
    rng = np.random.default_rng(0)
    N, P, p = 50, 7, 4
    X_all = rng.normal(loc=3.0, scale=2.0, size=(N, P))
    y_all = rng.normal(loc=-5.0, scale=4.0, size=N)
    problem = KernelSVMRegression(data=(X_all, y_all), n_train=20, n_val=25, num_features=p, seed=1)
    assert problem.dim == p + 3 and len(problem.feature_indices) == p
    tr, va, f = problem.train_indices, problem.val_indices, problem.feature_indices
    assert len(tr) == 20 and len(va) == 25 and not set(tr) & set(va)
    mu_x, sd_x = X_all[np.ix_(tr, f)].mean(0), X_all[np.ix_(tr, f)].std(0)
    mu_y, sd_y = y_all[tr].mean(), y_all[tr].std()
    np.testing.assert_allclose(problem.train_X, (X_all[np.ix_(tr, f)] - mu_x) / (sd_x * np.sqrt(p)))
    np.testing.assert_allclose(problem.val_X, (X_all[np.ix_(va, f)] - mu_x) / (sd_x * np.sqrt(p)))
    np.testing.assert_allclose(problem.val_Y, (y_all[va] - mu_y) / sd_y)
    plain = KernelSVMRegression(
        data=(X_all, y_all), n_train=20, n_val=25, num_features=p, seed=1,
        normalize_by_num_features=False,
    )
    np.testing.assert_allclose(plain.val_X, (X_all[np.ix_(va, f)] - mu_x) / sd_x)


def test_svm_ct_slice_csv_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    N, P = 40, 12
    patient = rng.integers(0, 5, size=N)
    X = rng.uniform(size=(N, P))
    X[:, 4] = 0.0  # a constant column, as in the real data
    y = rng.uniform(0, 100, size=N)
    path = tmp_path / "slice_localization_data.csv"
    header = ",".join(["patientId"] + [f"value{k}" for k in range(P)] + ["reference"])
    rows = [
        ",".join([str(patient[i])] + [repr(float(v)) for v in X[i]] + [repr(float(y[i]))])
        for i in range(N)
    ]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")

    problem = KernelSVMRegression.from_ct_slice_csv(
        path, n_train=20, n_val=15, num_features=6, seed=2
    )
    direct = KernelSVMRegression(data=(X, y), n_train=20, n_val=15, num_features=6, seed=2)
    assert problem.dim == 9 and problem.num_users == 15
    np.testing.assert_array_equal(problem.feature_indices, direct.feature_indices)
    np.testing.assert_allclose(problem.train_X, direct.train_X, rtol=0, atol=0)
    np.testing.assert_allclose(problem.val_Y, direct.val_Y, rtol=0, atol=0)
    theta = problem.sample_in_bounds(2, seed=0)
    torch.testing.assert_close(problem(theta), direct(theta))
    assert torch.isfinite(problem(theta)).all()

    bad = tmp_path / "bad.csv"
    bad.write_text("id,value0,reference\n1,0.5,3.0\n")
    with pytest.raises(ValueError, match="patientId"):
        KernelSVMRegression.from_ct_slice_csv(bad)
