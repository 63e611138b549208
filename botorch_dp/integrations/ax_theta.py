r"""θ in three coordinate systems for an Ax search space: the unit cube, natural units and Ax's
parameter space (``log10`` of log-scale parameters).

``AxThetaSpace`` maps between them (see ``botorch_dp.integrations.ax`` for where each is used),
and refuses a θ outside the bounds of its units with the coordinate, the value and the bounds,
with a hint when the values fit another system's box (a unit-cube θ given as Ax units).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from ax.core.experiment import Experiment
from ax.core.parameter import FixedParameter, ParameterType, RangeParameter
from ax.core.search_space import SearchSpace
from torch import Tensor

__all__ = ["UNITS", "AxThetaSpace", "Units"]

Units = Literal["unit", "ax", "natural"]
#: The coordinate systems of θ: the cube ``[0, 1]^d``, Ax's parameter space, natural units.
UNITS: tuple[str, ...] = ("unit", "ax", "natural")
_F64 = torch.float64
#: How each system is named in messages.
_NAMED = {
    "unit": "unit-cube coordinates",
    "ax": "Ax units (log10 for log-scale parameters)",
    "natural": "natural units",
}
_TOL = 1e-9  # relative slack on the bounds (log10 of a bound does not round-trip exactly)


def _search_space_of(source: Any) -> SearchSpace:
    r"""The ``SearchSpace`` of an Ax ``Client``, ``Experiment`` or ``SearchSpace``."""
    if isinstance(source, SearchSpace):
        return source
    if isinstance(source, Experiment):
        return source.search_space
    experiment = getattr(source, "_experiment", None)  # ax.api.Client (1.x has no public accessor)
    if isinstance(experiment, Experiment):
        return experiment.search_space
    raise TypeError(
        f"Expected an Ax Client (with configure_experiment called), Experiment or SearchSpace, got "
        f"{type(source).__name__}."
    )


class AxThetaSpace:
    r"""θ in the unit cube, in natural units and in Ax's parameter space (see the module docstring).

    The coordinates of θ are the search space's float range parameters, in its order;
    fixed parameters are kept aside (``fixed``) and added to every parameterization.
    Refused, with the parameter named: choice and integer parameters, logit scale, and
    parameter constraints (GIBO's local box search is continuous and unconstrained).

    Args:
        source: An Ax ``Client`` (after ``configure_experiment``), ``Experiment`` or ``SearchSpace``.
    """

    def __init__(self, source: Any) -> None:
        space = _search_space_of(source)
        if space.parameter_constraints:
            raise ValueError(
                f"The search space has parameter constraints ({space.parameter_constraints}); the GIBO "
                "integration searches a box around θ and supports none."
            )
        ranges, self.fixed = [], {}
        for p in space.parameters.values():
            if isinstance(p, FixedParameter):
                self.fixed[p.name] = p.value
            elif isinstance(p, RangeParameter) and p.parameter_type == ParameterType.FLOAT and not p.logit_scale:
                ranges.append(p)
            else:
                raise ValueError(
                    f"Parameter {p.name!r} ({type(p).__name__}, {p.parameter_type.name.lower()}"
                    f"{', logit scale' if getattr(p, 'logit_scale', False) else ''}) is not supported: θ's "
                    "coordinates are float range parameters (linear or log scale); fix the others."
                )
        if not ranges:
            raise ValueError("The search space has no float range parameter: θ would have no coordinate.")
        self.names: tuple[str, ...] = tuple(p.name for p in ranges)
        self.log_scale: tuple[bool, ...] = tuple(bool(p.log_scale) for p in ranges)
        self.natural_bounds = torch.tensor([[p.lower, p.upper] for p in ranges], dtype=_F64).T
        self.ax_bounds = torch.tensor(
            [[math.log10(p.lower), math.log10(p.upper)] if p.log_scale else [p.lower, p.upper] for p in ranges],
            dtype=_F64,
        ).T

    @property
    def dim(self) -> int:
        r"""``d``, the number of θ's coordinates."""
        return len(self.names)

    def bounds(self, units: Units) -> Tensor:
        r"""The ``2 x d`` box of θ in ``units``."""
        _check_units(units)
        if units == "unit":
            return torch.stack([torch.zeros(self.dim, dtype=_F64), torch.ones(self.dim, dtype=_F64)])
        return (self.ax_bounds if units == "ax" else self.natural_bounds).clone()

    # ------------------------------------------------------------------ the maps
    def _log_mask(self) -> Tensor:
        return torch.tensor(self.log_scale, dtype=torch.bool)

    def _ax_to_natural(self, s: Tensor) -> Tensor:
        return torch.where(self._log_mask(), torch.pow(10.0, s), s)

    def _natural_to_ax(self, x: Tensor) -> Tensor:
        return torch.where(self._log_mask(), torch.log10(x.clamp_min(torch.finfo(_F64).tiny)), x)

    def from_unit(self, u: Tensor | Sequence[float], units: Units) -> Tensor:
        r"""Unit-cube coordinates (a ``... x d`` tensor) in ``units``; ``u`` must lie in ``[0, 1]^d``."""
        _check_units(units)
        u = self._checked(u, "unit")
        if units == "unit":
            return u
        lo, hi = self.ax_bounds
        s = lo + u * (hi - lo)
        return s if units == "ax" else self._ax_to_natural(s)

    def to_unit(self, theta: Tensor | Sequence[float] | Mapping[str, Any], units: Units | None = None) -> Tensor:
        r"""θ in unit-cube coordinates, from ``units`` (required: numbers alone do not say their units).

        Args:
            theta: A ``... x d`` tensor or a list of ``d`` numbers in ``units``, or a mapping
                ``{name: natural value}`` (then ``units`` may be omitted or ``"natural"``).
            units: ``"unit"``, ``"ax"`` or ``"natural"``.

        Returns:
            A ``... x d`` float64 tensor in ``[0, 1]^d``.

        Raises:
            ValueError: Naming the coordinate, its value and the bounds when θ lies outside
                them, with a hint when the values look like another system's (e.g. a unit-cube
                θ given as Ax units).
        """
        if isinstance(theta, Mapping):
            if units not in (None, "natural"):
                raise ValueError(f"theta given as {{name: value}} is in natural units, got units={units!r}.")
            missing = [n for n in self.names if n not in theta]
            unknown = [n for n in theta if n not in self.names and n not in self.fixed]
            if missing or unknown:
                raise ValueError(
                    f"theta: missing parameter(s) {missing}, unknown {unknown}; the coordinates are {list(self.names)}."
                )
            theta, units = [float(theta[n]) for n in self.names], "natural"
        if units is None:
            raise ValueError(
                f"theta = {_show(theta)} comes without units: pass units='unit' (the cube [0, 1]^d), 'ax' "
                "(Ax's parameter space: log10 for log-scale parameters) or 'natural' (the values Ax "
                "reports), or a {name: natural value} dict."
            )
        x = self._checked(theta, _check_units(units))
        if units == "unit":
            return x
        s = x if units == "ax" else self._natural_to_ax(x)
        lo, hi = self.ax_bounds
        return ((s - lo) / (hi - lo)).clamp(0.0, 1.0)

    def parameters(self, u: Tensor | Sequence[float]) -> dict[str, Any]:
        r"""One unit-cube point as an Ax parameterization: ``{name: natural value}`` plus the fixed ones."""
        x = self.from_unit(torch.as_tensor(u, dtype=_F64).reshape(self.dim), "natural")
        return {**dict(zip(self.names, x.tolist(), strict=True)), **self.fixed}

    def _checked(self, theta: Any, units: str) -> Tensor:
        r"""``theta`` as a float64 ``... x d`` tensor inside the box of ``units``, or a ValueError."""
        x = torch.as_tensor(theta, dtype=_F64)
        if x.dim() == 0 or x.shape[-1] != self.dim:
            raise ValueError(
                f"theta has shape {tuple(x.shape)}; expected {self.dim} coordinates "
                f"{list(self.names)} in the last dimension."
            )
        if not torch.isfinite(x).all():
            raise ValueError(f"theta = {_show(x)} ({_NAMED[units]}) is not finite.")
        lo, hi = self.bounds(units)  # type: ignore[arg-type]
        slack = _TOL * (hi - lo)
        outside = ((x < lo - slack) | (x > hi + slack)).reshape(-1, self.dim).any(0)
        if outside.any():
            j = int(outside.nonzero()[0])
            value = x.reshape(-1, self.dim)[:, j]
            value = value[(value < lo[j] - slack[j]) | (value > hi[j] + slack[j])][0]
            raise ValueError(
                f"theta[{j}] ({self.names[j]}) = {float(value):.6g} in {_NAMED[units]} lies outside its bounds "
                f"[{float(lo[j]):.6g}, {float(hi[j]):.6g}]{self._hint(x, units)}."
            )
        return torch.minimum(torch.maximum(x, lo), hi)

    def _hint(self, x: Tensor, units: str) -> str:
        r"""Which other system the values would fit, if any (a unit-cube θ given as Ax units, ...)."""
        fits = [
            other
            for other in UNITS
            if other != units and bool(((x >= self.bounds(other)[0]) & (x <= self.bounds(other)[1])).all())  # type: ignore[arg-type]
        ]
        if not fits:
            return ""
        return (
            f"; the values fit the box of {' and of '.join(_NAMED[f] for f in fits)}: if theta is in "
            f"{_NAMED[fits[0]]}, pass units={fits[0]!r} (AxThetaSpace.to_unit and from_unit convert explicitly)"
        )

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{n} in [{lo:g}, {hi:g}]{' (log scale)' if g else ''}"
            for n, g, lo, hi in zip(self.names, self.log_scale, *self.natural_bounds.tolist(), strict=True)
        )
        return f"AxThetaSpace([{rows}], fixed={self.fixed})"


def _check_units(units: Any) -> str:
    if units not in UNITS:
        raise ValueError(f"units must be one of {UNITS}, got {units!r}.")
    return units


def _show(theta: Any) -> str:
    try:
        return str([round(v, 6) for v in torch.as_tensor(theta, dtype=_F64).reshape(-1).tolist()])
    except (TypeError, ValueError, RuntimeError):
        return repr(theta)
