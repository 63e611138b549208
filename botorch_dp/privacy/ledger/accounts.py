r"""Where a ``PrivacyLedger`` keeps its rows: in memory or in a stored dataset (``ledger_storage``),
the transactions every change goes through, what pickling may carry (a stored ledger travels
as its database address; an in-memory one with a budget or records refuses to be copied), and
the budgets the filters use (the object's, never above the stored one). One ``LedgerAccounts``
is the state of one ledger; the ledger and its parts each hold it (no part inherits from it)."""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botorch_dp.privacy.checks import check_choice, check_delta, check_positive
from botorch_dp.privacy.ledger.filters import TRAINING_ACCOUNTANTS, check_training_admits, check_validation_admits
from botorch_dp.privacy.ledger.holders import Holder, lease_expiry, this_holder
from botorch_dp.privacy.ledger.rows import Row, Transaction, memory_counter, rows_from_storage
from botorch_dp.privacy.ledger.state import SETTINGS, check_key

if TYPE_CHECKING:
    from botorch_dp.privacy.ledger_storage import LedgerStorage

__all__ = ["LedgerAccounts", "same_setting"]

_BUDGET_SETTINGS = ("validation_mu_budget", "validation_delta", "training_epsilon_budget", "training_delta")


def same_setting(a: Any, b: Any) -> bool:
    if (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return a == b or math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


class LedgerAccounts:
    r"""A ledger's rows, settings, storage and transactions: the state ``PrivacyLedger`` and its
    parts (``views``, ``external``) share, each holding this one object.

    Args:
        validation_mu_budget, validation_delta, training_epsilon_budget, training_delta,
            training_accountant, prv_eps_error: The settings (see ``PrivacyLedger``), checked.
        storage: None (in memory) or the database holding ``dataset`` (``ledger_storage``).
        dataset: The dataset's name in ``storage``.
    """

    def __init__(
        self,
        *,
        validation_mu_budget: float | None,
        validation_delta: float | None = None,
        training_epsilon_budget: float | None,
        training_delta: float | None,
        training_accountant: str,
        prv_eps_error: float,
        storage: str | os.PathLike | None,
        dataset: str | None,
    ) -> None:
        self.validation_mu_budget = (
            None if validation_mu_budget is None else check_positive(validation_mu_budget, "validation_mu_budget")
        )
        self.validation_delta = None if validation_delta is None else check_delta(validation_delta, "validation_delta")
        self.training_epsilon_budget = (
            None
            if training_epsilon_budget is None
            else check_positive(training_epsilon_budget, "training_epsilon_budget")
        )
        self.training_delta = None if training_delta is None else check_delta(training_delta, "training_delta")
        if self.training_epsilon_budget is not None and self.training_delta is None:
            raise ValueError("training_epsilon_budget needs training_delta.")
        self.training_accountant = check_choice(training_accountant, "training_accountant", TRAINING_ACCOUNTANTS)
        self.prv_eps_error = check_positive(prv_eps_error, "prv_eps_error")
        self._rows: list[Row] = []
        self._counter = memory_counter()
        self._storage: LedgerStorage | None = None
        self.dataset: str | None = None
        self._stored_settings: dict[str, Any] = {}
        self._holding = False
        self._lock = threading.RLock()
        if storage is None:
            if dataset is not None:
                raise ValueError("dataset needs storage (the database that holds the dataset's ledger).")
        else:
            self._open(storage, dataset)

    def settings(self) -> dict[str, Any]:
        r"""The settings stored with the ledger (``state.SETTINGS``), by name."""
        return {name: getattr(self, name) for name in SETTINGS}

    def _open(self, storage: str | os.PathLike, dataset: Any) -> None:
        r"""Open (or create) ``dataset`` in ``storage`` and adopt its stored settings."""
        from botorch_dp.privacy.ledger_storage import open_storage

        if dataset is None:
            raise ValueError("storage needs dataset, the name of the dataset whose budget the ledger holds.")
        dataset = check_key(dataset)
        store = open_storage(storage)
        given = self.settings()
        stored = store.ensure_dataset(dataset, given)
        for name in SETTINGS:
            if name in _BUDGET_SETTINGS and given[name] is None:
                continue
            if not same_setting(given[name], stored.get(name)):
                raise ValueError(
                    f"{name}={given[name]!r} differs from {stored.get(name)!r}, stored with dataset {dataset!r} "
                    f"in {store.url!r} when it was first opened. A shared budget has one value: pass the stored "
                    "value, or None to adopt it."
                )
        for name in SETTINGS:
            setattr(self, name, stored.get(name))
        self._storage, self.dataset, self._stored_settings = store, dataset, stored

    @property
    def storage(self) -> LedgerStorage | None:
        r"""The database holding the rows (None in memory)."""
        return self._storage

    @property
    def storage_url(self) -> str | None:
        r"""The SQLAlchemy URL of the ledger's database (None in memory)."""
        return None if self._storage is None else self._storage.url

    def __getstate__(self) -> dict[str, Any]:
        if self._storage is None and (
            self._rows or any(getattr(self, n) is not None for n in ("validation_mu_budget", "training_epsilon_budget"))
        ):
            raise TypeError(
                "An in-memory PrivacyLedger with a budget or records cannot be pickled: a copy in another "
                "process (an executor's worker, a Dask task) would record there and its charges would be "
                "lost. Keep the ledger in this process (objectives that train privately return their "
                "charges through evaluate_rows), or share it by URL with PrivacyLedger(storage=..., "
                "dataset=...), which pickles as its database address."
            )
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_counter")}
        if self._storage is not None:  # reopened (by URL) where it is unpickled
            state["_storage"] = self._storage.url
            state["_rows"] = []
        state["_holding"] = False
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("_storage"), str):
            from botorch_dp.privacy.ledger_storage import open_storage

            state = {**state, "_storage": open_storage(state["_storage"])}
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._counter = memory_counter()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Transaction]:
        r"""A transaction on the ledger's rows under its lock; stored: the dataset's write
        transaction with the rows reloaded, everything committing together or not at all."""
        if self._storage is None:
            with self._lock:
                self._holding = True
                try:
                    yield Transaction(self._rows, None, self._counter)
                finally:
                    self._holding = False
            return
        if self.dataset is None:
            raise RuntimeError("A stored ledger needs the name of its dataset; this one has none.")
        with self._lock, self._storage.transaction(self.dataset) as tx:
            self._holding = True
            try:
                self._rows = rows_from_storage(tx.rows())
                yield Transaction(self._rows, tx, self._counter)
            finally:
                self._holding = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[list[Row]]:
        r"""The rows, for reading: a stored ledger reloads the dataset's rows first (one consistent
        snapshot per outermost block, which nested reads share); in memory it only takes the lock."""
        with self._lock:
            if self._storage is None or self._holding:
                yield self._rows
                return
            if self.dataset is None:
                raise RuntimeError("A stored ledger needs the name of its dataset; this one has none.")
            self._holding = True
            try:
                self._rows = rows_from_storage(self._storage.rows(self.dataset))
                yield self._rows
            finally:
                self._holding = False

    def rows(self) -> list[Row]:
        r"""The rows as they are now (a snapshot; stored: reloaded)."""
        with self.reading() as rows:
            return list(rows)

    def lease(self) -> tuple[Holder, float | None]:
        r"""The holder and lease of a new reservation (in memory: this process, no lease)."""
        return this_holder(), None if self._storage is None else lease_expiry()

    # ------------------------------------------------------------------- budgets
    def validation_budget(self) -> float | None:
        r"""The budget the filter uses: the object's, never above the stored one."""
        budget = self.validation_mu_budget
        if self._storage is not None:
            stored = self._stored_settings.get("validation_mu_budget")
            budget = stored if budget is None else budget if stored is None else min(budget, stored)
        return budget

    def training_budget(self) -> float | None:
        budget = self.training_epsilon_budget
        if self._storage is not None:
            stored = self._stored_settings.get("training_epsilon_budget")
            budget = stored if budget is None else budget if stored is None else min(budget, stored)
        return budget

    def spent(self, side: str) -> list[Any]:
        r"""The events of every record and reservation of ``side``, in order (what the filter counts);
        called inside ``writing`` or ``reading``, whose rows it reads."""
        return [row.event for row in self._rows if row.side == side]

    def check_validation(self, events: list[Any], what: str) -> None:
        r"""Raise ``PrivacyBudgetExceeded`` (naming ``what``) unless ``events`` fit the validation
        budget with every record and reservation (``filters.check_validation_admits``); called
        inside ``writing`` or ``reading``."""
        check_validation_admits(self.validation_budget(), self.spent("validation"), events, what, self.validation_delta)

    def check_training(self, events: list[Any]) -> None:
        r"""Raise ``PrivacyBudgetExceeded`` unless ``events`` fit the training budget with every
        record and reservation (``filters.check_training_admits``); called inside ``writing``."""
        check_training_admits(
            self.training_budget(),
            self.training_delta,
            self.training_accountant,
            self.prv_eps_error,
            self.spent("training"),
            events,
        )

    def merge(self, settings: dict[str, Any], records: list[Any]) -> None:
        r"""``PrivacyLedger.load_state_dict`` on a decoded state: add the records missing here
        (by ``release_id``), refuse ones that disagree, tighten the budgets, and adopt or check
        the training settings; nothing changes if anything is refused."""
        with self.writing() as tx:
            present = {r.release_id: r for r in tx.rows if r.recorded}
            has_training = any(r.recorded and r.side == "training" for r in tx.rows)
            theirs_delta = settings.get("validation_delta")
            if theirs_delta is not None and self.validation_delta is not None:
                if not same_setting(self.validation_delta, theirs_delta):
                    raise ValueError(
                        f"Ledger state: validation_delta={theirs_delta!r} differs from this ledger's "
                        f"{self.validation_delta!r} (the delta at which its validation budget is stated)."
                    )
            for name in ("training_accountant", "prv_eps_error", "training_delta"):
                mine, theirs = getattr(self, name), settings[name]
                if theirs is None or same_setting(mine, theirs) or (mine is None and name == "training_delta"):
                    continue
                if self._storage is None and not has_training:
                    continue  # adopted below
                raise ValueError(f"Ledger state: {name}={theirs!r} differs from this ledger's {mine!r}.")
            new = []
            for record in records:
                old = present.get(record.release_id)
                if old is None:
                    new.append(record)
                elif (old.side, old.run_id, old.key, old.event) != (
                    record.side,
                    record.run_id,
                    record.key,
                    record.event,
                ):
                    raise ValueError(
                        f"Ledger state: release {record.release_id!r} ({record.side} run {record.run_id!r}, key "
                        f"{record.key!r}) is {record.event!r} here but {old.event!r} in this ledger."
                    )
            for record in new:
                tx.record(record.side, record.run_id, record.key, record.release_id, record.event)
            if self._storage is None and not has_training:
                for name in ("training_accountant", "prv_eps_error", "training_delta"):
                    if settings[name] is not None:
                        setattr(self, name, settings[name])
            elif self.training_delta is None:
                self.training_delta = settings["training_delta"]
            if self.validation_delta is None and self._storage is None:
                self.validation_delta = theirs_delta
        for name in ("validation_mu_budget", "training_epsilon_budget"):
            theirs, mine = settings[name], getattr(self, name)
            if theirs is not None and (mine is None or theirs < mine):
                setattr(self, name, theirs)
