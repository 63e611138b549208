r"""One statement of what a tuning procedure protected, read off its ledger, in plain words.

A ledger holds two protected sets: the **validation users** (each user's losses may be
replaced: the Gaussian releases of DP-GIBO, the scores of private random search, DP-HyPO,
...) and the **training records** (one record may be added or removed: DP-SGD runs, AMP).
``guarantee_statement`` states the ``(ε, δ)`` of each and how it was reached; when the same
people are in both sets, it also composes them: a person's change replaces their validation
losses and adds or removes their training record, each mechanism's RDP holds for its part of
that change, and the RDP curves add (validation ``μ``-GDP is ``α μ²/2`` exactly), converted
on the ledger's order grid. The statement is public (it reads only what the ledger
recorded) and holds no noise seed. A set whose ``ε`` is infinite (a release recorded at
``μ = inf``: a non-private run, or the ``unsafe_allow_sensitive_fitting`` opt-out's look at the
losses) has NO guarantee, and the statement says so instead of an ``(ε, δ)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from botorch_dp.privacy.ledger import PrivacyLedger, parse_release_key
from botorch_dp.privacy.ledger.events import PureDP, TrainingMechanism, ValidationMechanism
from botorch_dp.privacy.ledger.filters import rdp_grid_epsilon
from botorch_dp.utils import plain_json

__all__ = ["NO_GUARANTEE", "GuaranteeStatement", "ProtectedSet", "guarantee_statement"]

#: What each release part of a DP-GIBO step is, in words.
_PARTS = {
    "grad": "Gaussian gradient releases",
    "norm": "noisy gradient norms",
    "clip": "noisy clip counts",
    "precond": "GOE preconditioner releases",
    "select": "a private selection of the returned iterate",
    "score": "private choice(s) among runs by noisy validation scores",
    "fit": "NON-PRIVATE looks at the losses (unsafe_allow_sensitive_fitting: mu = inf)",
}

#: How a protected set without a guarantee is stated.
NO_GUARANTEE = "NO differential-privacy guarantee"


@dataclass(frozen=True)
class ProtectedSet:
    r"""The guarantee of one protected set.

    Attributes:
        name: ``"validation users"``, ``"training records"`` or ``"the same people in both"``.
        neighbours: What one person's change is (``"replace one user's losses"``, ...).
        epsilon: ``ε`` at ``delta`` (``inf`` without a guarantee).
        delta: ``δ``.
        mechanisms: How it was reached, in words (one line each).
        mu: The composed Gaussian-DP ``μ`` when the set's releases are all Gaussian (else None).
    """

    name: str
    neighbours: str
    epsilon: float
    delta: float
    mechanisms: tuple[str, ...]
    mu: float | None = None

    @property
    def holds(self) -> bool:
        r"""Whether the set has a guarantee (a finite ``ε``)."""
        return math.isfinite(self.epsilon)

    def line(self) -> str:
        if not self.holds:
            return f"{self.name} ({self.neighbours}): {NO_GUARANTEE} (epsilon = inf); " + "; ".join(self.mechanisms)
        mu = "" if self.mu is None else f", from mu = {self.mu:.4g} Gaussian DP"
        return (
            f"{self.name} ({self.neighbours}): (epsilon = {self.epsilon:.4g}, delta = {self.delta:.3g})-DP{mu}; "
            + "; ".join(self.mechanisms)
        )


@dataclass(frozen=True)
class GuaranteeStatement:
    r"""What a procedure protected: per protected set, and composed for people in both.

    ``composed`` is None unless the ledger holds both validation and training entries; it
    applies only when the same people are in both sets (``str`` says so).
    """

    validation: ProtectedSet | None
    training: ProtectedSet | None
    composed: ProtectedSet | None

    @property
    def holds(self) -> bool:
        r"""Whether every protected set with releases has a guarantee (finite ``ε``)."""
        return all(part.holds for part in (self.validation, self.training, self.composed) if part is not None)

    def __str__(self) -> str:
        lines = ["What was protected:" if self.holds else f"What was protected ({NO_GUARANTEE} where so marked):"]
        for part in (self.validation, self.training):
            if part is not None:
                lines.append(f"- {part.line()}")
        if self.validation is None and self.training is None:
            lines.append("- nothing was released")
        if self.composed is not None:
            lines.append(f"- if the same people are in both sets, {self.composed.line()}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        r"""Plain JSON values (``inf`` as the string ``"inf"``; ``utils.plain_json``)."""
        parts = {"validation": self.validation, "training": self.training, "composed_if_same_people": self.composed}
        out: dict[str, Any] = {"holds": self.holds}
        for name, part in parts.items():
            out[name] = None if part is None else plain_json({**asdict(part), "holds": part.holds})
        return out


def _validation(report: dict[str, Any], records: list[Any]) -> ProtectedSet | None:
    if not records:
        return None
    parts: dict[str, int] = {}
    other: list[str] = []
    for record in records:
        if isinstance(record.event, ValidationMechanism):
            other.append(record.event.description)
        elif isinstance(record.event, PureDP):
            other.append(f"a pure epsilon = {record.event.epsilon:.4g} release ({record.key})")
        else:
            part = parse_release_key(record.key)[1]
            parts[part] = parts.get(part, 0) + 1
    mechanisms = tuple(
        f"{count} × {_PARTS.get(part, part + ' releases')}"
        if part == "score"
        else f"{count} {_PARTS.get(part, part + ' releases')}"
        for part, count in parts.items()
    ) + tuple(other)
    mechanisms += (f"composed over {report['num_runs']} run(s) on these users",)
    return ProtectedSet(
        "validation users", "replace one user's losses", report["epsilon"], report["delta"], mechanisms, report["mu"]
    )


def _training(report: dict[str, Any], records: list[Any]) -> ProtectedSet | None:
    if not records:
        return None
    others = [r.event.description for r in records if isinstance(r.event, TrainingMechanism)]
    sgd = report["num_dp_sgd_runs"]
    mechanisms = (f"{sgd} DP-SGD run(s) (Opacus, {report['accountant'].upper()} accountant)",) if sgd else ()
    return ProtectedSet(
        "training records", "add or remove one record", report["epsilon"], report["delta"], mechanisms + tuple(others)
    )


def guarantee_statement(
    ledger: PrivacyLedger, delta: float, *, training_delta: float | None = None
) -> GuaranteeStatement:
    r"""The statement of everything ``ledger`` recorded.

    Args:
        ledger: The ledger the procedure charged (all its runs count).
        delta: ``δ`` of the validation guarantee and of the composed one.
        training_delta: ``δ`` of the training guarantee (default: the ledger's, then ``delta``).

    Returns:
        The ``GuaranteeStatement``.
    """
    report = ledger.report(delta, training_delta=training_delta)  # the ledger's own numbers for both sides
    validation = _validation(report["validation"], ledger.validation_records())
    training = _training(report["training"], ledger.training_records())
    composed = None
    if validation is not None and training is not None:
        curve = np.asarray(ledger.validation_rdp_curve()) + np.asarray(ledger.training_rdp_curve())
        epsilon, order = rdp_grid_epsilon(curve, validation.delta)
        composed = ProtectedSet(
            "the same people in both",
            "replace their losses and add or remove their record",
            epsilon,
            validation.delta,
            (
                "RDP of both sets added, infinite at every order"
                if order is None
                else f"RDP of both sets added and converted at order {order:g}",
            ),
        )
    return GuaranteeStatement(validation, training, composed)
