r"""Integer and categorical hyperparameters, next to the continuous ``Hyperparameter``.

``Integer(name, low, high)`` is **relaxed**: DP-GIBO searches a continuous coordinate and the
point sent to the objective is rounded (public post-processing of a public point). Each
integer ``k`` owns the interval ``[k − ½, k + ½]`` of search units (``[log10(k − ½),
log10(k + ½)]`` with ``log_scale``), so every value gets a share of the unit cube and the
search range ends half a step beyond ``low`` and ``high``. The GP then models the loss of the
rounded point, a step function of θ, with a smooth kernel: its gradient estimate is the slope
of a smooth interpolation across the steps, which suits integers with many values (a width of
16..128) and carries little information for one with a handful (use ``Categorical`` then).

``Categorical(name, choices)`` is **not** relaxed: it is no coordinate of θ. A search space
with categorical hyperparameters enumerates their ``configurations()``; ``with_choice`` fixes
them (``botorch_dp.tuning.SearchSpace``), so that one DP-GIBO run tunes the rest for each
configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "HYPERPARAMETER_TARGETS",
    "TRAINING_HYPERPARAMETERS",
    "Categorical",
    "HyperparameterTarget",
    "Integer",
    "check_name_and_target",
]

#: Where a hyperparameter goes: a keyword of the optimizer or of the model constructor, or a
#: setting of the DP-SGD run itself (``TRAINING_HYPERPARAMETERS``; searched only by
#: ``methods.training_runs.select_training_runs``, which bounds every trial's run).
HYPERPARAMETER_TARGETS: tuple[str, ...] = ("optimizer", "model", "training")
HyperparameterTarget = Literal["optimizer", "model", "training"]
#: The names a ``"training"`` hyperparameter may have: epochs, (expected) batch size, clip norm and
#: DP-SGD's noise multiplier ``σ`` (searched only at or above the least ``σ`` the selection's budget allows).
TRAINING_HYPERPARAMETERS: tuple[str, ...] = ("epochs", "batch_size", "max_grad_norm", "noise_multiplier")


def check_name_and_target(name: Any, target: Any) -> None:
    r"""Refuse a hyperparameter name that is no Python identifier (it is passed as a keyword) or
    a target other than ``HYPERPARAMETER_TARGETS`` and ``None`` (every kind checks this)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"Hyperparameter name must be a Python identifier (a keyword argument), got {name!r}.")
    if target is not None and target not in HYPERPARAMETER_TARGETS:
        raise ValueError(f"{name}: target must be one of {HYPERPARAMETER_TARGETS} or None, got {target!r}.")
    if target == "training" and name not in TRAINING_HYPERPARAMETERS:
        raise ValueError(f"{name}: target='training' is for {TRAINING_HYPERPARAMETERS} only, got {name!r}.")


@dataclass(frozen=True)
class Integer:
    r"""An integer hyperparameter in ``[low, high]``, relaxed to a continuous coordinate.

    Attributes:
        name: The keyword the natural value (a Python ``int``) is passed under.
        low: The smallest value (an integer).
        high: The largest value (an integer above ``low``).
        log_scale: Search ``log10`` (``low`` must then be at least 1): each value's share of
            the cube shrinks as ``log((k + ½)/(k − ½))``.
        target: ``"optimizer"``, ``"model"`` or ``None`` (inferred, as for ``Hyperparameter``).
    """

    name: str
    low: int
    high: int
    log_scale: bool = False
    target: HyperparameterTarget | None = None

    def __post_init__(self) -> None:
        check_name_and_target(self.name, self.target)
        for end in ("low", "high"):
            value = getattr(self, end)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or int(value) != value
            ):
                raise ValueError(f"{self.name}: Integer {end} must be an integer, got {value!r}.")
            object.__setattr__(self, end, int(value))
        if not self.low < self.high:
            raise ValueError(f"{self.name}: Integer low = {self.low} must be below high = {self.high}.")
        if self.log_scale and self.low < 1:
            raise ValueError(f"{self.name}: a log-scaled Integer needs low >= 1, got {self.low}.")

    @property
    def lower(self) -> float:
        return float(self.low)

    @property
    def upper(self) -> float:
        return float(self.high)

    @property
    def search_range(self) -> tuple[float, float]:
        r"""``[low − ½, high + ½]`` in search units (``log10`` of it with ``log_scale``)."""
        lo, hi = self.low - 0.5, self.high + 0.5
        return (math.log10(lo), math.log10(hi)) if self.log_scale else (lo, hi)

    def natural(self, search_value: float) -> int:
        r"""The integer a search-unit value rounds to (clamped to ``[low, high]``)."""
        value = 10.0**search_value if self.log_scale else search_value
        return int(min(max(math.floor(value + 0.5), self.low), self.high))

    def search_value(self, value: Any) -> float:
        r"""The search-unit centre of ``value``'s interval (``ValueError`` for a non-integer or out of range)."""
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or int(value) != value
            or not self.low <= value <= self.high
        ):
            raise ValueError(f"{self.name}: {value!r} is not an integer in [{self.low}, {self.high}].")
        if self.log_scale:
            return 0.5 * (math.log10(value - 0.5) + math.log10(value + 0.5))
        return float(value)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "integer",
            "low": self.low,
            "high": self.high,
            "log_scale": self.log_scale,
            "target": self.target,
        }


@dataclass(frozen=True)
class Categorical:
    r"""A categorical hyperparameter: one of ``choices`` (no coordinate of θ).

    Attributes:
        name: The keyword the chosen value is passed under.
        choices: The distinct values (plain Python values: str, int, float or bool), any
            sequence of them (a list, a tuple); stored as a tuple.
        target: ``"optimizer"``, ``"model"`` or ``None`` (inferred, as for ``Hyperparameter``).
    """

    name: str
    choices: Sequence[Any]
    target: HyperparameterTarget | None = None

    def __post_init__(self) -> None:
        check_name_and_target(self.name, self.target)
        if isinstance(self.choices, (str, bytes)) or not hasattr(self.choices, "__iter__"):
            raise ValueError(f"{self.name}: choices must be a sequence of values, got {self.choices!r}.")
        choices = tuple(self.choices)
        if not choices:
            raise ValueError(f"{self.name}: choices must not be empty.")
        bad = [c for c in choices if not isinstance(c, (str, int, float, bool))]
        if bad:
            raise ValueError(f"{self.name}: choices must be str, int, float or bool values, got {bad[0]!r}.")
        if len(set(choices)) != len(choices):
            raise ValueError(f"{self.name}: choices must be distinct, got {list(choices)}.")
        object.__setattr__(self, "choices", choices)

    def check(self, value: Any) -> Any:
        r"""``value`` if it is one of the choices, else ``ValueError`` naming them."""
        if value not in self.choices or any(value == c and type(value) is not type(c) for c in self.choices):
            raise ValueError(f"{self.name}: unknown choice {value!r}; the choices are {list(self.choices)}.")
        return value

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "categorical", "choices": list(self.choices), "target": self.target}
