r"""The ledger's state as plain JSON values: ``state_dict`` and its checked decoding.

Version 7 (this one) adds the setting ``validation_delta`` (the δ at which a validation budget
composes ``(ε, δ)`` entries with the rest; ``filters``); a version-6 state, which has none, is read
with ``validation_delta = None`` (the rule it was written under: such an entry only as the side's
sole entry), its entries unchanged. Version 6 added validation ``(ε, δ)`` entries
(``ValidationApproximateDP``, ``{"description", "epsilon", "delta"}``); version 5 gave every entry
its ``release_id`` and is read unchanged (it has no such entry); versions 4 (validation RDP
entries), 3 (pure ε-DP releases, training mechanisms) and 2 (Gaussian releases and DP-SGD
runs) are read, their entries given ``legacy:`` ids that depend only on ``(side, run_id,
key)`` — unique in those versions — so that one old state loaded twice is merged, not
counted twice. Version 1 (validation steps keyed by index only: runs that shared a ledger
were merged) is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from botorch_dp.privacy.checks import check_choice, check_delta, check_positive
from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    Record,
    event_from_json,
    event_to_json,
    legacy_release_id,
)

__all__ = ["STATE_VERSION", "SETTINGS", "decode_state", "encode_state"]

STATE_VERSION = 7
#: The settings stored with a ledger (its budgets, δ, accountant, PRV accuracy).
SETTINGS = (
    "validation_mu_budget",
    "validation_delta",
    "training_epsilon_budget",
    "training_delta",
    "training_accountant",
    "prv_eps_error",
)

_VALIDATION_SHAPES = {
    2: ({"run_id", "key", "mu"},),
    3: ({"run_id", "key", "mu"}, {"run_id", "key", "mu", "epsilon"}),
    4: ({"run_id", "key", "mu"}, {"run_id", "key", "mu", "epsilon"}, {"run_id", "key", "description", "rdp"}),
}
_TRAINING_SHAPES = {
    2: ({"run_id", "noise_multiplier", "sample_rate", "steps"},),
    3: ({"run_id", "noise_multiplier", "sample_rate", "steps"}, {"run_id", "description", "rdp"}),
}
_TRAINING_SHAPES[4] = _TRAINING_SHAPES[3]
_VALIDATION_SHAPES[5] = tuple({"release_id", *s} for s in _VALIDATION_SHAPES[4])
_TRAINING_SHAPES[5] = tuple({"release_id", *s} for s in _TRAINING_SHAPES[4]) + (
    {"release_id", "run_id", "description", "epsilon", "delta"},  # an ApproximateDP (ε, δ) entry
)
_VALIDATION_SHAPES[6] = _VALIDATION_SHAPES[5] + (
    {"release_id", "run_id", "key", "description", "epsilon", "delta"},  # a ValidationApproximateDP entry
)
_TRAINING_SHAPES[6] = _TRAINING_SHAPES[5]
_VALIDATION_SHAPES[7], _TRAINING_SHAPES[7] = _VALIDATION_SHAPES[6], _TRAINING_SHAPES[6]  # 7 adds a setting only


def encode_state(settings: Mapping[str, Any], records: Sequence[Record]) -> dict[str, Any]:
    r"""The ``state_dict`` of a ledger with these settings and records (in recording order)."""
    validation, training = [], []
    for r in records:
        entry = {"release_id": r.release_id, "run_id": r.run_id, **event_to_json(r.event)}
        if r.side == "validation":
            validation.append({**entry, "key": r.key})
        else:
            training.append(entry)
    return {
        "version": STATE_VERSION,
        **{name: settings[name] for name in SETTINGS},
        "rdp_orders": list(TRAINING_RDP_ORDERS),
        "validation_steps": validation,
        "training_runs": training,
    }


def _check_label(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"{name} must be a non-empty string without surrounding spaces, got {value!r}.")
    return value


def check_run_id(run_id: Any, *, training: bool = False) -> Any:
    r"""A run id: a non-empty string (validation), or a string or an int (training)."""
    if training:
        if isinstance(run_id, bool) or not isinstance(run_id, (int, str)):
            raise ValueError(f"run_id must be a str or an int, got {run_id!r}.")
        return run_id
    return _check_label(run_id, "run_id")


def check_key(key: Any) -> str:
    return _check_label(key, "key")


def _entries(state: Mapping[str, Any], name: str, shapes: tuple[set[str], ...]) -> list[Mapping[str, Any]]:
    entries = state.get(name, [])
    if not isinstance(entries, list):
        raise ValueError(f"Ledger state: {name} must be a list, got {type(entries).__name__}.")
    for entry in entries:
        if not isinstance(entry, Mapping) or set(entry) not in shapes:
            raise ValueError(
                f"Ledger state: each entry of {name} must have exactly the keys "
                f"{' or '.join(str(sorted(s)) for s in shapes)}, got {entry!r}."
            )
    return entries


def _settings(state: Mapping[str, Any]) -> dict[str, Any]:
    budget = state.get("validation_mu_budget")
    eps_budget = state.get("training_epsilon_budget")
    delta = state.get("training_delta")
    validation_delta = state.get("validation_delta") if state.get("version") == STATE_VERSION else None
    settings = {
        "validation_mu_budget": None if budget is None else check_positive(budget, "validation_mu_budget"),
        "validation_delta": None if validation_delta is None else check_delta(validation_delta, "validation_delta"),
        "training_epsilon_budget": None
        if eps_budget is None
        else check_positive(eps_budget, "training_epsilon_budget"),
        "training_delta": None if delta is None else check_delta(delta, "training_delta"),
        "training_accountant": check_choice(
            state.get("training_accountant", "rdp"), "training_accountant", ("rdp", "prv")
        ),
        "prv_eps_error": check_positive(state.get("prv_eps_error", 0.01), "prv_eps_error"),
    }
    if settings["training_epsilon_budget"] is not None and settings["training_delta"] is None:
        raise ValueError("Ledger state: training_epsilon_budget needs training_delta.")
    return settings


def decode_state(state: Any) -> tuple[dict[str, Any], list[Record]]:
    r"""The settings and records of a ``state_dict`` (any supported version), checked.

    Returns:
        ``(settings, records)``; ``ValueError`` naming the problem for a damaged state,
        an unsupported version, or a grid of RDP orders other than ``TRAINING_RDP_ORDERS``.
    """
    if not isinstance(state, Mapping):
        raise ValueError(f"A ledger state must be a mapping, got {type(state).__name__}.")
    version = state.get("version")
    if version == 1:
        raise ValueError(
            "Ledger state version 1 is not supported: it keyed validation steps by step index only, so "
            "runs that shared the ledger were counted as one and the total may be under-counted. Start a "
            f"new ledger (version {STATE_VERSION}), and add what the old one recorded by hand if needed."
        )
    if isinstance(version, bool) or version not in _VALIDATION_SHAPES:
        raise ValueError(f"Unsupported ledger state version {version!r} (expected {STATE_VERSION}, 6, 5, 4, 3 or 2).")
    if version >= 3:
        orders = state.get("rdp_orders")
        if not (
            isinstance(orders, list)
            and len(orders) == len(TRAINING_RDP_ORDERS)
            and all(
                isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(float(a), b, rel_tol=1e-9)
                for a, b in zip(orders, TRAINING_RDP_ORDERS, strict=True)
            )
        ):
            raise ValueError(
                "Ledger state: rdp_orders differ from this version's TRAINING_RDP_ORDERS; its RDP curves "
                "cannot be composed on this grid."
            )
    settings = _settings(state)
    records: list[Record] = []
    seen: set[str] = set()
    for side, name, shapes in (
        ("validation", "validation_steps", _VALIDATION_SHAPES[version]),
        ("training", "training_runs", _TRAINING_SHAPES[version]),
    ):
        for entry in _entries(state, name, shapes):
            run_id = check_run_id(entry["run_id"], training=side == "training")
            key = check_key(entry["key"]) if side == "validation" else ""
            body = {k: v for k, v in entry.items() if k not in ("release_id", "run_id", "key")}
            event = event_from_json(side, body)
            if version >= 5:
                release_id = _check_label(entry["release_id"], "release_id")
            else:
                release_id = legacy_release_id(side, run_id, key)
            if release_id in seen:
                raise ValueError(f"Ledger state: repeated release {release_id!r} ({side} run {run_id!r}, key {key!r}).")
            seen.add(release_id)
            records.append(Record(release_id, side, run_id, key, event))
    return settings, records
