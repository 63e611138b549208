r"""Meters: what a charged step may record, and the record of each release just before its draw.

``PrivacyLedger.charge(bound, run_id=..., step=...)`` admits a step's worst case — every
release the step can make (``bound``: part name ↦ the largest event it may spend) — against
the budget before anything is drawn, holds it as a reservation, and yields a ``Meter``.
The mechanism of each release calls ``meter.record(part, event)`` immediately before it
draws its noise: a record exists whenever the noise does. The meter refuses an event
larger than its part's bound and a part recorded twice; leaving the ``with`` block gives
back what was not used. ``PrivacyLedger.charge_training`` does the same for training runs,
keyed by the runs' ids.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from botorch_dp.privacy.analysis.gdp import compose_gdp
from botorch_dp.privacy.ledger.events import (
    VALIDATION_EVENTS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PrivacyEvent,
    PureDP,
    TrainingEvent,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationEvent,
    ValidationMechanism,
    release_key,
)
from botorch_dp.privacy.ledger.filters import BUDGET_RTOL, ORDERS, event_rdp, gdp_only

__all__ = ["Meter", "TrainingMeter", "check_validation_bound", "fits_bound", "held_bound", "shrunk"]

_VALIDATION_EVENTS = VALIDATION_EVENTS
_TRAINING_EVENTS = (DPSGDRun, TrainingMechanism, ApproximateDP)


def check_validation_bound(bound: Any) -> dict[str, ValidationEvent]:
    r"""A step's bound: a non-empty mapping of part names to validation events."""
    if not isinstance(bound, Mapping) or not bound:
        raise ValueError(f"bound must be a non-empty mapping of part names to privacy events, got {bound!r}.")
    checked = {}
    for part, event in bound.items():
        release_key(0, part)  # a valid part name
        if not isinstance(event, _VALIDATION_EVENTS):
            raise ValueError(
                f"bound[{part!r}] must be a Gaussian, PureDP, ValidationMechanism or ValidationApproximateDP, "
                f"got {event!r}."
            )
        checked[part] = event
    return checked


def _within(epsilon: float, delta: float, bound_epsilon: float, bound_delta: float) -> bool:
    return epsilon <= bound_epsilon * (1.0 + BUDGET_RTOL) and delta <= bound_delta * (1.0 + BUDGET_RTOL)


def fits_bound(event: PrivacyEvent, bound: PrivacyEvent) -> bool:
    r"""Whether ``event`` spends no more than ``bound`` (up to ``BUDGET_RTOL``)."""
    if isinstance(bound, DPSGDRun) or isinstance(event, DPSGDRun):
        return event == bound
    if isinstance(bound, ApproximateDP) or isinstance(event, ApproximateDP):
        if not (isinstance(bound, ApproximateDP) and isinstance(event, ApproximateDP)):
            return False
        return _within(event.epsilon, event.delta, bound.epsilon, bound.delta)
    if isinstance(bound, ValidationApproximateDP) or isinstance(event, ValidationApproximateDP):
        if not (isinstance(bound, ValidationApproximateDP) and isinstance(event, ValidationApproximateDP)):
            return False
        return _within(event.epsilon, event.delta, bound.epsilon, bound.delta)
    if isinstance(bound, TrainingMechanism) or isinstance(event, TrainingMechanism):
        if not (isinstance(bound, TrainingMechanism) and isinstance(event, TrainingMechanism)):
            return False
        return bool(np.all(np.asarray(event.rdp) <= np.asarray(bound.rdp) * (1.0 + BUDGET_RTOL)))
    if isinstance(bound, PureDP):
        return isinstance(event, PureDP) and event.epsilon <= bound.epsilon * (1.0 + BUDGET_RTOL)
    if isinstance(bound, Gaussian) and isinstance(event, (Gaussian, PureDP)):
        return event.mu <= bound.mu * (1.0 + BUDGET_RTOL)
    with np.errstate(invalid="ignore"):
        return bool(np.all(event_rdp(event) <= event_rdp(bound) * (1.0 + BUDGET_RTOL)))


