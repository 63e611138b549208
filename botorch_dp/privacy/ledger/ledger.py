r"""``PrivacyLedger``: an append-only record of what was spent, with the one charge protocol.

See the package docstring (``botorch_dp.privacy.ledger``) for the accounting and what each
guarantee means. The ledger is composed of parts, each holding the one ``LedgerAccounts`` (its
rows, settings and storage): the charge family and the state live here, the reads in
``ledger.validation`` and ``ledger.training`` (``views``), the check and record of releases
made elsewhere in ``ledger.external`` (``external``). Old method names are forwarded, with a
``DeprecationWarning``, by ``deprecated``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from botorch_dp.privacy.analysis.gdp import compose_gdp
from botorch_dp.privacy.ledger.accounts import LedgerAccounts
from botorch_dp.privacy.ledger.deprecated import deprecated_attribute
from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Record,
    TrainingEvent,
    TrainingMechanism,
    ValidationEvent,
    new_release_id,
    validation_event,
)
from botorch_dp.privacy.ledger.external import ExternalReleases
from botorch_dp.privacy.ledger.filters import BUDGET_RTOL, gdp_only
from botorch_dp.privacy.ledger.holders import holder_gone, holding
from botorch_dp.privacy.ledger.meter import Meter, TrainingMeter, check_validation_bound, held_bound, shrunk
from botorch_dp.privacy.ledger.state import STATE_VERSION, check_run_id, decode_state, encode_state
from botorch_dp.privacy.ledger.views import TrainingReads, ValidationReads, ledger_report, read_records

__all__ = ["PrivacyLedger"]


class PrivacyLedger:
    r"""Records the privacy spent on validation data and on training data (see the package docstring).

    Every release is charged with ``charge`` (validation: a step's worst case admitted and
    held before any noise, each release recorded by ``meter.record`` just before its draw)
    or ``charge_training`` (training runs, recorded before they train). Records are never
    removed or replaced: rolling a run back restores the run, never the ledger; loading a
    state into a ledger merges; every release has its own ``release_id``, so a replayed step
    with fresh noise is charged again (a crash may over-count, never under-count).

    Its surface: the charge family (``charge``, ``charge_training``, ``cancel_reservations``,
    ``settle_run``, ``reservation_holders``); the reads ``records``, ``report`` and the two
    sides, ``ledger.validation`` (``ValidationReads``: ``records``, ``run_ids``, ``steps``,
    ``mechanisms``, ``release_curves``, ``mu``, ``rdp_curve``, ``epsilon``, ``remaining_mu``,
    ``check_admits``) and ``ledger.training`` (``TrainingReads``: ``records``, ``run_ids``,
    ``runs``, ``mechanisms``, ``approximate``, ``history``, ``rdp_curve``, ``accountant_in_use``,
    ``epsilon``); ``ledger.external`` (``check(event)`` and ``record(event, run_id=, key=)`` for
    releases made outside this package); ``state_dict``, ``load_state_dict``, ``from_state_dict``;
    and the settings below (``validation_mu_budget`` may be lowered on an object afterwards).

    Example (25 DP-GIBO steps of μ/sqrt(25) with μ = 1; a 26th step is refused before its noise):

        ledger = PrivacyLedger(validation_mu_budget=1.0)
        for t in range(25):
            with ledger.charge({"grad": Gaussian(0.2)}, run_id="run-a", step=t) as meter:
                meter.record("grad", Gaussian(0.2))  # then draw the noise
        ledger.validation.epsilon(1e-5)  # about 4.377

    Args:
        validation_mu_budget: Optional total GDP budget μ for the validation data.
        validation_delta: Optional δ at which the validation budget admits ``ValidationApproximateDP``
            ``(ε, δ)`` entries composed with other validation releases: the side composed at this δ
            (``Σ ε_i`` plus the rest converted at the δ the entries leave) must be a statement
            ``validation_mu_budget``-GDP makes (``filters``). None: such an entry only as the
            validation side's sole entry.
        training_epsilon_budget: Optional ε budget for the training data; needs ``training_delta``.
        training_delta: δ at which training ε is measured (budget and report).
        training_accountant: ``"rdp"`` or ``"prv"`` (used only while every training entry
            is a DP-SGD run; RDP otherwise).
        prv_eps_error: Accuracy of the PRV accountant when it is used.
        storage: None (in memory), or the database holding the ledger: an SQLite file path
            or ``sqlite:///`` URL, or a PostgreSQL URL (needs the ``[db]`` extra). The first
            ledger to open ``dataset`` stores these settings with it; a later one must pass
            the same settings, or leave a budget (or ``training_delta``) at None to adopt the
            stored one (a run may lower ``validation_mu_budget`` on its object afterwards,
            which never loosens the stored budget).
        dataset: The dataset's name in ``storage`` (needed with it, refused without).
    """

    #: Version of ``state_dict`` (``ledger.state``): 7 stores ``validation_delta``.
    STATE_VERSION = STATE_VERSION
    BUDGET_RTOL = BUDGET_RTOL
    #: The public order grid of the ledger's RDP curves, both sides (``TRAINING_RDP_ORDERS``).
    RDP_ORDERS = TRAINING_RDP_ORDERS

    #: The validation side, read back.
    validation: ValidationReads
    #: The training side, read back.
    training: TrainingReads
    #: The check and record of releases made outside this package's mechanisms.
    external: ExternalReleases

    def __init__(
        self,
        *,
        validation_mu_budget: float | None = None,
        validation_delta: float | None = None,
        training_epsilon_budget: float | None = None,
        training_delta: float | None = None,
        training_accountant: str = "rdp",
        prv_eps_error: float = 0.01,
        storage: str | os.PathLike | None = None,
        dataset: str | None = None,
    ) -> None:
        self._accounts = LedgerAccounts(
            validation_mu_budget=validation_mu_budget,
            validation_delta=validation_delta,
            training_epsilon_budget=training_epsilon_budget,
            training_delta=training_delta,
            training_accountant=training_accountant,
            prv_eps_error=prv_eps_error,
            storage=storage,
            dataset=dataset,
        )
        self.validation = ValidationReads(self._accounts)
        self.training = TrainingReads(self._accounts)
        self.external = ExternalReleases(self._accounts)

    def __getattr__(self, name: str) -> Any:  # only for names not found: the deprecated spellings
        return deprecated_attribute(self, name)

    # ------------------------------------------------------------------ settings
    @property
    def validation_mu_budget(self) -> float | None:
        r"""The GDP budget μ of the validation data this object's filter uses (None: none; a stored
        dataset's budget bounds it). May be lowered afterwards, never above the stored one."""
        return self._accounts.validation_mu_budget

    @validation_mu_budget.setter
    def validation_mu_budget(self, value: float | None) -> None:
        self._accounts.validation_mu_budget = value

    @property
    def validation_delta(self) -> float | None:
        r"""δ at which the validation budget composes ``(ε, δ)`` entries with the rest (None: such an
        entry only as the side's sole entry)."""
        return self._accounts.validation_delta

    @property
    def training_epsilon_budget(self) -> float | None:
        r"""The ε budget of the training data (None: none)."""
        return self._accounts.training_epsilon_budget

    @property
    def training_delta(self) -> float | None:
        r"""δ at which training ε is measured (budget and report)."""
        return self._accounts.training_delta

    @property
    def training_accountant(self) -> str:
        r"""``"rdp"`` or ``"prv"``."""
        return self._accounts.training_accountant

    @property
    def prv_eps_error(self) -> float:
        r"""Accuracy of the PRV accountant when it is used."""
        return self._accounts.prv_eps_error

    @property
    def dataset(self) -> str | None:
        r"""The dataset's name in the ledger's database (None in memory)."""
        return self._accounts.dataset

    @property
    def storage_url(self) -> str | None:
        r"""The SQLAlchemy URL of the ledger's database (None in memory)."""
        return self._accounts.storage_url

    # ------------------------------------------------------------------- charges
    @contextlib.contextmanager
    def charge(
        self, bound: Mapping[str, ValidationEvent], *, run_id: str, step: int | None = None, new_run: bool = False
    ) -> Iterator[Meter]:
        r"""Admit one step's worst case on the validation budget, then record its releases.

        Before the block runs, everything the step can spend (``bound``: part ↦ its largest
        event) is checked against the budget together with everything recorded or reserved
        (all runs) and held as a reservation; ``PrivacyBudgetExceeded`` is raised before
        anything is released. Inside, each release calls ``meter.record(part, event)`` just
        before its noise is drawn (keys from ``events.release_key``). Leaving the block
        gives back what was not recorded; records stay whatever happens.

        Args:
            bound: Part name (``"grad"``, ``"norm"``, ``"clip"``, ``"precond"``, ``"select"``,
                …) ↦ the largest ``Gaussian``, ``PureDP`` or ``ValidationMechanism`` it may spend.
            run_id: The run's id.
            step: The step index (None for a release outside the steps).
            new_run: Refuse (``ValueError``) a ``run_id`` the ledger already holds: the
                first charge of a run whose id the caller chose.

        Yields:
            The step's ``Meter``.
        """
        run_id = check_run_id(run_id)
        bound = check_validation_bound(bound)
        owner = uuid.uuid4().hex
        reservation = None
        with holding(owner, self._accounts.storage, self.dataset):  # the reservation's holder: this process, while open
            with self._accounts.writing() as tx:
                if new_run and any(r.recorded and r.side == "validation" and r.run_id == run_id for r in tx.rows):
                    raise ValueError(
                        f"run_id {run_id!r} is already in the ledger; a new run needs a new id (a second run "
                        "under the same id would share its records)."
                    )
                what = (
                    f"step {step} of run {run_id!r}"
                    if step is not None
                    else f"release {sorted(bound)} of run {run_id!r}"
                )
                events = list(bound.values())
                if gdp_only(events):
                    what += f" (mu={compose_gdp(e.mu for e in events):.6g})"
                budget = self._accounts.validation_budget()
                self._accounts.check_validation(events, what)
                if budget is not None and not math.isinf(budget):
                    reservation = tx.reserve("validation", run_id, owner, held_bound(events), *self._accounts.lease())
            meter = Meter(functools.partial(self._record_charged, reservation), bound, run_id, step, owner)
            try:
                yield meter
            finally:
                meter.close()
                if reservation is not None:
                    with self._accounts.writing() as tx:
                        tx.drop(reservation)

    def _record_charged(self, reservation: int | None, meter: Meter, part: str, event: ValidationEvent) -> str:
        r"""``Meter.record``: append the record, take its cost off the charge's ``reservation``."""
        release_id = new_release_id()
        with self._accounts.writing() as tx:
            if reservation is not None and not tx.holds(reservation):  # settled: its lease ran out
                what = f"{part!r} of run {meter.run_id!r} (its reservation was settled)"
                self._accounts.check_validation([event], what)
            tx.record("validation", meter.run_id, meter.key(part), release_id, event)
            if reservation is not None:
                held = next((r.event for r in tx.rows if r.seq == reservation and not r.recorded), None)
                if held is not None:
                    left = shrunk(validation_event(held), event)
                    if left is None:
                        tx.drop(reservation)
                    else:
                        tx.shrink(reservation, left)
        return release_id

    @contextlib.contextmanager
    def charge_training(self, bound: Mapping[Any, TrainingEvent]) -> Iterator[TrainingMeter]:
        r"""Admit training runs on the training budget (all of them, in order), then record them.

        Run ids already in the ledger are refused (``ValueError``), as is a set of runs over
        the budget (``PrivacyBudgetExceeded``), before anything trains. Each run is held as a
        reservation in order; ``meter.record(run_id)`` turns it into the run's record just
        before the run starts (its noise). Leaving the block gives back the runs not recorded.

        Args:
            bound: Run id ↦ the run's ``DPSGDRun``, ``TrainingMechanism`` or ``ApproximateDP``.

        Yields:
            The ``TrainingMeter``.
        """
        if not isinstance(bound, Mapping) or not bound:
            raise ValueError(f"bound must be a non-empty mapping of run ids to training events, got {bound!r}.")
        checked = {}
        for run_id, event in bound.items():
            if not isinstance(event, (DPSGDRun, TrainingMechanism, ApproximateDP)):
                raise ValueError(
                    f"bound[{run_id!r}] must be a DPSGDRun, TrainingMechanism or ApproximateDP, got {event!r}."
                )
            checked[check_run_id(run_id, training=True)] = event
        owner = uuid.uuid4().hex
        with holding(owner, self._accounts.storage, self.dataset):
            with self._accounts.writing() as tx:  # recorded, or held by another open charge (in any process)
                taken = [r.run_id for r in tx.rows if r.side == "training" and r.run_id in checked]
                if taken:
                    raise ValueError(
                        f"Training run id {taken[0]!r} is already in the ledger (recorded, or held by an open "
                        "charge); every run needs its own id."
                    )
                self._accounts.check_training(list(checked.values()))
                reservations = {
                    run_id: tx.reserve("training", run_id, owner, event, *self._accounts.lease())
                    for run_id, event in checked.items()
                }
            meter = TrainingMeter(functools.partial(self._record_training_charged, reservations), checked, owner)
            try:
                yield meter
            finally:
                meter.close()
                recorded = meter.recorded
                with self._accounts.writing() as tx:
                    for run_id, seq in reservations.items():
                        if run_id not in recorded:
                            tx.drop(seq)

    def _record_training_charged(self, reservations: dict[Any, int], run_id: Any, event: TrainingEvent) -> str:
        r"""``TrainingMeter.record``: turn the run's reservation into its record."""
        release_id = new_release_id()
        with self._accounts.writing() as tx:
            if not tx.holds(reservations[run_id]):  # settled (its lease ran out): checked again
                self._accounts.check_training([event])
            tx.fulfil(reservations[run_id], run_id, "", release_id, event)
        return release_id

    def cancel_reservations(self, run_id: Any = None, *, holderless: bool = False) -> int:
        r"""Settle reservations whose holder is gone: drop those of ``run_id`` (None: of every run)
        whose process is no longer alive or whose lease expired (``holders.holder_gone``), e.g.
        left by a process killed inside a charge. A live holder's reservation is never dropped,
        nor is a record. ``DPGIBO.resume`` settles its run's this way.

        Args:
            run_id: The run whose reservations are settled (None: all runs).
            holderless: Also drop ``run_id``'s reservations that name no holder (written by
                botorch-dp before holders existed, or migrated from a version-1 database), which
                are never settled otherwise: only once you know their processes are gone.

        Returns:
            The number of reservations dropped.
        """
        if holderless and run_id is None:
            raise ValueError("holderless=True needs the run_id whose holderless reservations to drop.")
        now = time.time()
        with self._accounts.writing() as tx:
            gone = [
                r
                for r in tx.rows
                if not r.recorded
                and (run_id is None or r.run_id == run_id)
                and (holder_gone(r.holder, r.lease_expires, r.owner, now) or (holderless and r.holder is None))
            ]
            for row in gone:
                tx.drop(row.seq)
            return len(gone)

    def settle_run(self, run_id: Any) -> int:
        r"""Before a run continues in this process (``DPGIBO.resume``): settle its reservations whose
        holder is gone, and refuse (``RuntimeError`` naming the holder) while a live one holds one.

        Returns:
            The number of reservations dropped.
        """
        dropped = self.cancel_reservations(run_id)
        now = time.time()
        live = [h for h in self.reservation_holders(run_id) if not holder_gone(*h, now)]
        if any(holder is not None for holder, _, _ in live):
            holder = next(holder for holder, _, _ in live if holder is not None)
            raise RuntimeError(
                f"Run {run_id!r} is live: {holder.describe()} holds a reservation of it (inside a step's "
                "charge). A run continues in one process at a time; resume it once that process has ended."
            )
        return dropped

    def reservation_holders(self, run_id: Any = None) -> list[tuple[Any, float | None, str | None]]:
        r"""``(holder, lease_expires, owner)`` of each reservation held (of ``run_id``; None: all
        runs): open charges, or ones left by a process that died inside a charge. ``holder`` is a
        ``holders.Holder``, or None for one written before holders existed."""
        return [
            (r.holder, r.lease_expires, r.owner)
            for r in self._accounts.rows()
            if not r.recorded and (run_id is None or r.run_id == run_id)
        ]

    # --------------------------------------------------------------------- reads
    def records(self, side: str | None = None, run_id: Any = None) -> list[Record]:
        r"""The records (releases made), in recording order; per side ``ledger.validation.records``
        and ``ledger.training.records``.

        Args:
            side: ``"validation"``, ``"training"`` or None (both).
            run_id: Only this run's records (None: all runs).
        """
        return read_records(self._accounts, side, run_id)

    def report(self, delta: float, *, training_delta: float | None = None) -> dict[str, Any]:
        r"""Both guarantees, side by side but never composed (different datasets; the keys are
        listed in ``views.ledger_report``).

        Args:
            delta: δ for the validation guarantee.
            training_delta: δ for the training guarantee (default: the ledger's, then ``delta``).
        """
        return ledger_report(self._accounts, delta, training_delta=training_delta)

    # ---------------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, Any]:
        r"""The ledger's records and settings as plain values (``json.dumps``-able; version 7).

        Reservations are not part of it (they are no records). Infinite μ or ε(α) is stored as
        ``float("inf")``, which Python's ``json`` writes as ``Infinity`` and reads back.
        """
        return encode_state(self._accounts.settings(), self.records())

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        r"""Merge a saved state into this ledger: never replace, never remove.

        Records of the state missing here are added (not re-checked: they were spent); records
        present under the same ``release_id`` must agree (``ValueError`` otherwise, nothing
        changed). A budget of the state tightens this ledger's (never loosens it); the other
        settings must agree, except that a ledger without training records adopts the
        state's δ and accountant. A damaged state or unsupported version raises
        ``ValueError`` and changes nothing.
        """
        self._accounts.merge(*decode_state(state_dict))

    @classmethod
    def from_state_dict(cls, state_dict: Mapping[str, Any]) -> PrivacyLedger:
        r"""A new in-memory ledger holding a saved state."""
        settings, _ = decode_state(state_dict)
        ledger = cls(**settings)
        ledger.load_state_dict(state_dict)
        return ledger
