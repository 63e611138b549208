r"""What a release spends, as the ledger records it: privacy events, records and release keys.

A release of the validation users' data spends a ``Gaussian`` (μ-GDP), a ``PureDP`` (ε-DP,
charged as the GDP μ that dominates it) or a ``ValidationMechanism`` (a Rényi-DP curve on
the ledger's public order grid) or a ``ValidationApproximateDP`` (one ``(ε, δ)`` statement, e.g. a
private selection's Gaussian scores accounted by their privacy profile; composed with the rest by
basic composition, under a budget at the ledger's ``validation_delta``, see ``filters``); a training
run spends a ``DPSGDRun`` (Opacus's ``(noise_multiplier, sample_rate, steps)``), a
``TrainingMechanism`` (an RDP curve) or an
``ApproximateDP`` (one ``(ε, δ)`` statement, e.g. a private selection accounted by its privacy
profile; composed with the rest by basic composition, see ``filters``). A
``Record`` is one release that was made: it has its own random ``release_id``, so a step
replayed with fresh noise is a second record even under the same ``(run_id, key)``.

``release_key`` is the only place keys are formatted (``"step-0003"``, ``"step-0003/norm"``,
``"select"``, …) and ``parse_release_key`` the only place they are read.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.analysis.rdp import DEFAULT_RDP_ORDERS
from botorch_dp.privacy.checks import check_delta, check_history_entry, check_nonnegative, check_positive

__all__ = [
    "ApproximateDP",
    "DPSGDRun",
    "Gaussian",
    "PrivacyEvent",
    "PureDP",
    "Record",
    "TRAINING_RDP_ORDERS",
    "TrainingEvent",
    "VALIDATION_EVENTS",
    "TrainingMechanism",
    "ValidationApproximateDP",
    "ValidationEvent",
    "ValidationMechanism",
    "evaluate_curve",
    "event_from_json",
    "event_to_json",
    "new_release_id",
    "parse_release_key",
    "release_key",
    "training_event",
    "validation_event",
    "validation_parts",
]

#: The public Rényi orders α on which every RDP curve is evaluated and composed:
#: Opacus's default orders 1.1, 1.2, …, 10.9, 12, 13, …, 63, plus 80, 128, 256 and 512
#: (a small ε needs a large α).
TRAINING_RDP_ORDERS: tuple[float, ...] = DEFAULT_RDP_ORDERS

RunId = int | str


@dataclass(frozen=True)
class Gaussian:
    r"""A μ-GDP release (``μ = inf``: no noise, no guarantee)."""

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", check_positive(self.mu, "mu"))


@dataclass(frozen=True)
class PureDP:
    r"""A pure ε-DP release (an exponential mechanism), charged as ``μ = 2Φ⁻¹(e^ε/(1 + e^ε))``-GDP."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon"))

    @property
    def mu(self) -> float:
        r"""The GDP charge of the release (``analysis.gdp.pure_dp_to_gdp_mu``)."""
        return pure_dp_to_gdp_mu(self.epsilon)


def check_rdp_values(values: Any, name: str = "rdp") -> tuple[float, ...]:
    r"""A curve on the grid: one float ≥ 0 (``inf`` allowed, NaN refused) per order."""
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be a list of {len(TRAINING_RDP_ORDERS)} numbers, got {values!r}.")
    if len(values) != len(TRAINING_RDP_ORDERS):
        raise ValueError(f"{name} must have {len(TRAINING_RDP_ORDERS)} values (one per order), got {len(values)}.")
    checked = []
    for order, value in zip(TRAINING_RDP_ORDERS, values, strict=True):
        if isinstance(value, (bool, str, bytes)):
            raise ValueError(f"{name} at order {order:g} must be a number, got {value!r}.")
        try:
            value = float(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{name} at order {order:g} must be a number, got {value!r}.") from err
        if math.isnan(value) or value < 0.0:
            raise ValueError(f"{name} at order {order:g} must be >= 0 (inf allowed), got {value!r}.")
        checked.append(value)
    return tuple(checked)


def evaluate_curve(rdp: Callable[[float], float]) -> tuple[float, ...]:
    r"""``rdp`` (a callable ``α ↦ ε(α)``) evaluated once at every order of the grid, checked."""
    if not callable(rdp):
        raise ValueError(f"rdp must be a callable alpha -> epsilon(alpha), got {rdp!r}.")
    return check_rdp_values([rdp(order) for order in TRAINING_RDP_ORDERS], "rdp")


def _check_description(description: Any) -> str:
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"description must be a non-empty string, got {description!r}.")
    return description


