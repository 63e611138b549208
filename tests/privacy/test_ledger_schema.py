r"""The tables of a stored ledger and the migrations of older layouts (botorch_dp/privacy/ledger_schema.py):
a database of an unknown schema version is refused; a version-1 database is migrated in place and its
old records keep their identity; a version-2 database gets the holder columns and its holderless
reservations stay counted until cancelled by name."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, Gaussian, PrivacyLedger
from botorch_dp.privacy.ledger_storage import SCHEMA_VERSION, open_storage, storage_url


def test_a_database_of_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "old.db"
    PrivacyLedger(storage=path, dataset="d")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE botorch_dp_ledger_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(ValueError, match=f"schema version 99.*reads version {SCHEMA_VERSION}"):
        from botorch_dp.privacy.ledger_storage import LedgerStorage

        LedgerStorage(storage_url(path))


def test_a_version_1_database_is_migrated_in_place_and_its_old_records_keep_their_identity(tmp_path):
    r"""A database written before release ids (schema 1: rows unique on (run_id, key)) is
    copied into the new table on open: its records get the ``legacy:`` ids a version-4
    checkpoint's records get, so the same release from both is one record; its
    reservations are held under ``"legacy-reservation"`` without a holder; older code refuses version 3."""
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE botorch_dp_ledger_meta (name VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO botorch_dp_ledger_meta VALUES ('schema_version', '1');
            CREATE TABLE botorch_dp_ledger_datasets (dataset VARCHAR(255) PRIMARY KEY, settings TEXT NOT NULL,
                created_at VARCHAR(40) NOT NULL);
            CREATE TABLE botorch_dp_ledger_entries (seq INTEGER PRIMARY KEY AUTOINCREMENT,
                dataset VARCHAR(255) NOT NULL, side VARCHAR(16) NOT NULL, status VARCHAR(16) NOT NULL,
                run_id TEXT, release_key TEXT, owner VARCHAR(64),
                entry TEXT NOT NULL, created_at VARCHAR(40) NOT NULL);
            """
        )
        settings = {
            "validation_mu_budget": 1.0,
            "training_epsilon_budget": None,
            "training_delta": None,
            "training_accountant": "rdp",
            "prv_eps_error": 0.01,
        }
        db.execute("INSERT INTO botorch_dp_ledger_datasets VALUES ('d', ?, 'then')", (json.dumps(settings),))
        rows = [
            ("validation", "recorded", '"run-a"', "step-0000", None, '{"mu": 0.3}'),
            ("validation", "reserved", None, None, "tok", '{"mu": 0.4}'),
            ("training", "recorded", "7", "", None, '{"noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 5}'),
        ]
        for side, status, run_id, key, owner, entry in rows:
            db.execute(
                "INSERT INTO botorch_dp_ledger_entries (dataset, side, status, run_id, release_key, owner, entry, "
                "created_at) VALUES ('d', ?, ?, ?, ?, ?, ?, 'then')",
                (side, status, run_id, key, owner, entry),
            )
    ledger = PrivacyLedger(storage=path, dataset="d")
    assert ledger.validation_mu_budget == 1.0 and ledger.validation.mu() == 0.3
    assert [r.release_id for r in ledger.records()] == ['legacy:validation:"run-a":step-0000', "legacy:training:7:"]
    assert ledger.validation.remaining_mu() == pytest.approx(math.sqrt(1 - 0.09 - 0.16))  # the old hold still counts
    assert ledger.cancel_reservations("legacy-reservation") == 0  # no holder: never settled on its own
    assert ledger.cancel_reservations("legacy-reservation", holderless=True) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM botorch_dp_ledger_meta").fetchone() == ("3",)
        assert db.execute("SELECT COUNT(*) FROM botorch_dp_ledger_entries").fetchone() == (3,)  # left as it was
    # the same release in a version-4 checkpoint state merges into it: not counted twice
    v4 = {
        "version": 4,
        "validation_mu_budget": 1.0,
        "training_epsilon_budget": None,
        "training_delta": None,
        "training_accountant": "rdp",
        "prv_eps_error": 0.01,
        "rdp_orders": list(TRAINING_RDP_ORDERS),
        "validation_steps": [{"run_id": "run-a", "key": "step-0000", "mu": 0.3}],
        "training_runs": [],
    }
    ledger.load_state_dict(v4)
    assert len(ledger.records()) == 2 and PrivacyLedger(storage=path, dataset="d").validation.mu() == 0.3


def test_a_version_2_database_gets_holder_columns_and_its_reservations_are_never_settled_on_their_own(tmp_path):
    r"""A database written before reservations named their holder (schema 2): the columns are
    added on open; a reservation it holds may belong to a process still running older code, so
    it stays counted (an over-count) until it is cancelled by name with ``holderless=True``."""
    path = tmp_path / "v2.db"
    ledger = PrivacyLedger(storage=path, dataset="d", validation_mu_budget=1.0)
    ledger.external.record(Gaussian(0.3), run_id="run-a", key="step-0000")
    open_storage(path).dispose()
    with sqlite3.connect(path) as db:  # back to what version 2 wrote
        db.execute("ALTER TABLE botorch_dp_ledger_records DROP COLUMN holder")
        db.execute("ALTER TABLE botorch_dp_ledger_records DROP COLUMN lease_expires")
        db.execute(
            "INSERT INTO botorch_dp_ledger_records (dataset, side, status, run_id, owner, entry, created_at) "
            """VALUES ('d', 'validation', 'reserved', '"run-a"', 'tok', '{"mu": 0.4}', 'then')"""
        )
        db.execute("UPDATE botorch_dp_ledger_meta SET value = '2' WHERE name = 'schema_version'")
    from botorch_dp.privacy.ledger_storage import LedgerStorage

    LedgerStorage(storage_url(path))  # opened afresh: migrated
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM botorch_dp_ledger_meta").fetchone() == ("3",)
        assert db.execute("SELECT holder, lease_expires FROM botorch_dp_ledger_records").fetchall() == [
            (None, None),
            (None, None),
        ]
    assert ledger.validation.remaining_mu() == pytest.approx(math.sqrt(1 - 0.09 - 0.16))
    assert ledger.cancel_reservations("run-a") == 0 and ledger.cancel_reservations() == 0
    assert ledger.settle_run("run-a") == 0 and len(ledger.reservation_holders()) == 1  # a resume goes on, still counted
    assert ledger.cancel_reservations("run-a", holderless=True) == 1
    assert ledger.validation.mu() == 0.3 and len(ledger.reservation_holders()) == 0
