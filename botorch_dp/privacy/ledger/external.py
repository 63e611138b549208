r"""Releases made outside this package's mechanisms: the ledger's low-level checks and records.

Inside ``botorch_dp`` every release is charged with ``PrivacyLedger.charge`` (a test walks
the package); these methods are for a caller's own mechanisms. A check here holds nothing
(on a shared database another run may spend the budget between a check and a record: use
``charge`` there), and a record is a fact: never refused for the budget, never merged with
an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botorch_dp.privacy.ledger.accounts import LedgerAccounts
from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    DPSGDRun,
    Gaussian,
    PureDP,
    TrainingMechanism,
    ValidationMechanism,
    check_rdp_values,
    new_release_id,
)
from botorch_dp.privacy.ledger.filters import check_training_admits, check_validation_admits
from botorch_dp.privacy.ledger.state import check_key, check_run_id

__all__ = ["ExternalReleases", "evaluate_curve"]


def evaluate_curve(rdp: Callable[[float], float]) -> tuple[float, ...]:
    r"""``rdp`` evaluated once at every order of the grid, checked."""
    if not callable(rdp):
        raise ValueError(f"rdp must be a callable alpha -> epsilon(alpha), got {rdp!r}.")
    return check_rdp_values([rdp(order) for order in TRAINING_RDP_ORDERS], "rdp")


class ExternalReleases(LedgerAccounts):
    r"""The check and record methods of ``PrivacyLedger`` (on the rows ``LedgerAccounts`` keeps)."""

    def check_validation_step(self, mu: float) -> None:
        r"""Raise ``PrivacyBudgetExceeded`` if one more ``mu``-GDP release would exceed the budget
        (nothing is held: for releases made inside this package use ``charge``, which holds
        the budget between the check and the record, also across processes)."""
        event = Gaussian(mu)
        with self._writing():
            check_validation_admits(
                self._validation_budget(), self._spent("validation"), [event], f"a step with mu={event.mu:.6g}"
            )

    def check_validation_mechanism(self, rdp: Callable[[float], float]) -> None:
        r"""Raise if one more validation release with RDP curve ``rdp`` would exceed the budget."""
        event = ValidationMechanism("(checked)", evaluate_curve(rdp))
        with self._writing():
            check_validation_admits(
                self._validation_budget(), self._spent("validation"), [event], "a release given by its RDP curve"
            )

    def check_training_run(self, *, noise_multiplier: float, sample_rate: float, steps: int) -> None:
        r"""Raise if one more DP-SGD run would exceed the training budget."""
        run = DPSGDRun.checked(noise_multiplier, sample_rate, steps)
        with self._writing():
            check_training_admits(
                self._training_budget(),
                self.training_delta,
                self.training_accountant,
                self.prv_eps_error,
                self._spent("training"),
                [run],
            )

    def check_training_mechanism(self, *, rdp: Callable[[float], float]) -> None:
        r"""Raise if one more training mechanism with RDP curve ``rdp`` would exceed the budget."""
        event = TrainingMechanism("(checked)", evaluate_curve(rdp))
        with self._writing():
            check_training_admits(
                self._training_budget(),
                self.training_delta,
                self.training_accountant,
                self.prv_eps_error,
                self._spent("training"),
                [event],
            )

    def _append(self, side: str, run_id: Any, key: str, event: Any) -> bool:
        with self._writing() as tx:
            if side == "training" and any(r.recorded and r.side == "training" and r.run_id == run_id for r in tx.rows):
                raise ValueError(f"Training run id {run_id!r} is already in the ledger; every run needs its own id.")
            tx.record(side, run_id, key, new_release_id(), event)
        return True

    def record_validation_step(self, mu: float, *, run_id: str, key: str) -> bool:
        r"""Record a ``mu``-GDP validation release made outside this package's mechanisms.

        A record is a fact: it is never refused for the budget (check first) and never merged
        with an earlier one, so the same ``(run_id, key)`` recorded twice counts twice.

        Returns:
            True.
        """
        return self._append("validation", check_run_id(run_id), check_key(key), Gaussian(mu))

    def record_validation_pure(self, epsilon: float, *, run_id: str, key: str) -> bool:
        r"""Record a pure ε-DP validation release (charged ``2Φ⁻¹(e^ε/(1 + e^ε))``-GDP; see
        ``record_validation_step``)."""
        return self._append("validation", check_run_id(run_id), check_key(key), PureDP(epsilon))

    def record_validation_mechanism(
        self, rdp: Callable[[float], float], *, run_id: str, key: str, description: str
    ) -> bool:
        r"""Record a validation release given by its RDP curve (evaluated once on ``RDP_ORDERS``;
        see ``record_validation_step``)."""
        event = ValidationMechanism(description, evaluate_curve(rdp))
        return self._append("validation", check_run_id(run_id), check_key(key), event)

    def record_training_run(self, *, run_id: Any, noise_multiplier: float, sample_rate: float, steps: int) -> bool:
        r"""Record a DP-SGD run made outside this package; a ``run_id`` already recorded raises
        ``ValueError`` (every run has its own id). Never refused for the budget (check first).

        Returns:
            True.
        """
        run = DPSGDRun.checked(noise_multiplier, sample_rate, steps)
        return self._append("training", check_run_id(run_id, training=True), "", run)

    def record_training_mechanism(self, run_id: Any, *, rdp: Callable[[float], float], description: str) -> bool:
        r"""Record a training mechanism given by its RDP curve (see ``record_training_run``)."""
        event = TrainingMechanism(description, evaluate_curve(rdp))
        return self._append("training", check_run_id(run_id, training=True), "", event)
