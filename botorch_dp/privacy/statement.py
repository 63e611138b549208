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

It also says what is NOT protected (``not_protected``): the training records when the ledger
holds no training entry (nothing recorded a DP training, so the models' training rows have no
guarantee), what the neighbour relation keeps public (the number of validation users ``n``),
and what comes after (a final model trained with the result is a new use of the data). And it
says what the ledger's "runs" are (``validation_runs``): one entry per run id, e.g. a DP-GIBO
run, the one release of the noisy scores that chose among runs, or a private selection.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from botorch_dp.privacy.ledger import PrivacyLedger, parse_release_key
from botorch_dp.privacy.ledger.events import (
    ApproximateDP,
    PureDP,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationMechanism,
)
from botorch_dp.privacy.ledger.filters import rdp_grid_epsilon, validation_rdp_curve
from botorch_dp.utils import plain_json

__all__ = ["NO_GUARANTEE", "GuaranteeStatement", "ProtectedSet", "guarantee_statement", "run_kind"]

#: What each release part of a DP-GIBO step is, in words.
_PARTS = {
    "grad": "Gaussian gradient releases",
    "norm": "noisy gradient norms",
    "clip": "noisy clip counts",
    "precond": "GOE preconditioner releases",
    "select": "a private selection of the returned iterate",
    "score": "release(s) of noisy validation scores (a private choice among runs)",
    "fit": "NON-PRIVATE looks at the losses (unsafe_allow_sensitive_fitting: mu = inf)",
}

#: How a protected set without a guarantee is stated.
NO_GUARANTEE = "NO differential-privacy guarantee"

#: The kinds of validation run a ledger holds (``run_kind``), in words, singular and plural.
RUN_KINDS = {
    "steps": ("DP-GIBO run (noisy steps)", "DP-GIBO runs (noisy steps)"),
    "scores": (
        "release of the noisy scores that chose among runs",
        "releases of the noisy scores that chose among runs",
    ),
    "selection": (
        "private selection (one entry for all its hidden trials)",
        "private selections (one entry each for all its hidden trials)",
    ),
    "other": ("other release", "other releases"),
}

#: What is not protected whatever the ledger holds (the neighbour relation and what comes after).
_ALWAYS_PUBLIC = (
    "the number of validation users n, the search space and every setting: public (one user's losses "
    "are replaced, never added or removed, so n is not hidden)",
    "anything done with the result afterwards: training and publishing a final model with these "
    "hyperparameters is a new use of the data, with its own guarantee that adds to this one (charge it "
    "to the same ledger to state both)",
)
#: What is not protected when the ledger holds no training entry.
NO_TRAINING = (
    "training records: NO guarantee. No DP training was recorded in this ledger, so whatever the losses "
    "were computed from besides the validation users (e.g. the rows each model was trained on) is used "
    "without noise, and the released values depend on it; train with DP-SGD on this ledger "
    "(TorchModelTuningObjective(dp_sgd=...)) to protect it"
)


def run_kind(keys: set[str]) -> str:
    r"""The kind of a validation run, from the ledger keys it recorded: ``"steps"`` (a run of noisy
    steps, e.g. DP-GIBO's ``step-0003``), ``"scores"`` (only ``"score"``: the release of the noisy
    scores of a choice among runs), ``"selection"`` (only a whole selection's entry, ``"select"`` or
    ``"sample"``, with an opt-out's ``"fit"``) or ``"other"``."""
    parts = {parse_release_key(key) for key in keys}
    if any(step is not None for step, _ in parts):
        return "steps"
    names = {part for _, part in parts}
    if names == {"score"}:
        return "scores"
    if names and names <= {"select", "sample", "fit"} and names != {"fit"}:
        return "selection"
    return "other"