@dataclass(frozen=True)
class ValidationMechanism:
    r"""A validation release given by its RDP curve on ``TRAINING_RDP_ORDERS`` (e.g. a DP-HyPO run).

    Attributes:
        description: What the release is (e.g. ``"DP-HyPO, E[K] = 10, ..."``).
        rdp: ε(α) at each order of ``TRAINING_RDP_ORDERS`` (floats ≥ 0, ``inf`` allowed).
    """

    description: str
    rdp: tuple[float, ...]

    def __post_init__(self) -> None:
        _check_description(self.description)
        object.__setattr__(self, "rdp", check_rdp_values(self.rdp))

    @classmethod
    def from_rdp(cls, description: str, rdp: Callable[[float], float]) -> ValidationMechanism:
        r"""The release whose curve is the callable ``rdp`` (``α ↦ ε(α)``), evaluated once per order."""
        return cls(description, evaluate_curve(rdp))


@dataclass(frozen=True)
class TrainingMechanism:
    r"""A training-side mechanism given by its RDP curve on ``TRAINING_RDP_ORDERS``.

    Attributes:
        description: What the mechanism is (e.g. ``"AMP, lambda=3.7, sigma=6.9"``).
        rdp: ε(α) at each order of ``TRAINING_RDP_ORDERS`` (floats ≥ 0, ``inf`` allowed).
    """

    description: str
    rdp: tuple[float, ...]

    def __post_init__(self) -> None:
        _check_description(self.description)
        object.__setattr__(self, "rdp", check_rdp_values(self.rdp))

    @classmethod
    def from_rdp(cls, description: str, rdp: Callable[[float], float]) -> TrainingMechanism:
        r"""The mechanism whose curve is the callable ``rdp`` (``α ↦ ε(α)``), evaluated once per order."""
        return cls(description, evaluate_curve(rdp))


@dataclass(frozen=True)
class _EpsilonDelta:
    r"""A mechanism known only by one ``(ε, δ)``-DP statement: what ``ApproximateDP`` (training side)
    and ``ValidationApproximateDP`` (validation side) share; the two stay distinct types, which is
    how the ledger tells their side.

    Attributes:
        description: What the mechanism is.
        epsilon: ``ε ≥ 0`` (finite).
        delta: ``δ ∈ (0, 1)``.
    """

    description: str
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        _check_description(self.description)
        object.__setattr__(self, "epsilon", check_nonnegative(self.epsilon, "epsilon", allow_inf=False))
        object.__setattr__(self, "delta", check_delta(self.delta, "delta"))


@dataclass(frozen=True)
class ApproximateDP(_EpsilonDelta):
    r"""A training-side mechanism known only by one ``(ε, δ)``-DP statement (add or remove one record).

    E.g. a private selection over DP-SGD runs accounted by its privacy profile (Koskela, Redberg &
    Wang 2024; ``analysis.selection_profile``), which is tighter than its RDP curve. The ledger
    composes it with the other training entries by basic composition: ``ε`` adds to theirs, and
    their RDP curve is converted at the ``δ`` left over (``filters.training_epsilon_of``).

    Attributes:
        description: What the mechanism is (e.g. ``"private selection over E[K] = 10 ..."``).
        epsilon: ``ε ≥ 0`` (finite).
        delta: ``δ ∈ (0, 1)``.
    """


