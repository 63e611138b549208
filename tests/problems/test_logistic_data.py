"""Tests for problems/logistic_data.py: the published breast-cancer ranges, the stratified
splits with unit rows, and the simulated logistic model."""

import numpy as np
import pytest
import torch

import botorch_dp.problems.logistic_data as ld
from botorch_dp.problems import load_logistic_data


@pytest.fixture(scope="module")
def cancer():
    return load_logistic_data("breast_cancer", seed=0)


def test_breast_cancer_ranges_are_the_published_table_and_cover_the_data():
    from sklearn.datasets import load_breast_cancer

    lower, upper = ld.breast_cancer_ranges()
    X = load_breast_cancer().data
    assert lower.shape == upper.shape == (30,) and np.all(lower < upper)
    assert (lower[0], upper[0], lower[3], upper[3]) == (6.981, 28.11, 143.5, 2501.0)  # radius, area (mean)
    # the table is rounded to 3 decimals (1% of the narrowest ranges): the examples lie inside it up to that
    slack = 0.015 * (upper - lower)
    assert np.all(X >= lower - slack) and np.all(X <= upper + slack)
    assert np.all(X.min(0) <= lower + slack) and np.all(X.max(0) >= upper - slack)  # and the ranges are attained


def test_load_logistic_data_splits_with_unit_rows(cancer):
    sizes = cancer.sizes()
    assert sum(sizes.values()) == 569 and sizes == {"train": 284, "validation": 171, "test": 114}
    for X, y in ((cancer.X_train, cancer.y_train), (cancer.X_val, cancer.y_val), (cancer.X_test, cancer.y_test)):
        assert X.dtype == torch.float64 and X.shape[1] == 30
        assert torch.allclose(torch.linalg.vector_norm(X, dim=1), torch.ones(X.shape[0], dtype=torch.float64))
        assert set(y.unique().tolist()) == {0.0, 1.0}
    rows = lambda X: {tuple(r) for r in X.tolist()}
    assert not rows(cancer.X_train) & rows(cancer.X_val) and not rows(cancer.X_val) & rows(cancer.X_test)
    again = load_logistic_data("breast_cancer", seed=0)
    assert torch.equal(again.X_val, cancer.X_val)
    assert not torch.equal(load_logistic_data("breast_cancer", seed=1).X_val, cancer.X_val)
    with pytest.raises(ValueError, match="name"):
        load_logistic_data("adult")


def test_synthetic_labels_follow_the_logistic_model():
    X, y = ld.synthetic_logistic(4000, 50, seed=0, signal=5.0)
    assert X.shape == (4000, 50) and torch.allclose(X.norm(dim=1), torch.ones(4000, dtype=torch.float64))
    # the true direction classifies at about the Bayes rate E[sigmoid(|z|)], z ~ N(0, 25): 0.88
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=100.0, max_iter=2000).fit(X[:3000].numpy(), y[:3000].numpy())
    assert 0.83 < model.score(X[3000:].numpy(), y[3000:].numpy()) < 0.93
    X2, y2 = ld.synthetic_logistic(4000, 50, seed=0, signal=5.0)
    assert torch.equal(X, X2) and torch.equal(y, y2)
