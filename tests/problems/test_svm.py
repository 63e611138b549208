r"""Tests of problems/svm.py against a precomputed-kernel SVR, training-only standardization
and the CT-slice CSV reader."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.svm import SVR

from botorch_dp.problems import KernelSVMRegression


def _rbf_gram(A, B, scale, gamma):
    d2 = (((A[:, None, :] - B[None, :, :]) * scale) ** 2).sum(-1)
    return np.exp(-gamma * d2)


def test_svm_against_precomputed_kernel_svr():
    problem = KernelSVMRegression(n_train=60, n_val=40, num_features=5, seed=0)
    assert problem.dim == 8 and problem.num_users == 40
    theta = torch.tensor(
        [[0.5, -1.0, 0.0, 1.5, -0.3, 0.1, 2.0, 0.7], [-2.0, 2.0, 1.0, 0.0, 0.0, 0.5, 0.5, 3.0]], dtype=torch.double
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
        data=(X_all, y_all), n_train=20, n_val=25, num_features=p, seed=1, normalize_by_num_features=False
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
    rows = [",".join([str(patient[i])] + [repr(float(v)) for v in X[i]] + [repr(float(y[i]))]) for i in range(N)]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")

    problem = KernelSVMRegression.from_ct_slice_csv(path, n_train=20, n_val=15, num_features=6, seed=2)
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
