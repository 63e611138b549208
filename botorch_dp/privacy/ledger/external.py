r"""Releases made outside this package's mechanisms: ``ledger.external``, one check and one record.

Inside ``botorch_dp`` every release is charged with ``PrivacyLedger.charge`` (a test walks
the package); this part is for a caller's own mechanisms. ``check(event)`` holds nothing (on a
shared database another run may spend the budget between a check and a record: use ``charge``
there), and ``record(event, ...)`` is a fact: never refused for the budget, never merged with an
earlier one. The side follows from the event's type: ``Gaussian``, ``PureDP`` and
``ValidationMechanism`` spend the validation budget, ``DPSGDRun``, ``TrainingMechanism`` and
``ApproximateDP`` the training one (``events``; ``ValidationMechanism.from_rdp`` and
``TrainingMechanism.from_rdp`` evaluate a callable curve once per order).
"""

from __future__ import annotations

from typing import Any

from botorch_dp.privacy.ledger.accounts import LedgerAccounts
from botorch_dp.privacy.ledger.events import (
    VALIDATION_EVENTS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PrivacyEvent,
    PureDP,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationMechanism,
    new_release_id,
)
from botorch_dp.privacy.ledger.state import check_key, check_run_id

__all__ = ["ExternalReleases"]

_VALIDATION = VALIDATION_EVENTS
_TRAINING = (DPSGDRun, TrainingMechanism, ApproximateDP)


def _checked(event: Any) -> tuple[str, PrivacyEvent]:
    r"""``(side, event)``: the side the event spends and the event, checked (a ``DPSGDRun`` is a
    plain tuple, so its fields are checked here; the other events check themselves)."""
    if isinstance(event, _VALIDATION):
        return "validation", event
    if isinstance(event, DPSGDRun):
        return "training", DPSGDRun.checked(*event)
    if isinstance(event, _TRAINING):
        return "training", event
    raise ValueError(
        "event must be a Gaussian, PureDP, ValidationMechanism or ValidationApproximateDP (validation) or a DPSGDRun, "
        f"TrainingMechanism or ApproximateDP (training), got {event!r}."
    )


def _what(event: PrivacyEvent) -> str:
    if isinstance(event, Gaussian):
        return f"a step with mu={event.mu:.6g}"
    if isinstance(event, PureDP):
        return f"a release with epsilon={event.epsilon:.6g}"
    if isinstance(event, ValidationMechanism):
        return f"a release given by its RDP curve ({event.description})"
    if isinstance(event, ValidationApproximateDP):
        return f"a release known by (epsilon={event.epsilon:.6g}, delta={event.delta:.3g}) ({event.description})"
    return f"a training entry {event!r}"


class ExternalReleases:
    r"""The check and the record of releases made outside the package (``ledger.external``).

    Args:
        accounts: The ledger's state.
    """

    def __init__(self, accounts: LedgerAccounts) -> None:
        self._accounts = accounts

    def check(self, event: PrivacyEvent) -> None:
        r"""Raise ``PrivacyBudgetExceeded`` if one more release spending ``event`` would exceed its
        side's budget, counting every record and reservation; nothing is held or recorded (for
        releases inside this package use ``charge``, which holds the budget between the check
        and the record, also across processes).

        Args:
            event: A validation event (``Gaussian``, ``PureDP``, ``ValidationMechanism``) or a
                training one (``DPSGDRun``, ``TrainingMechanism``, ``ApproximateDP``).
        """
        side, event = _checked(event)
        with self._accounts.writing():
            if side == "validation":
                self._accounts.check_validation([event], _what(event))
            else:
                self._accounts.check_training([event])

    def record(self, event: PrivacyEvent, *, run_id: Any, key: str | None = None) -> str:
        r"""Record a release made outside this package's mechanisms.

        A record is a fact: it is never refused for the budget (``check`` first) and never merged
        with an earlier one, so the same ``(run_id, key)`` recorded twice counts twice. A training
        ``run_id`` already in the ledger raises ``ValueError`` (every run has its own id).

        Args:
            event: What the release spent (its type gives the side; see ``check``).
            run_id: The run that made it: a non-empty string (validation), or a string or an int
                (training).
            key: The release within the run (validation: required, e.g. ``"step-0003"``;
                training: none).

        Returns:
            The record's ``release_id``.
        """
        side, event = _checked(event)
        if side == "validation":  # a key is needed (e.g. "step-0003"): None is refused as a bad key
            run_id, key = check_run_id(run_id), check_key(key)
        else:
            if key is not None:
                raise ValueError(f"A training entry has no key (its run_id names it), got key={key!r}.")
            run_id, key = check_run_id(run_id, training=True), ""
        release_id = new_release_id()
        with self._accounts.writing() as tx:
            if side == "training" and any(r.recorded and r.side == "training" and r.run_id == run_id for r in tx.rows):
                raise ValueError(f"Training run id {run_id!r} is already in the ledger; every run needs its own id.")
            tx.record(side, run_id, key, release_id, event)
        return release_id
