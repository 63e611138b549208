r"""botorch_dp.integrations.ax_theta (issue 32, item 4): θ between the unit cube, natural units and
Ax's parameter space, against hand-computed values, Ax's own transforms and the tuning search
space; errors show the values and refuse a θ given in the wrong units.
"""

from __future__ import annotations

import pytest
import torch
from ax.adapter.transforms.log import Log
from ax.adapter.transforms.remove_fixed import RemoveFixed
from ax.adapter.transforms.unit_x import UnitX
from ax.core.observation import ObservationFeatures
from ax.core.parameter import ChoiceParameter, FixedParameter, Parameter, ParameterType, RangeParameter
from ax.core.parameter_constraint import ParameterConstraint
from ax.core.search_space import SearchSpace

from botorch_dp.integrations.ax_theta import AxThetaSpace
from botorch_dp.objectives.search_space import Hyperparameter
from botorch_dp.objectives.search_space import SearchSpace as TuningSpace

F64 = torch.float64


def space_lr_dropout(with_fixed: bool = True) -> SearchSpace:
    r"""lr on a log scale in [1e-4, 1e-1], dropout in [0, 0.5] and (optionally) a fixed batch size."""
    parameters: list[Parameter] = [
        RangeParameter("lr", ParameterType.FLOAT, 1e-4, 1e-1, log_scale=True),
        RangeParameter("dropout", ParameterType.FLOAT, 0.0, 0.5),
    ]
    if with_fixed:
        parameters.append(FixedParameter("batch", ParameterType.INT, 64))
    return SearchSpace(parameters=parameters)


# ---------------------------------------------------------------------- the three unit systems
def test_maps_agree_with_hand_computed_values():
    space = AxThetaSpace(space_lr_dropout())
    assert space.names == ("lr", "dropout") and space.log_scale == (True, False) and space.fixed == {"batch": 64}
    assert repr(space) == "AxThetaSpace([lr in [0.0001, 0.1] (log scale), dropout in [0, 0.5]], fixed={'batch': 64})"
    # lr = 1e-3 is log10 -3 in Ax units, (−3 − (−4)) / 3 = 1/3 of the cube; dropout 0.2 is 0.2 / 0.5
    torch.testing.assert_close(space.to_unit({"lr": 1e-3, "dropout": 0.2}), torch.tensor([1 / 3, 0.4], dtype=F64))
    torch.testing.assert_close(space.to_unit([-3.0, 0.2], units="ax"), torch.tensor([1 / 3, 0.4], dtype=F64))
    torch.testing.assert_close(space.to_unit([1e-3, 0.2], units="natural"), torch.tensor([1 / 3, 0.4], dtype=F64))
    # the cube's centre: lr = 10^-2.5, dropout 0.25
    torch.testing.assert_close(space.from_unit([0.5, 0.5], "ax"), torch.tensor([-2.5, 0.25], dtype=F64))
    torch.testing.assert_close(space.from_unit([0.5, 0.5], "natural"), torch.tensor([10**-2.5, 0.25], dtype=F64))
    assert space.parameters([0.0, 1.0]) == pytest.approx({"lr": 1e-4, "dropout": 0.5, "batch": 64})
    torch.testing.assert_close(space.bounds("ax"), torch.tensor([[-4.0, 0.0], [-1.0, 0.5]], dtype=F64))


def test_round_trips_through_every_pair_of_unit_systems():
    space = AxThetaSpace(space_lr_dropout())
    u = torch.rand(50, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    for units in ("unit", "ax", "natural"):
        torch.testing.assert_close(space.to_unit(space.from_unit(u, units), units=units), u, rtol=0, atol=1e-12)
    # the corners map to the bounds exactly enough to be accepted back
    corners = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=F64)
    torch.testing.assert_close(space.to_unit(space.from_unit(corners, "natural"), units="natural"), corners)