def _count(count: int, kind: str) -> str:
    return f"{count} {RUN_KINDS[kind][count != 1]}"


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
        composition: With ``(ε, δ)`` entries, how ``epsilon`` was composed (the ledger report's
            ``composition``: the rule, ``Σ ε_i``, ``Σ δ_i``, the δ left for the other releases and their
            ε); else None (left out of ``to_dict``).
    """

    name: str
    neighbours: str
    epsilon: float
    delta: float
    mechanisms: tuple[str, ...]
    mu: float | None = None
    composition: dict[str, Any] | None = None

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
    applies only when the same people are in both sets (``str`` says so). ``validation_runs``
    counts the ledger's validation runs by kind (``run_kind``: ``"steps"``, ``"scores"``,
    ``"selection"``, ``"other"``); ``not_protected()`` says what the guarantee does not cover.
    """

    validation: ProtectedSet | None
    training: ProtectedSet | None
    composed: ProtectedSet | None
    validation_runs: dict[str, int] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        r"""Whether every protected set with releases has a guarantee (finite ``ε``)."""
        return all(part.holds for part in (self.validation, self.training, self.composed) if part is not None)

    @property
    def num_validation_runs(self) -> int:
        r"""How many runs the ledger's validation side holds (one per run id; all of them compose)."""
        return sum(self.validation_runs.values())

    def runs_in_words(self) -> str:
        r"""The ledger's validation runs by kind: ``"2 DP-GIBO runs (noisy steps), 1 release of ..."``."""
        return ", ".join(_count(count, kind) for kind, count in self.validation_runs.items())

    def not_protected(self) -> tuple[str, ...]:
        r"""What this ledger's guarantee does NOT cover, one line each (see the module)."""
        return ((NO_TRAINING,) if self.training is None else ()) + _ALWAYS_PUBLIC

    def text(self, not_protected: tuple[str, ...] = ()) -> str:
        r"""The statement in words, with ``not_protected`` (a caller's own lines, e.g. a proxy) added
        to what was NOT protected."""
        lines = ["What was protected:" if self.holds else f"What was protected ({NO_GUARANTEE} where so marked):"]
        for part in (self.validation, self.training):
            if part is not None:
                lines.append(f"- {part.line()}")
        if self.validation is None and self.training is None:
            lines.append("- nothing was released")
        if self.composed is not None:
            lines.append(f"- if the same people are in both sets, {self.composed.line()}")
        lines.append("What was NOT protected:")
        lines.extend(f"- {line}" for line in self.not_protected() + tuple(not_protected))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        r"""Plain JSON values (``inf`` as the string ``"inf"``; ``utils.plain_json``)."""
        parts = {"validation": self.validation, "training": self.training, "composed_if_same_people": self.composed}
        out: dict[str, Any] = {"holds": self.holds}
        for name, part in parts.items():
            fields = {} if part is None else {k: v for k, v in asdict(part).items() if k != "composition" or v}
            out[name] = None if part is None else plain_json({**fields, "holds": part.holds})
        out["validation_runs"] = dict(self.validation_runs)
        out["not_protected"] = list(self.not_protected())
        return out


def _validation_runs(records: list[Any]) -> dict[str, int]:
    r"""``{kind: count}`` of the validation runs ``records`` hold, in ``RUN_KINDS`` order (``run_kind``)."""
    keys: dict[Any, set[str]] = {}
    for record in records:
        keys.setdefault(record.run_id, set()).add(record.key)
    kinds = [run_kind(run_keys) for run_keys in keys.values()]
    return {kind: kinds.count(kind) for kind in RUN_KINDS if kind in kinds}


def _validation(report: dict[str, Any], records: list[Any], runs: dict[str, int]) -> ProtectedSet | None:
    if not records:
        return None
    parts: dict[str, int] = {}
    other: list[str] = []
    for record in records:
        if isinstance(record.event, ValidationMechanism):
            other.append(record.event.description)
        elif isinstance(record.event, PureDP):
            other.append(f"a pure epsilon = {record.event.epsilon:.4g} release ({record.key})")
        elif isinstance(record.event, ValidationApproximateDP):
            other.append(
                f"{record.event.description} (stated as (epsilon = {record.event.epsilon:.4g}, delta = "
                f"{record.event.delta:.3g}), composed with the rest by basic composition)"
            )
        else:
            part = parse_release_key(record.key)[1]
            parts[part] = parts.get(part, 0) + 1
    mechanisms = tuple(f"{count} {_PARTS.get(part, part + ' releases')}" for part, count in parts.items()) + tuple(
        other
    )
    kinds = ", ".join(_count(count, kind) for kind, count in runs.items())
    mechanisms += (
        f"composed over {report['num_runs']} run(s) on these users ({kinds}; every run in this ledger counts)",
    )
    composition = report.get("composition")
    if composition is not None:
        mechanisms += (_composition_line(composition, report["delta"]),)
    return ProtectedSet(
        "validation users",
        "replace one user's losses",
        report["epsilon"],
        report["delta"],
        mechanisms,
        report["mu"],
        composition,
    )


