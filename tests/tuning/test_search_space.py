"""Tests for botorch_dp/tuning/search_space.py: the unit cube maps to natural units and back."""

import math

import pytest
import torch

from botorch_dp.tuning import Hyperparameter, SearchSpace, default_mlp_space


def test_search_space_maps_unit_cube_to_natural_units():
    space = default_mlp_space()
    assert space.names == ["lr", "weight_decay", "dropout"]
    torch.testing.assert_close(space.bounds, torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64))
    p = space.to_natural(torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64))
    assert p["lr"] == pytest.approx(1e-4) and p["weight_decay"] == pytest.approx(1e-1)
    assert p["dropout"] == pytest.approx(0.25)
    (q,) = space.to_natural(torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64))
    assert q["lr"] == pytest.approx(math.sqrt(1e-4 * 0.3))  # log-uniform: geometric midpoint
    theta = torch.tensor([0.3, 0.9, 0.7], dtype=torch.float64)
    torch.testing.assert_close(space.from_natural(space.to_natural(theta)), theta)
    with pytest.raises(ValueError):
        Hyperparameter("lr", 0.0, 1.0, log_scale=True)
    with pytest.raises(ValueError):
        SearchSpace([Hyperparameter("a", 0, 1), Hyperparameter("a", 0, 2)])
