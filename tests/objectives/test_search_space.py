"""Tests for botorch_dp/objectives/search_space.py: the unit cube maps to natural units and back."""

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


def test_hyperparameters_are_routed_by_target_or_signature():
    from torch import nn

    from botorch_dp.tuning import route_hyperparameters

    space = SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 1.0, log_scale=True),
            Hyperparameter("momentum", 0.0, 0.99),
            Hyperparameter("dropout", 0.0, 0.5),
            Hyperparameter("width", 4, 64, log_scale=True, target="model"),
        ]
    )

    def model_fn(dropout, width):
        return nn.Linear(2, int(width))

    assert route_hyperparameters(space, torch.optim.SGD, model_fn) == {
        "lr": "optimizer",
        "momentum": "optimizer",
        "dropout": "model",
        "width": "model",
    }
    # **kwargs on one side only takes what the other side does not name
    assert route_hyperparameters(space, torch.optim.SGD, lambda **kw: None)["dropout"] == "model"
    # Adam has no momentum keyword: refused, naming it and both signatures
    with pytest.raises(ValueError, match="'momentum' is a keyword of neither.*Adam takes .*'lr'"):
        route_hyperparameters(space, torch.optim.Adam, model_fn)
    # a name both sides list is ambiguous until a target says where it goes
    with pytest.raises(ValueError, match="'lr' is a keyword of both"):
        route_hyperparameters(space, torch.optim.SGD, lambda lr, momentum, dropout, width: None)
    explicit = SearchSpace([Hyperparameter("lr", 1e-4, 1.0, log_scale=True, target="model")])
    assert route_hyperparameters(explicit, torch.optim.SGD, lambda lr: None) == {"lr": "model"}
    with pytest.raises(ValueError, match="target"):
        Hyperparameter("lr", 1e-4, 1.0, target="loss")
    with pytest.raises(ValueError, match="identifier"):
        Hyperparameter("learning rate", 1e-4, 1.0)


def test_recommended_kernel_is_fixed_and_depends_only_on_the_space():
    space = default_mlp_space()
    kernel = space.recommended_kernel()
    assert kernel.base_kernel.lengthscale.shape == (1, 3) and kernel.base_kernel.lengthscale.dtype == torch.float64
    torch.testing.assert_close(kernel.base_kernel.lengthscale, torch.full((1, 3), 0.2, dtype=torch.float64))
    assert float(kernel.outputscale) == pytest.approx(1.0)
    assert not any(p.requires_grad for p in kernel.parameters())
    x = torch.rand(4, 3, dtype=torch.float64)
    K = kernel(x).to_dense()
    # k(x, x') = exp(-|x - x'|² / (2 ℓ²)) with ℓ = 0.2
    expected = torch.exp(-torch.cdist(x, x).pow(2) / (2 * 0.2**2))
    torch.testing.assert_close(K, expected, rtol=1e-6, atol=1e-8)


def test_from_natural_refuses_out_of_range_values_for_floats_as_for_integers():
    from botorch_dp.tuning import Integer

    space = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Integer("width", 16, 128)])
    inside = {"lr": 1e-2, "width": 64}
    theta = space.from_natural(inside)
    assert ((theta > 0) & (theta < 1)).all() and space.to_natural(theta) == pytest.approx(inside)
    for bad, match in [
        ({"lr": 0.5, "width": 64}, r"lr: 0\.5 lies outside its range \[0\.0001, 0\.1\]"),
        ({"lr": 1e-5, "width": 64}, r"lr: 1e-05 lies outside its range"),
        ({"lr": 1e-2, "width": 129}, r"width: 129 is not an integer in \[16, 128\]"),
        ({"lr": math.nan, "width": 64}, r"lr: nan is not a number"),
        ({"lr": "0.01", "width": 64}, r"lr: '0\.01' is not a number"),
    ]:
        with pytest.raises(ValueError, match=match):
            space.from_natural(bad)
    # the cube's corners round-trip although 10 ** log10(upper) may land a rounding error outside the range
    for corner in ([0.0, 0.0], [1.0, 1.0]):
        cube = torch.tensor(corner, dtype=torch.float64)
        back = space.from_natural(space.to_natural(cube))
        assert ((back >= 0) & (back <= 1)).all()
        torch.testing.assert_close(back[:1], cube[:1])