def _composition_line(composition: dict[str, Any], delta: float) -> str:
    r"""How the validation side's ``(ε, δ)`` entries and its other releases were composed, in words."""
    entries = (
        f"by basic composition: the (epsilon, delta) entries add to (epsilon = "
        f"{composition['approximate_epsilon']:.4g}, delta = {composition['approximate_delta']:.3g})"
    )
    if composition["rest_delta"] is None:
        if math.isfinite(composition["epsilon"]):
            return f"{entries}, the whole statement (no other releases)"
        return f"{entries}, more than delta = {delta:.3g}: no epsilon is stated at this delta"
    rest = (
        f"mu = {composition['rest_mu']:.4g} Gaussian DP, exact conversion"
        if composition["rest_mu"] is not None
        else f"their RDP curve converted at order {composition['rest_rdp_order']:g}"
        if composition["rest_rdp_order"] is not None
        else "their RDP curve, infinite at every order"
    )
    return (
        f"{entries}; the other releases ({rest}) are stated at the delta they leave, "
        f"{composition['rest_delta']:.3g}, as epsilon = {composition['rest_epsilon']:.4g}"
    )


def _training(report: dict[str, Any], records: list[Any]) -> ProtectedSet | None:
    if not records:
        return None
    others = [r.event.description for r in records if isinstance(r.event, TrainingMechanism)]
    others += [
        f"{r.event.description} (stated as (epsilon = {r.event.epsilon:.4g}, delta = {r.event.delta:.3g}), composed "
        "with the rest by basic composition)"
        for r in records
        if isinstance(r.event, ApproximateDP)
    ]
    sgd = report["num_dp_sgd_runs"]
    mechanisms = (f"{sgd} DP-SGD run(s) (Opacus, {report['accountant'].upper()} accountant)",) if sgd else ()
    return ProtectedSet(
        "training records", "add or remove one record", report["epsilon"], report["delta"], mechanisms + tuple(others)
    )


def _composed_epsilon(ledger: PrivacyLedger, records: list[Any], delta: float) -> tuple[float, float | None]:
    r"""ε (and RDP order) of both sets composed at ``delta``: the ``(ε_i, δ_i)`` entries of either side by
    basic composition, ``Σ ε_i`` plus the RDP conversion of every other entry's summed curve at
    ``delta − Σ δ_i`` (``inf`` when none is left), as each side composes its own (``ledger.filters``)."""
    approximate: list[ValidationApproximateDP | ApproximateDP] = [
        r.event for r in records if isinstance(r.event, ValidationApproximateDP)
    ]
    approximate += list(ledger.training.approximate().values())
    rest = [r.event for r in records if not isinstance(r.event, ValidationApproximateDP)]
    curve = validation_rdp_curve(rest) + np.asarray(ledger.training.rdp_curve())  # the training curve omits its own
    eps_a, delta_a = sum(e.epsilon for e in approximate), sum(e.delta for e in approximate)
    if delta_a >= delta:
        return math.inf, None
    if approximate and not np.any(curve > 0.0):  # nothing else: the (ε, δ) entries alone
        return eps_a, None
    epsilon, order = rdp_grid_epsilon(curve, delta - delta_a)
    return eps_a + epsilon, order


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
    records = ledger.validation.records()
    runs = _validation_runs(records)
    validation = _validation(report["validation"], records, runs)
    training = _training(report["training"], ledger.training.records())
    composed = None
    if validation is not None and training is not None:
        epsilon, order = _composed_epsilon(ledger, records, validation.delta)
        approximate = ledger.training.approximate() or ledger.validation.approximate()
        basic = ("the (epsilon, delta) entries added by basic composition",) if approximate else ()
        composed = ProtectedSet(
            "the same people in both",
            "replace their losses and add or remove their record",
            epsilon,
            validation.delta,
            (
                ()
                if order is None and math.isfinite(epsilon)
                else ("RDP of both sets added, infinite at every order",)
                if order is None
                else (f"RDP of both sets added and converted at order {order:g}",)
            )
            + basic,
        )
    return GuaranteeStatement(validation, training, composed, runs)
