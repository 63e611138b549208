"""Tests for botorch_dp.baselines.base."""

from __future__ import annotations

import torch

from botorch_dp.baselines import incumbent_history


def test_incumbent_history_is_the_best_so_far_by_hand():
    X = torch.arange(10.0, dtype=torch.float64).reshape(5, 2)
    values = torch.tensor([3.0, 1.0, 2.0, 0.5, 0.5], dtype=torch.float64)
    history = incumbent_history(X, values, {"beta": 2.0})
    # best among the first j + 1 points: indices 0, 1, 1, 3, 4 (the latest one on ties,
    # as the seeded runs have always reported it)
    assert torch.equal(history.iterates, X[[0, 1, 1, 3, 4]])
    assert history.evaluations.tolist() == [1, 2, 3, 4, 5]
    assert history.points is X and history.mean_losses is values
    assert not history.public and history.extras == {"beta": 2.0}
    assert incumbent_history(X[:1], values[:1]).extras == {}
