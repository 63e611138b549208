r"""The ledger's rows (records and reservations) and the transactions that change them.

A ledger's content is one list of rows in order: records (releases that were made, never
removed or replaced) and reservations (budget held by an open charge, dropped when the
charge ends). In memory the list lives in the ledger object; with a database
(``privacy.ledger_storage``) it is the dataset's rows, reloaded in every transaction, and
each change is written to both.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from botorch_dp.privacy.ledger.events import PrivacyEvent, Record, event_from_json, event_to_json
from botorch_dp.privacy.ledger.holders import Holder

if TYPE_CHECKING:
    from botorch_dp.privacy.ledger_storage import LedgerTransaction, StoredRow

__all__ = ["Row", "Transaction", "memory_counter", "rows_from_storage"]


@dataclass(frozen=True)
class Row:
    r"""One row: a record (``release_id`` set) or a reservation (``owner`` set).

    Attributes:
        seq: Position in the ledger's order (increasing).
        side: ``"validation"`` or ``"training"``.
        recorded: True for a record, False for a reservation.
        run_id: The run that made the release, or that holds the reservation.
        key: The release key (``""`` for training and for reservations).
        release_id: The record's own id (None for a reservation).
        owner: The token of the charge holding a reservation (None for a record).
        event: What the record spent, or what the reservation holds.
        holder: The process holding a reservation (None for a record, or a reservation that
            names none: ``holders``).
        lease_expires: When a stored reservation's lease expires (None in memory and for a record).
    """

    seq: int
    side: str
    recorded: bool
    run_id: Any
    key: str
    release_id: str | None
    owner: str | None
    event: PrivacyEvent
    holder: Holder | None = None
    lease_expires: float | None = None

    def record(self) -> Record:
        if self.release_id is None:
            raise ValueError(f"Row {self.seq} is a reservation, not a record (it has no release_id).")
        return Record(self.release_id, self.side, self.run_id, self.key, self.event)


def rows_from_storage(stored: list[StoredRow]) -> list[Row]:
    r"""The stored rows decoded (events checked)."""
    return [
        Row(
            seq=r.seq,
            side=r.side,
            recorded=r.status == "recorded",
            run_id=r.run_id,
            key=r.key or "",
            release_id=r.release_id,
            owner=r.owner,
            event=event_from_json(r.side, r.entry),
            holder=None if r.holder is None else Holder.from_json(r.holder),
            lease_expires=r.lease_expires,
        )
        for r in stored
    ]


class Transaction:
    r"""Changes to a ledger's rows inside its lock: in memory, or in the database too.

    Args:
        rows: The ledger's rows (changed in place).
        stored: The open database transaction, or None in memory.
        counter: Where in-memory sequence numbers come from.
    """

    def __init__(self, rows: list[Row], stored: LedgerTransaction | None, counter: Iterator[int]) -> None:
        self.rows = rows
        self._stored = stored
        self._counter = counter

    def _next_seq(self) -> int:
        return next(self._counter)

    def record(self, side: str, run_id: Any, key: str, release_id: str, event: PrivacyEvent) -> None:
        r"""Append a record."""
        if self._stored is not None:
            seq = self._stored.record(
                side=side, entry=event_to_json(event), run_id=run_id, key=key, release_id=release_id
            )
        else:
            seq = self._next_seq()
        self.rows.append(Row(seq, side, True, run_id, key, release_id, None, event))

    def reserve(
        self, side: str, run_id: Any, owner: str, event: PrivacyEvent, holder: Holder, lease_expires: float | None
    ) -> int:
        r"""Append a reservation held by ``holder`` (its lease until ``lease_expires``); returns its ``seq``."""
        if self._stored is not None:
            seq = self._stored.reserve(
                side=side,
                entry=event_to_json(event),
                run_id=run_id,
                owner=owner,
                holder=holder.to_json(),
                lease_expires=lease_expires,
            )
        else:
            seq = self._next_seq()
        self.rows.append(Row(seq, side, False, run_id, "", None, owner, event, holder, lease_expires))
        return seq

    def holds(self, seq: int) -> bool:
        r"""Whether reservation ``seq`` is still held (not given back, recorded or settled)."""
        return self._find(seq) is not None

    def _find(self, seq: int) -> int | None:
        for i, row in enumerate(self.rows):
            if row.seq == seq and not row.recorded:
                return i
        return None

    def shrink(self, seq: int, event: PrivacyEvent) -> None:
        r"""Make reservation ``seq`` hold ``event`` instead (part of it was used)."""
        i = self._find(seq)
        if i is None:
            return
        if self._stored is not None:
            self._stored.shrink_reservation(seq, entry=event_to_json(event))
        self.rows[i] = replace(self.rows[i], event=event)

    def fulfil(self, seq: int, run_id: Any, key: str, release_id: str, event: PrivacyEvent) -> None:
        r"""Turn reservation ``seq`` into a record in place (its position kept)."""
        i = self._find(seq)
        if i is None:  # cancelled meanwhile: the record still goes in, at the end
            self.record("training", run_id, key, release_id, event)
            return
        if self._stored is not None:
            self._stored.fulfil_reservation(
                seq, entry=event_to_json(event), run_id=run_id, key=key, release_id=release_id
            )
        self.rows[i] = Row(seq, self.rows[i].side, True, run_id, key, release_id, None, event)

    def drop(self, seq: int) -> None:
        r"""Remove reservation ``seq`` (nothing happens to a record)."""
        i = self._find(seq)
        if i is None:
            return
        if self._stored is not None:
            self._stored.drop_reservation(seq)
        del self.rows[i]


def memory_counter() -> Iterator[int]:
    return itertools.count(1)