class Meter:
    r"""Records the releases of one charged validation step (made by ``PrivacyLedger.charge``).

    Attributes:
        bound: The step's worst case, part ↦ largest event.
        run_id: The run the records belong to.
        step: The step index (None for a release outside the steps, e.g. a selection).
    """

    def __init__(
        self,
        record_charged: Callable[[Meter, str, ValidationEvent], str],
        bound: dict[str, ValidationEvent],
        run_id: str,
        step: int | None,
        owner: str,
    ) -> None:
        self._record_charged = record_charged  # the ledger's append (with this charge's reservation bound in)
        self.bound = dict(bound)
        self.run_id = run_id
        self.step = step
        self._owner = owner
        self._recorded: dict[str, ValidationEvent] = {}
        self._open = True

    @property
    def recorded(self) -> dict[str, ValidationEvent]:
        r"""The parts recorded so far, with their events."""
        return dict(self._recorded)

    def key(self, part: str) -> str:
        r"""The ledger key the release ``part`` is recorded under."""
        return release_key(self.step, part, self.bound)

    def record(self, part: str, event: ValidationEvent) -> str:
        r"""Record the release ``part`` with cost ``event``; call it just before drawing its noise.

        Args:
            part: One of the bound's parts, not recorded yet in this step.
            event: What the release spends (at most ``bound[part]``).

        Returns:
            The new record's ``release_id``. ``ValueError`` for an unknown part or an event
            above its bound, ``RuntimeError`` for a second record of a part or a closed
            meter — raised before anything is recorded (and so before the draw).
        """
        if not self._open:
            raise RuntimeError("This step's charge has ended; a new release needs a new charge.")
        if part not in self.bound:
            raise ValueError(f"part {part!r} is not in this step's bound {sorted(self.bound)}.")
        if part in self._recorded:
            raise RuntimeError(f"This step's {part!r} release was already recorded; a new release needs a new step.")
        if not isinstance(event, _VALIDATION_EVENTS) or not fits_bound(event, self.bound[part]):
            raise ValueError(f"{part!r}: {event!r} exceeds the step's bound {self.bound[part]!r}.")
        release_id = self._record_charged(self, part, event)
        self._recorded[part] = event
        return release_id

    def close(self) -> None:
        r"""End the charge: a later ``record`` is refused (the ledger closes it when the block ends)."""
        self._open = False


class TrainingMeter:
    r"""Records the training runs of one charge (made by ``PrivacyLedger.charge_training``).

    Attributes:
        bound: Run id ↦ the run's event (a DP-SGD run's exact parameters, or a curve bound).
    """

    def __init__(
        self, record_charged: Callable[[Any, TrainingEvent], str], bound: dict[Any, TrainingEvent], owner: str
    ) -> None:
        self._record_charged = record_charged  # the ledger's fulfilment of the run's reservation
        self.bound = dict(bound)
        self._owner = owner
        self._recorded: dict[Any, TrainingEvent] = {}
        self._open = True

    @property
    def recorded(self) -> dict[Any, TrainingEvent]:
        r"""The runs recorded so far."""
        return dict(self._recorded)

    def record(self, run_id: Any, event: TrainingEvent | None = None) -> str:
        r"""Record training run ``run_id`` (its bound's event unless a smaller one is given);
        call it just before the run draws its noise (before training starts).

        Returns:
            The record's ``release_id``; errors as ``Meter.record``.
        """
        if not self._open:
            raise RuntimeError("This training charge has ended; a new run needs a new charge.")
        if run_id not in self.bound:
            raise ValueError(f"run_id {run_id!r} is not in this charge's runs {list(self.bound)}.")
        if run_id in self._recorded:
            raise RuntimeError(f"Training run {run_id!r} was already recorded in this charge.")
        event = self.bound[run_id] if event is None else event
        if not isinstance(event, _TRAINING_EVENTS) or not fits_bound(event, self.bound[run_id]):
            raise ValueError(f"Training run {run_id!r}: {event!r} exceeds its bound {self.bound[run_id]!r}.")
        release_id = self._record_charged(run_id, event)
        self._recorded[run_id] = event
        return release_id

    def close(self) -> None:
        r"""End the charge: a later ``record`` is refused (the ledger closes it when the block ends)."""
        self._open = False


def held_bound(events: list[ValidationEvent]) -> ValidationEvent:
    r"""What a charge's reservation holds for its worst case: the composed μ while everything
    is GDP, the summed RDP curve otherwise, the ``(ε, δ)`` entry itself (admitted only alone)."""
    approximate = [e for e in events if isinstance(e, ValidationApproximateDP)]
    if approximate:
        if len(events) > 1:
            raise ValueError(f"An (epsilon, delta) validation entry is held only alone, got {events!r}.")
        return approximate[0]
    if gdp_only(events):
        return Gaussian(compose_gdp(e.mu for e in events))
    total = np.zeros_like(ORDERS)
    for event in events:
        total = total + event_rdp(event)
    return ValidationMechanism("(reserved)", tuple(float(v) for v in total))


def shrunk(held: ValidationEvent, used: ValidationEvent) -> ValidationEvent | None:
    r"""A reservation after ``used`` was recorded against it (None: nothing left)."""
    if isinstance(held, ValidationApproximateDP):
        return None  # held alone, for its one release
    if isinstance(held, Gaussian):
        left2 = held.mu * held.mu - used.mu * used.mu if isinstance(used, (Gaussian, PureDP)) else 0.0
        if math.isinf(held.mu):
            return held if not math.isinf(getattr(used, "mu", math.inf)) else None
        return None if left2 <= 1e-12 * held.mu * held.mu else Gaussian(math.sqrt(left2))
    left = np.maximum(event_rdp(held) - event_rdp(used), 0.0)  # held: a ValidationMechanism
    return None if not np.any(left > 1e-12) else ValidationMechanism("(reserved)", tuple(float(v) for v in left))