@dataclass(frozen=True)
class ValidationApproximateDP(_EpsilonDelta):
    r"""A validation release known only by one ``(ε, δ)``-DP statement (replace one validation user).

    E.g. the Gaussian scores of a private selection over training runs accounted by the
    selection's privacy profile (``analysis.selection_profile.per_trial_mu_for_epsilon_pld``),
    which allows a larger per-trial ``μ₀`` than its RDP curve. No GDP ``μ`` and no finite RDP curve
    covers it (``ledger.validation.mu`` refuses; its curve counts ``inf``). The ledger composes it
    with other validation entries by basic composition (``filters.validation_epsilon_of``); a ledger
    with a validation budget admits it with others while the side composed at its ``validation_delta``
    fits the budget, and without ``validation_delta`` only as the validation side's SOLE entry
    (``filters``).

    Attributes:
        description: What the release is (e.g. ``"private selection over E[K] = 3 trials ..."``).
        epsilon: ``ε ≥ 0`` (finite).
        delta: ``δ ∈ (0, 1)``.
    """


class DPSGDRun(NamedTuple):
    r"""A DP-SGD training run as one Opacus accountant history entry ``(σ, q, steps)``."""

    noise_multiplier: float
    sample_rate: float
    steps: int

    @classmethod
    def checked(cls, noise_multiplier: float, sample_rate: float, steps: int) -> DPSGDRun:
        r"""The run with its parameters checked (``σ ≥ 0`` finite, ``q ∈ (0, 1]``, ``steps ≥ 1``)."""
        return cls(*check_history_entry(noise_multiplier, sample_rate, steps, steps_name="steps"))


ValidationEvent = Gaussian | PureDP | ValidationMechanism | ValidationApproximateDP
TrainingEvent = DPSGDRun | TrainingMechanism | ApproximateDP
PrivacyEvent = (
    Gaussian | PureDP | ValidationMechanism | ValidationApproximateDP | DPSGDRun | TrainingMechanism | ApproximateDP
)
#: The validation event types (``isinstance``).
VALIDATION_EVENTS = (Gaussian, PureDP, ValidationMechanism, ValidationApproximateDP)


