r"""The search space of hyperparameters: the unit cube DP-GIBO searches ↦ natural units.

Coordinates: DP-GIBO works on the unit cube ``[0, 1]^d``, so that one kernel
length-scale, one search radius and one step size fit every hyperparameter; a
``SearchSpace`` maps a point of the cube to natural units (log-uniformly for
log-scaled hyperparameters such as the learning rate).

Each hyperparameter is passed by name, as a keyword argument, either to the optimizer
(e.g. ``lr``, ``weight_decay``, ``momentum`` of any ``torch.optim`` class) or to the
model's constructor (e.g. ``dropout``); ``route_hyperparameters`` decides which, from
``Hyperparameter.target`` or from the two signatures.

Continuous ``Hyperparameter``s and ``Integer``s (relaxed, rounded on the way out;
``objectives.discrete``) are the coordinates of θ; ``Categorical``s are not: a space with them
lists their ``configurations()``, and ``with_choice`` fixes them for one run.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from torch import Tensor

from botorch_dp.objectives.discrete import (
    HYPERPARAMETER_TARGETS,
    TRAINING_HYPERPARAMETERS,
    Categorical,
    HyperparameterTarget,
    Integer,
    check_name_and_target,
)

__all__ = [
    "HYPERPARAMETER_TARGETS",
    "TRAINING_HYPERPARAMETERS",
    "Categorical",
    "Hyperparameter",
    "Integer",
    "SearchSpace",
    "SearchSpaceObjective",
    "default_mlp_space",
    "keyword_parameters",
    "route_hyperparameters",
]


#: Relative slack (of a range's width) within which ``from_natural`` clamps a value onto the range:
#: ``to_natural`` at a cube corner may land a rounding error outside it (``10 ** log10(upper)``).
_ROUND_TRIP_RTOL = 1e-9


@dataclass(frozen=True)
class Hyperparameter:
    r"""A continuous hyperparameter with a public range.

    Attributes:
        name: The key under which the natural value is passed to the model and trainer.
        lower: Lower end of the range in natural units.
        upper: Upper end of the range in natural units.
        log_scale: Search ``log10`` of the value (``lower`` must then be positive).
        target: ``"optimizer"`` (a keyword argument of the optimizer, e.g. ``lr``) or
            ``"model"`` (a keyword argument of ``model_fn``, e.g. ``dropout``); ``None``
            (default) infers it from the signatures (see ``route_hyperparameters``). The
            value is a float; round it inside ``model_fn`` for an integer setting.
    """

    name: str
    lower: float
    upper: float
    log_scale: bool = False
    target: HyperparameterTarget | None = None

    def __post_init__(self) -> None:
        check_name_and_target(self.name, self.target)
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError(f"{self.name}: lower and upper must be finite.")
        if not self.lower < self.upper:
            raise ValueError(f"{self.name}: lower must be below upper.")
        if self.log_scale and self.lower <= 0:
            raise ValueError(f"{self.name}: a log-scaled range must be positive.")

    @property
    def search_range(self) -> tuple[float, float]:
        r"""The range in search units (``log10`` for log-scaled hyperparameters)."""
        if self.log_scale:
            return math.log10(self.lower), math.log10(self.upper)
        return float(self.lower), float(self.upper)

    def natural(self, search_value: float) -> float:
        r"""The natural value of a search-unit value (``10^s`` for log-scaled ones)."""
        return 10.0**search_value if self.log_scale else search_value

    def search_value(self, value: Any) -> float:
        r"""The search-unit value of a natural one (``ValueError`` for a non-number or a value outside
        ``[lower, upper]``, as ``Integer`` refuses one outside its range; a value off by a rounding
        error of the round trip through ``to_natural`` is clamped onto the range)."""
        try:
            number = float(value) if not isinstance(value, (bool, str, bytes)) else math.nan
        except (TypeError, ValueError, RuntimeError):
            number = math.nan
        if math.isnan(number):
            raise ValueError(f"{self.name}: {value!r} is not a number in [{self.lower}, {self.upper}].")
        slack = _ROUND_TRIP_RTOL * (self.upper - self.lower)
        if not self.lower - slack <= number <= self.upper + slack:
            raise ValueError(f"{self.name}: {value!r} lies outside its range [{self.lower}, {self.upper}].")
        number = min(max(number, self.lower), self.upper)
        return math.log10(number) if self.log_scale else number

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "continuous",
            "lower": self.lower,
            "upper": self.upper,
            "log_scale": self.log_scale,
            "target": self.target,
        }


class SearchSpace:
    r"""Maps the unit cube ``[0, 1]^d`` that DP-GIBO searches to natural hyperparameters.

    Coordinate ``u_j ∈ [0, 1]`` becomes ``s_j = a_j + u_j (b_j − a_j)`` in search units
    (``[a_j, b_j]`` = ``search_range``) and then ``10^{s_j}`` for log-scaled hyperparameters,
    ``s_j`` otherwise, rounded for an ``Integer``. The ``d`` coordinates are the continuous and
    integer hyperparameters, in the order given (``relaxed``); ``Categorical`` ones are fixed
    per run (``with_choice``), or enumerated (``configurations``).

    Args:
        hyperparameters: ``Hyperparameter``, ``Integer`` and ``Categorical`` objects.
        fixed: Values of categorical hyperparameters fixed for this space (``with_choice``).
    """

    def __init__(
        self, hyperparameters: Sequence[Hyperparameter | Integer | Categorical], fixed: Mapping[str, Any] | None = None
    ) -> None:
        self.hyperparameters = tuple(hyperparameters)
        bad = [h for h in self.hyperparameters if not isinstance(h, (Hyperparameter, Integer, Categorical))]
        if bad:
            raise ValueError(f"A search space holds Hyperparameter, Integer and Categorical objects, got {bad[0]!r}.")
        names = [h.name for h in self.hyperparameters]
        if len(set(names)) != len(names):
            raise ValueError(f"Hyperparameter names must be unique, got {names}.")
        self.relaxed = tuple(h for h in self.hyperparameters if not isinstance(h, Categorical))
        self.categoricals = tuple(h for h in self.hyperparameters if isinstance(h, Categorical))
        if not self.relaxed:
            raise ValueError(
                "A search space needs at least one continuous or integer hyperparameter (a coordinate "
                "of θ); with categorical ones only, use private selection among them."
            )
        self.fixed = self._checked_choice(fixed or {}, partial=True)

    def _checked_choice(self, choice: Mapping[str, Any], partial: bool = False) -> dict[str, Any]:
        by_name = {h.name: h for h in self.categoricals}
        unknown = [name for name in choice if name not in by_name]
        if unknown:
            raise ValueError(
                f"{unknown[0]!r} is not a categorical hyperparameter of the space (those are {list(by_name)})."
            )
        missing = [name for name in by_name if name not in choice and name not in getattr(self, "fixed", {})]
        if missing and not partial:
            raise ValueError(f"choose a value for the categorical hyperparameter(s) {missing}.")
        return {name: by_name[name].check(value) for name, value in choice.items()}

    def with_choice(self, choice: Mapping[str, Any]) -> SearchSpace:
        r"""The same space with these categorical values fixed (the θ coordinates unchanged)."""
        return SearchSpace(self.hyperparameters, {**self.fixed, **self._checked_choice(choice, partial=True)})

    def configurations(self) -> list[dict[str, Any]]:
        r"""Every combination of the categorical values not fixed yet (``[{}]`` without any)."""
        free = [h for h in self.categoricals if h.name not in self.fixed]
        return [
            dict(zip([h.name for h in free], values, strict=True))
            for values in itertools.product(*(h.choices for h in free))
        ]

    @property
    def dim(self) -> int:
        r"""``d``: the continuous and integer hyperparameters (θ's coordinates)."""
        return len(self.relaxed)

    @property
    def names(self) -> list[str]:
        r"""The names of θ's coordinates, in order."""
        return [h.name for h in self.relaxed]

    @property
    def bounds(self) -> Tensor:
        r"""``2 x d`` float64 tensor of the unit cube (the box Θ of DP-GIBO)."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)

    def to_search_units(self, theta: Tensor) -> Tensor:
        r"""Unit-cube coordinates to search units (``log10`` for log-scaled ones).

        Args:
            theta: A ``batch_shape x d`` tensor in ``[0, 1]^d``.

        Returns:
            A ``batch_shape x d`` float64 tensor.
        """
        theta = torch.as_tensor(theta, dtype=torch.float64)
        lo, hi = torch.tensor([h.search_range for h in self.relaxed], dtype=torch.float64).T
        return lo + theta.clamp(0.0, 1.0) * (hi - lo)

    def to_natural(
        self, theta: Tensor, choice: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        r"""Unit-cube coordinates to natural hyperparameter values (integers rounded), with every
        categorical value (``fixed``, then ``choice``).

        Args:
            theta: A ``d`` tensor or a ``q x d`` tensor in ``[0, 1]^d`` (values outside are
                clamped).
            choice: Values of the categorical hyperparameters not fixed in the space; each must
                be given (``ValueError`` naming what is missing, unknown or not a choice).

        Returns:
            ``{name: value}`` in the space's order for a ``d`` tensor, a list of ``q`` such
            dicts otherwise; plain Python values (float, int, or the categorical choice).
        """
        chosen = {**self.fixed, **self._checked_choice(choice or {})}
        s = self.to_search_units(theta)
        single = s.dim() == 1
        rows = []
        for row in s.reshape(-1, self.dim).tolist():
            values = {**chosen, **{h.name: h.natural(v) for h, v in zip(self.relaxed, row, strict=True)}}
            rows.append({h.name: values[h.name] for h in self.hyperparameters})
        return rows[0] if single else rows

    def from_natural(self, values: Mapping[str, float]) -> Tensor:
        r"""Natural hyperparameter values to unit-cube coordinates.

        Args:
            values: ``{name: value}`` with every continuous and integer hyperparameter of the
                space, inside its range (a value outside it is refused, for both kinds; an
                integer's value lands at the centre of its interval); categorical values, if
                given, must be choices.

        Returns:
            A ``d`` float64 tensor.
        """
        self._checked_choice({h.name: values[h.name] for h in self.categoricals if h.name in values}, partial=True)
        missing = [h.name for h in self.relaxed if h.name not in values]
        if missing:
            raise ValueError(f"values lacks the hyperparameter(s) {missing}.")
        out = []
        for h in self.relaxed:
            a, b = h.search_range
            out.append((h.search_value(values[h.name]) - a) / (b - a))
        return torch.tensor(out, dtype=torch.float64)

    def describe(self) -> list[dict[str, Any]]:
        r"""The space as plain values (for a JSON report), fixed categorical values included."""
        return [
            {**h.describe(), **({"fixed": self.fixed[h.name]} if h.name in self.fixed else {})}
            for h in self.hyperparameters
        ]

    def recommended_kernel(self, lengthscale: float = 0.2, outputscale: float = 1.0) -> ScaleKernel:
        r"""A scaled RBF kernel on the unit cube with FIXED, public hyperparameters.

        A length-scale of 0.2 (a fifth of every range) and a prior variance of 1 for a
        per-user loss suit losses of order one (e.g. a capped cross-entropy); they depend
        only on the space, never on the data, as DP-GIBO requires.

        Args:
            lengthscale: The RBF length-scale, in unit-cube coordinates.
            outputscale: The prior variance of a per-user loss.

        Returns:
            A float64 ``ScaleKernel(RBFKernel(ard_num_dims=d))`` with gradients off.
        """
        kernel = ScaleKernel(RBFKernel(ard_num_dims=self.dim)).to(torch.float64)
        kernel.base_kernel.lengthscale = torch.full((1, self.dim), float(lengthscale), dtype=torch.float64)
        kernel.outputscale = float(outputscale)
        return kernel.requires_grad_(False)


class SearchSpaceObjective:
    r"""Mixin of tuning objectives with a ``space`` (``SearchSpace``) and ``data`` (``ClassificationData``).

    ``dim`` and ``bounds`` are the search space's (the ``2 x d`` unit cube to hand to
    ``DPGIBOConfig``); ``num_users`` is the number of validation examples, one user each.
    """

    space: SearchSpace
    data: Any

    @property
    def dim(self) -> int:
        return self.space.dim

    @property
    def bounds(self) -> Tensor:
        r"""``2 x d`` unit cube, the box Θ to hand to ``DPGIBOConfig``."""
        return self.space.bounds

    @property
    def num_users(self) -> int:
        return len(self.data.y_val)

    @property
    def num_training_records(self) -> int:
        r"""The number of training examples (the records a DP-SGD training protects)."""
        return len(self.data.y_train)

    def with_choice(self, choice: Mapping[str, Any]) -> Any:
        r"""A shallow copy whose ``space`` fixes the categorical values ``choice``
        (``SearchSpace.with_choice``); everything else, a ledger included, is shared."""
        bound = copy.copy(self)
        bound.space = self.space.with_choice(choice)
        return bound


def keyword_parameters(fn: Callable[..., Any], *, skip_first: bool = False) -> tuple[set[str], bool]:
    r"""The names ``fn`` accepts as keyword arguments, and whether it takes ``**kwargs``.

    Args:
        fn: A function or a class (its constructor's signature).
        skip_first: Leave out the first positional parameter (an optimizer's ``params``).

    Returns:
        ``(names, takes_var_keyword)``; ``(set(), True)`` if the signature is unknown.
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    if (
        skip_first
        and parameters
        and parameters[0].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ):
        parameters = parameters[1:]
    names = {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def route_hyperparameters(
    space: SearchSpace, optimizer: Callable[..., Any], model_fn: Callable[..., Any]
) -> dict[str, str]:
    r"""Where each hyperparameter of ``space`` goes: ``"optimizer"`` or ``"model"``.

    An explicit ``Hyperparameter.target`` wins. Otherwise a name that the optimizer's
    signature lists (after its ``params``) goes to the optimizer, one that ``model_fn``'s
    signature lists goes to the model, a name of ``TRAINING_HYPERPARAMETERS`` (``epochs``,
    ``batch_size``, ``max_grad_norm``) that neither lists is ``"training"`` (a setting of the
    run itself), and when only one of them takes ``**kwargs`` the name goes there. A name
    both list, or neither, raises.

    Args:
        space: The ``SearchSpace``.
        optimizer: A ``torch.optim.Optimizer`` class or any ``(params, **kwargs) -> Optimizer``.
        model_fn: A model class or any ``(**kwargs) -> nn.Module``.

    Returns:
        ``{name: "optimizer" | "model" | "training"}`` in the space's order.

    Raises:
        ValueError: Naming the hyperparameter and the keywords each side accepts.
    """
    opt_names, opt_var = keyword_parameters(optimizer, skip_first=True)
    model_names, model_var = keyword_parameters(model_fn)
    routes: dict[str, str] = {}
    for h in space.hyperparameters:
        if h.target is not None:
            routes[h.name] = h.target
            continue
        in_opt, in_model = h.name in opt_names, h.name in model_names
        if in_opt and in_model:
            problem = "is a keyword of both the optimizer and model_fn"
        elif in_opt or in_model:
            routes[h.name] = "optimizer" if in_opt else "model"
            continue
        elif h.name in TRAINING_HYPERPARAMETERS:
            routes[h.name] = "training"
            continue
        elif opt_var != model_var:
            routes[h.name] = "optimizer" if opt_var else "model"
            continue
        else:
            problem = "is a keyword of neither the optimizer nor model_fn"
        raise ValueError(
            f"Hyperparameter {h.name!r} {problem}: the optimizer "
            f"{getattr(optimizer, '__name__', type(optimizer).__name__)} takes {sorted(opt_names)}, "
            f"model_fn takes {sorted(model_names)} (model_fn is called with the model's "
            "hyperparameters as keyword arguments). Rename it, or set "
            "Hyperparameter(..., target='optimizer') or target='model'."
        )
    return routes


def default_mlp_space() -> SearchSpace:
    r"""θ = (learning rate, weight decay, dropout rate) of an SGD-trained MLP.

    Learning rate in ``[1e-4, 0.3]`` and weight decay in ``[1e-6, 1e-1]`` (both searched
    in ``log10``), dropout in ``[0, 0.5]``. Public, chosen without looking at any data.
    """
    return SearchSpace(
        [
            Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
            Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
            Hyperparameter("dropout", 0.0, 0.5),
        ]
    )
