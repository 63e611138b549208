"""Tests for botorch_dp.baselines.ucb on a quadratic with a closed-form minimizer."""

from __future__ import annotations

import torch

from botorch_dp.baselines import ucb_bo


def test_ucb_bo_on_a_2d_quadratic():
    centers = torch.tensor([[0.2, -0.3], [0.4, -0.1], [0.3, -0.5]], dtype=torch.float64)
    optimum = centers.mean(0)  # minimizer of the mean of ‖θ − c_i‖²
    objective = lambda X: (X.unsqueeze(-2) - centers).square().sum(-1)  # q x 3
    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    res = ucb_bo(objective, bounds, num_evaluations=24, num_initial=6, beta=0.5, seed=0, raw_samples=64)
    assert res.num_evaluations == 24 and res.guarantee is None
    assert res.history.points.shape == (24, 2)
    assert (res.theta - optimum).norm() < 0.1
    torch.testing.assert_close(res.history.mean_losses, objective(res.history.points).mean(-1))
