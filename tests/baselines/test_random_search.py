"""Tests for botorch_dp.baselines.random_search against closed-form optima."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.baselines import random_search
from botorch_dp.problems import NormalLocation


def test_random_search_gets_close_to_sample_mean():
    problem = NormalLocation(dim=2, num_users=40, seed=3)
    res = random_search(problem, problem.bounds, num_evaluations=2000, seed=1)
    assert res.guarantee is None and not res.is_private and not res.history.public
    assert res.num_evaluations == 2000
    # nearest of 2000 uniform points in a 6 x 6 box is ~0.08 away on average
    assert (res.theta - problem.optimum).norm() < 0.3
    # it returned the best evaluated point, and the history holds the true mean losses
    torch.testing.assert_close(res.history.mean_losses, problem.objective(res.history.points))
    assert torch.equal(res.theta, res.history.points[res.history.mean_losses.argmin()])
    best = problem.objective(res.history.iterates)
    assert (best[1:] <= best[:-1]).all()


def test_random_search_accepts_a_callable_and_rejects_bad_losses():
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    res = random_search(lambda X: X.square().sum(-1, keepdim=True).expand(-1, 3), bounds, num_evaluations=50)
    assert res.theta.shape == (2,)
    with pytest.raises(ValueError, match="non-finite"):
        random_search(lambda X: torch.full((X.shape[0], 3), math.nan, dtype=torch.float64), bounds, num_evaluations=5)