def new_release_id() -> str:
    r"""A fresh random id for one release (uuid4 hex)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Record:
    r"""One release that was made, as the ledger keeps it (never removed or replaced).

    Attributes:
        release_id: Its own id (random for new records; ``legacy:…`` for records loaded
            from a ledger state or database written before release ids existed).
        side: ``"validation"`` or ``"training"``.
        run_id: The run that made it.
        key: The release within the run (``release_key``; ``""`` for a training run).
        event: What it spent.
    """

    release_id: str
    side: str
    run_id: RunId
    key: str
    event: PrivacyEvent


def validation_event(event: PrivacyEvent) -> ValidationEvent:
    r"""``event``, checked to be a validation event (``TypeError`` for a training one)."""
    if not isinstance(event, VALIDATION_EVENTS):
        raise TypeError(f"Not a validation event: {event!r}.")
    return event


def training_event(event: PrivacyEvent) -> TrainingEvent:
    r"""``event``, checked to be a training event (``TypeError`` for a validation one)."""
    if not isinstance(event, (DPSGDRun, TrainingMechanism, ApproximateDP)):
        raise TypeError(f"Not a training event: {event!r}.")
    return event


def validation_parts(record: Record) -> tuple[str, str, ValidationEvent]:
    r"""``(run_id, key, event)`` of a validation record, with the types the ledger guarantees
    for its validation side (a string run id, a validation event) checked (``TypeError``)."""
    if record.side != "validation" or not isinstance(record.run_id, str):
        raise TypeError(f"Not a validation record: {record!r}.")
    return record.run_id, record.key, validation_event(record.event)


def legacy_release_id(side: str, run_id: RunId, key: str) -> str:
    r"""The id of a record from before release ids: a function of ``(side, run_id, key)``, which
    were unique then, so the same old record loaded twice (a checkpoint and a database) is one."""
    return f"legacy:{side}:{json.dumps(run_id)}:{key}"


# ------------------------------------------------------------------------------ keys
_STEP = re.compile(r"^step-(\d{4,})(?:/([a-z]+))?$")
#: Parts of a step whose presence gives the gradient its own ``/grad`` suffix (kept from
#: the key strings of earlier versions, so that their ledgers and checkpoints still resume).
_SPLIT_GRADIENT = frozenset({"norm", "clip"})
#: The key of a run's final selection release.
SELECTION_PART = "select"


def release_key(step: int | None, part: str, parts: Collection[str] = ()) -> str:
    r"""The ledger key of one release: ``part`` of step ``step`` among the step's ``parts``.

    ``"select"`` (a run's one selection, ``step=None``); ``"step-0003"`` for a gradient
    with no norm or count in its step; ``"step-0003/grad"`` when the step also releases a
    ``"norm"`` or a ``"clip"`` count; ``"step-0003/<part>"`` for every other part.

    Args:
        step: The 0-based step index, or ``None`` for a release outside the steps.
        part: The release's part name (lower-case letters).
        parts: Every part of the step (for the bare-gradient rule).
    """
    if not isinstance(part, str) or not re.fullmatch(r"[a-z]+", part):
        raise ValueError(f"part must be a lower-case name, got {part!r}.")
    if step is None:
        return part
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an integer >= 0 or None, got {step!r}.")
    if part == "grad" and not (_SPLIT_GRADIENT & set(parts)):
        return f"step-{step:04d}"
    return f"step-{step:04d}/{part}"


def parse_release_key(key: str) -> tuple[int | None, str]:
    r"""``(step, part)`` of a key made by ``release_key`` (``(None, key)`` for a key outside the steps)."""
    match = _STEP.match(key)
    if match is None:
        return None, key
    return int(match.group(1)), match.group(2) or "grad"


# ------------------------------------------------------------------------------ JSON
def event_to_json(event: PrivacyEvent) -> dict[str, Any]:
    r"""The plain-JSON form of an event (the ledger's state and database rows)."""
    if isinstance(event, Gaussian):
        return {"mu": event.mu}
    if isinstance(event, PureDP):
        return {"mu": event.mu, "epsilon": event.epsilon}
    if isinstance(event, (ValidationMechanism, TrainingMechanism)):
        return {"description": event.description, "rdp": list(event.rdp)}
    if isinstance(event, (ApproximateDP, ValidationApproximateDP)):
        return {"description": event.description, "epsilon": event.epsilon, "delta": event.delta}
    if isinstance(event, DPSGDRun):
        return {"noise_multiplier": event.noise_multiplier, "sample_rate": event.sample_rate, "steps": event.steps}
    raise TypeError(f"Not a privacy event: {event!r}.")


def event_from_json(side: str, entry: Mapping[str, Any]) -> PrivacyEvent:
    r"""The event of ``event_to_json``'s output (checked; ``ValueError`` naming what is wrong)."""
    keys = set(entry)
    if keys == {"description", "rdp"}:
        kind = ValidationMechanism if side == "validation" else TrainingMechanism
        return kind(_check_description(entry["description"]), check_rdp_values(entry["rdp"]))
    if side == "validation" and keys == {"mu"}:
        return Gaussian(entry["mu"])
    if side == "validation" and keys == {"mu", "epsilon"}:
        event = PureDP(entry["epsilon"])
        mu = check_positive(entry["mu"], "mu")
        if not (mu == event.mu or math.isclose(mu, event.mu, rel_tol=1e-9)):
            raise ValueError(f"mu={mu!r} is not the GDP conversion of epsilon={event.epsilon!r}.")
        return event
    if side == "validation" and keys == {"description", "epsilon", "delta"}:
        return ValidationApproximateDP(_check_description(entry["description"]), entry["epsilon"], entry["delta"])
    if side == "training" and keys == {"description", "epsilon", "delta"}:
        return ApproximateDP(_check_description(entry["description"]), entry["epsilon"], entry["delta"])
    if side == "training" and keys == {"noise_multiplier", "sample_rate", "steps"}:
        return DPSGDRun.checked(entry["noise_multiplier"], entry["sample_rate"], entry["steps"])
    raise ValueError(f"Not a {side} entry: {dict(entry)!r}.")