def test_unit_cube_agrees_with_axs_own_transforms_and_with_the_tuning_searchspace_lr_dropout():
    ax_space = space_lr_dropout()
    space = AxThetaSpace(ax_space)
    points = [{"lr": 3e-4, "dropout": 0.05, "batch": 64}, {"lr": 0.07, "dropout": 0.45, "batch": 64}]
    features = [ObservationFeatures(parameters=dict(p)) for p in points]
    transformed = ax_space.clone()
    for transform in (RemoveFixed, Log, UnitX):  # AxGIBO's strategy's transforms, run by Ax
        t = transform(search_space=transformed)
        features = t.transform_observation_features(features)
        transformed = t.transform_search_space(transformed)
    for p, f in zip(points, features, strict=True):
        torch.testing.assert_close(
            space.to_unit(p), torch.tensor([f.parameters["lr"], f.parameters["dropout"]], dtype=F64)
        )
    # botorch_dp's own tuning space (log10 for log_scale) maps the cube the same way
    tuning = TuningSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Hyperparameter("dropout", 0.0, 0.5)])
    u = torch.rand(8, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    for row, natural in zip(u, tuning.to_natural(u), strict=True):
        assert space.parameters(row) == pytest.approx({**natural, "batch": 64}, rel=1e-12)


# ---------------------------------------------------------------------- errors show the values
def test_theta_outside_the_bounds_names_the_coordinate_its_value_and_the_bounds():
    space = AxThetaSpace(space_lr_dropout())
    with pytest.raises(
        ValueError, match=r"theta\[1\] \(dropout\) = 0\.7 in natural units lies outside its bounds \[0, 0\.5\]"
    ):
        space.to_unit({"lr": 1e-3, "dropout": 0.7})
    with pytest.raises(
        ValueError, match=r"theta\[0\] \(lr\) = 0\.5 in natural units lies outside its bounds \[0\.0001, 0\.1\]"
    ):
        space.to_unit([0.5, 0.2], units="natural")
    with pytest.raises(
        ValueError, match=r"theta\[0\] \(lr\) = 1\.2 in unit-cube coordinates lies outside its bounds \[0, 1\]"
    ):
        space.to_unit([1.2, 0.5], units="unit")


def test_a_unit_cube_theta_given_as_ax_units_is_refused_with_the_conversion():
    space = AxThetaSpace(space_lr_dropout())
    message = (
        r"theta\[0\] \(lr\) = 0\.5 in Ax units \(log10 for log-scale parameters\) lies outside its bounds "
        r"\[-4, -1\]; the values fit the box of unit-cube coordinates: if theta is in unit-cube coordinates, "
        r"pass units='unit'"
    )
    with pytest.raises(ValueError, match=message):
        space.to_unit([0.5, 0.5], units="ax")
    # numbers alone never pass: their units must be said
    with pytest.raises(ValueError, match=r"theta = \[0\.5, 0\.5\] comes without units: pass units='unit'"):
        space.to_unit([0.5, 0.5])
    # Ax units given as unit-cube coordinates: the hint names Ax units
    with pytest.raises(ValueError, match=r"theta\[0\] \(lr\) = -3 in unit-cube coordinates .* fit the box of Ax units"):
        space.to_unit([-3.0, 0.2], units="unit")
    with pytest.raises(ValueError, match=r"missing parameter\(s\) \['dropout'\], unknown \['lr_'\]"):
        space.to_unit({"lr": 1e-3, "lr_": 1.0})
    with pytest.raises(ValueError, match="is in natural units, got units='unit'"):
        space.to_unit({"lr": 1e-3, "dropout": 0.1}, units="unit")
    with pytest.raises(ValueError, match=r"units must be one of \('unit', 'ax', 'natural'\), got 'log'"):
        space.to_unit([0.5, 0.5], units="log")
    with pytest.raises(ValueError, match=r"theta has shape \(3,\); expected 2 coordinates \['lr', 'dropout'\]"):
        space.to_unit([0.5, 0.5, 0.5], units="unit")


def test_unsupported_search_spaces_are_refused_naming_the_parameter():
    choice = SearchSpace(
        parameters=[
            RangeParameter("lr", ParameterType.FLOAT, 1e-4, 1e-1, log_scale=True),
            ChoiceParameter("opt", ParameterType.STRING, values=["adam", "sgd"], is_ordered=False, sort_values=False),
        ]
    )
    with pytest.raises(ValueError, match=r"Parameter 'opt' \(ChoiceParameter, string\) is not supported"):
        AxThetaSpace(choice)
    integer = SearchSpace(parameters=[RangeParameter("layers", ParameterType.INT, 1, 8)])
    with pytest.raises(ValueError, match=r"Parameter 'layers' \(RangeParameter, int\) is not supported"):
        AxThetaSpace(integer)
    x, y = (RangeParameter(n, ParameterType.FLOAT, 0.0, 1.0) for n in "xy")
    constrained = SearchSpace(parameters=[x, y], parameter_constraints=[ParameterConstraint(inequality="x + y <= 1")])
    with pytest.raises(ValueError, match="parameter constraints"):
        AxThetaSpace(constrained)
    with pytest.raises(TypeError, match="Expected an Ax Client .* got dict"):
        AxThetaSpace({"lr": (1e-4, 1e-1)})
