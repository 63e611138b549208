r"""Checking a tuned result in natural units: ``objective.evaluate(result.hyperparameters)``.

``NaturalEvaluation`` gives a tuning objective an ``evaluate`` method that takes the
hyperparameters ``tune`` released (natural units, categorical and integer values included) and
returns NON-PRIVATE diagnostics (``NonPrivateMetrics``), replacing the unit-cube round trip
``with_choice`` → ``SearchSpace.from_natural`` → ``evaluate_non_private``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from botorch_dp.objectives.search_space import SearchSpace

__all__ = ["NON_PRIVATE_BANNER", "NaturalEvaluation", "NonPrivateMetrics", "unit_point"]

#: What ``NonPrivateMetrics`` prints first.
NON_PRIVATE_BANNER = (
    "NON-PRIVATE diagnostics (computed from the validation/test data without protection; do not publish)"
)


class NonPrivateMetrics(dict[str, Any]):
    r"""A ``dict`` of NON-PRIVATE diagnostics whose ``repr`` says so before any number.

    The values were computed from the validation and test data without any privacy
    protection: look at them, do not publish them.
    """

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in self.items())
        return f"{NON_PRIVATE_BANNER}: {items}"

    __str__ = __repr__


def unit_point(space: SearchSpace, hyperparameters: Mapping[str, Any]) -> tuple[Tensor, dict[str, Any]]:
    r"""The unit-cube point and the categorical choice of natural ``hyperparameters``.

    Args:
        space: The objective's ``SearchSpace``.
        hyperparameters: ``{name: value}`` with every hyperparameter of ``space`` (e.g.
            ``TuneResult.hyperparameters``); a categorical fixed in ``space`` may be left out.

    Returns:
        ``(theta, choice)``: a ``d`` float64 tensor in ``[0, 1]^d`` and ``{name: value}`` of the
        categorical hyperparameters not fixed in ``space``.

    Raises:
        ValueError: Naming ``hyperparameters`` and the missing, unknown or out-of-range name
            (nothing is trained).
    """
    if not isinstance(hyperparameters, Mapping):
        raise ValueError(f"hyperparameters must be a mapping {{name: value}}, got {type(hyperparameters).__name__}.")
    names = [h.name for h in space.hyperparameters]
    unknown = [name for name in hyperparameters if name not in names]
    missing = [name for name in names if name not in hyperparameters and name not in space.fixed]
    if unknown or missing:
        raise ValueError(
            f"hyperparameters: {'unknown name(s) ' + str(unknown) if unknown else 'missing ' + str(missing)}; "
            f"the space's hyperparameters are {names}."
        )
    for name, value in space.fixed.items():
        if name in hyperparameters and hyperparameters[name] != value:
            raise ValueError(
                f"hyperparameters: {name} = {hyperparameters[name]!r}, but the objective's space fixes {name} = "
                f"{value!r}."
            )
    choice = {h.name: hyperparameters[h.name] for h in space.categoricals if h.name not in space.fixed}
    try:  # from_natural refuses a value outside its range (for every kind) and names it
        theta = space.with_choice(choice).from_natural(hyperparameters)
    except ValueError as err:
        raise ValueError(f"hyperparameters: {err}") from None
    return theta.clamp(0.0, 1.0), choice


class NaturalEvaluation:
    r"""Mixin of ``SearchSpaceObjective``s with a unit-cube ``evaluate_non_private(theta, label=)``:
    adds ``evaluate(hyperparameters)`` in natural units."""

    space: SearchSpace

    def with_choice(self, choice: Mapping[str, Any]) -> Any:  # provided by ``SearchSpaceObjective``
        raise NotImplementedError

    def evaluate_non_private(self, theta: Tensor, *, label: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def evaluate(self, hyperparameters: Mapping[str, Any], *, label: str | None = "evaluate") -> NonPrivateMetrics:
        r"""NON-PRIVATE: train once at natural ``hyperparameters`` and measure the model on the
        validation and test data, WITHOUT privacy protection (look, do not publish).

        The usual check of a tuned result: ``objective.evaluate(result.hyperparameters)``. It
        is the unit-cube round trip (``with_choice`` on the objective and the space,
        ``SearchSpace.from_natural``, ``evaluate_non_private``) in one call, categorical and
        integer values included. The training run uses the training data like any other
        evaluation: with DP training it is charged to the ledger (labelled ``label``) before
        it trains.

        Args:
            hyperparameters: ``{name: value}`` for every hyperparameter of the space, in
                natural units (e.g. ``TuneResult.hyperparameters``).
            label: Label of the training run's ledger id (``None``: none).

        Returns:
            ``NonPrivateMetrics``: a dict (e.g. ``validation_loss``, ``test_accuracy``) whose
            printout starts with "NON-PRIVATE diagnostics".

        Raises:
            ValueError: A missing, unknown or out-of-range hyperparameter, or a value that is
                not one of a categorical's choices, before anything trains.
        """
        theta, choice = unit_point(self.space, hyperparameters)
        bound = self.with_choice(choice) if choice else self
        return NonPrivateMetrics(bound.evaluate_non_private(theta.to(torch.float64), label=label))
