r"""The ledger's rows and the transactions that change them (botorch_dp/privacy/ledger/rows.py): one
sequence of records and reservations gives the rows an independent list model predicts, in memory
and in an SQLite dataset alike, and the stored rows decode to the in-memory ones; a record is never
shrunk, fulfilled or dropped as if it were a reservation, and a reservation is no record."""

import pytest

from botorch_dp.privacy.ledger.events import DPSGDRun, Gaussian, PureDP
from botorch_dp.privacy.ledger.holders import this_holder
from botorch_dp.privacy.ledger.rows import Row, Transaction, memory_counter, rows_from_storage
from botorch_dp.privacy.ledger_storage import open_storage


def _apply(tx: Transaction) -> None:
    holder = this_holder()
    tx.record("validation", "a", "step-0000", "id-1", Gaussian(0.1))
    held = tx.reserve("validation", "a", "tok-1", Gaussian(0.5), holder, None)
    dropped = tx.reserve("validation", "b", "tok-2", PureDP(1.0), holder, None)
    trained = tx.reserve("training", 7, "tok-3", DPSGDRun.checked(1.0, 0.1, 10), holder, None)
    tx.record("validation", "b", "select", "id-2", PureDP(0.2))
    assert tx.holds(held) and tx.holds(dropped) and tx.holds(trained)
    tx.shrink(held, Gaussian(0.3))
    tx.drop(dropped)
    tx.fulfil(trained, 7, "", "id-3", DPSGDRun.checked(1.0, 0.1, 5))
    assert not tx.holds(dropped) and not tx.holds(trained)
    # A record is no reservation: none of these touch it, and a second drop is a no-op.
    first = tx.rows[0].seq
    tx.shrink(first, Gaussian(9.0))
    tx.drop(first)
    tx.drop(dropped)
    assert not tx.holds(first)
    # A reservation cancelled meanwhile: its record still goes in, at the end.
    tx.fulfil(dropped, 8, "", "id-4", DPSGDRun.checked(2.0, 0.1, 3))


#: (side, recorded, run_id, key, release_id, owner, event) of each row the sequence leaves, in order.
EXPECTED = [
    ("validation", True, "a", "step-0000", "id-1", None, Gaussian(0.1)),
    ("validation", False, "a", "", None, "tok-1", Gaussian(0.3)),
    ("training", True, 7, "", "id-3", None, DPSGDRun(1.0, 0.1, 5)),
    ("validation", True, "b", "select", "id-2", None, PureDP(0.2)),
    ("training", True, 8, "", "id-4", None, DPSGDRun(2.0, 0.1, 3)),
]


def _fields(rows: list[Row]) -> list[tuple]:
    return [(r.side, r.recorded, r.run_id, r.key, r.release_id, r.owner, r.event) for r in rows]


def test_a_sequence_in_memory_gives_the_model_rows_in_order():
    rows: list[Row] = []
    _apply(Transaction(rows, None, memory_counter()))
    assert _fields(rows) == EXPECTED
    assert [r.seq for r in rows] == sorted(r.seq for r in rows)
    assert [r.record().release_id for r in rows if r.recorded] == ["id-1", "id-3", "id-2", "id-4"]


def test_a_stored_sequence_gives_the_same_rows_and_they_decode_to_the_in_memory_ones(tmp_path):
    storage = open_storage(tmp_path / "ledger.sqlite")
    try:
        storage.ensure_dataset("d", {})
        with storage.transaction("d") as stored:
            rows = rows_from_storage(stored.rows())
            _apply(Transaction(rows, stored, memory_counter()))
        decoded = rows_from_storage(storage.rows("d"))
    finally:
        storage.dispose()
    assert _fields(rows) == EXPECTED
    assert _fields(decoded) == EXPECTED
    assert [r.seq for r in decoded] == [r.seq for r in rows]
    assert decoded[1].holder == this_holder()


def test_a_reservation_is_not_a_record():
    row = Row(4, "validation", False, "a", "", None, "tok", Gaussian(1.0))
    with pytest.raises(ValueError, match="Row 4 is a reservation"):
        row.record()
