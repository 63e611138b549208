r"""The stored ledger's files and URLs: how a storage argument becomes one database URL, what
the SQLite file holds, and the schema version check and migration (issue 17 item 5; the shared
budget itself is tested in test_ledger_storage.py)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import uuid

import pytest
import sqlalchemy as sa

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger
from botorch_dp.privacy.ledger_storage import SCHEMA_VERSION, open_storage, storage_url

MU = 0.2  # one release's μ, as in test_ledger_storage.py


def _dataset() -> str:
    return f"clinic-{uuid.uuid4().hex[:12]}"


def _rows(url, dataset):
    return open_storage(url).rows(dataset)


def test_storage_urls():
    assert storage_url("budget.db") == "sqlite:///" + os.path.abspath("budget.db")
    assert storage_url("sqlite:///x.db") == "sqlite:///" + os.path.abspath("x.db")
    assert storage_url("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    assert storage_url("postgresql://u@/db?host=/s") == "postgresql+psycopg://u@/db?host=/s"
    with pytest.raises(ValueError, match="storage"):
        storage_url("")
    with pytest.raises(ValueError, match="only SQLite and PostgreSQL"):
        open_storage("mysql://u@h/db")


def test_a_database_of_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "old.db"
    PrivacyLedger(storage=path, dataset="d")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE botorch_dp_ledger_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(ValueError, match=f"schema version 99.*reads version {SCHEMA_VERSION}"):
        from botorch_dp.privacy.ledger_storage import LedgerStorage

        LedgerStorage(storage_url(path))


def test_the_sqlite_file_holds_json_text(tmp_path):
    path = tmp_path / "budget.db"
    ledger = PrivacyLedger(storage=path, dataset="d", validation_mu_budget=1.0)
    ledger.record_validation_pure(0.5, run_id="r", key="select")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as db:
        row = db.execute(sa.text("SELECT run_id, release_key, release_id, entry FROM botorch_dp_ledger_records")).one()
        settings = db.execute(sa.text("SELECT settings FROM botorch_dp_ledger_datasets")).scalar_one()
    engine.dispose()
    assert row.run_id == '"r"' and row.release_key == "select" and len(row.release_id) == 32
    assert json.loads(row.entry) == {"mu": pure_dp_to_gdp_mu(0.5), "epsilon": 0.5}
    assert json.loads(settings)["validation_mu_budget"] == 1.0


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
    assert ledger.validation_mu_budget == 1.0 and ledger.validation_mu() == 0.3
    assert [r.release_id for r in ledger.records()] == ['legacy:validation:"run-a":step-0000', "legacy:training:7:"]
    assert ledger.remaining_validation_mu() == pytest.approx(math.sqrt(1 - 0.09 - 0.16))  # the old hold still counts
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
    assert len(ledger.records()) == 2 and PrivacyLedger(storage=path, dataset="d").validation_mu() == 0.3


def test_a_version_2_database_gets_holder_columns_and_its_reservations_are_never_settled_on_their_own(tmp_path):
    r"""A database written before reservations named their holder (schema 2): the columns are
    added on open; a reservation it holds may belong to a process still running older code, so
    it stays counted (an over-count) until it is cancelled by name with ``holderless=True``."""
    path = tmp_path / "v2.db"
    ledger = PrivacyLedger(storage=path, dataset="d", validation_mu_budget=1.0)
    ledger.record_validation_step(0.3, run_id="run-a", key="step-0000")
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
    assert ledger.remaining_validation_mu() == pytest.approx(math.sqrt(1 - 0.09 - 0.16))
    assert ledger.cancel_reservations("run-a") == 0 and ledger.cancel_reservations() == 0
    assert ledger.settle_run("run-a") == 0 and ledger.num_reservations() == 1  # a resume goes on, still counted
    assert ledger.cancel_reservations("run-a", holderless=True) == 1
    assert ledger.validation_mu() == 0.3 and ledger.num_reservations() == 0


def test_a_relative_sqlite_url_is_one_file_before_and_after_a_chdir(tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    file = "sqlite:///" + str(sub / "ledger.db")
    dataset = _dataset()
    monkeypatch.chdir(sub)
    assert storage_url("sqlite:///ledger.db") == file
    assert storage_url("sqlite+pysqlite:///ledger.db?timeout=5") == f"sqlite+pysqlite:///{sub / 'ledger.db'}?timeout=5"
    opened = open_storage("sqlite:///ledger.db")
    ledger = PrivacyLedger(storage="sqlite:///ledger.db", dataset=dataset, validation_mu_budget=1.0)
    assert ledger.record_validation_step(mu=MU, run_id="run-a", key="step-0000")
    monkeypatch.chdir(tmp_path)
    # the same file, named relative to the new directory or by its path: the same storage
    assert open_storage("sqlite:///sub/ledger.db") is opened and open_storage(sub / "ledger.db") is opened
    assert ledger.storage_url == opened.url == file
    # the old relative name now names another file, under another key
    other = open_storage("sqlite:///ledger.db")
    assert other is not opened and other.url == "sqlite:///" + str(tmp_path / "ledger.db")
    # connections opened after the chdir (here: after the pool was emptied) reach the first file
    opened.engine.dispose()
    assert [r.key for r in ledger.validation_records()] == ["step-0000"]
    again = PrivacyLedger(storage="sqlite:///sub/ledger.db", dataset=dataset)
    assert [r.key for r in again.validation_records()] == ["step-0000"]
    assert [r.key for r in _rows(file, dataset)] == ["step-0000"]
    assert storage_url("sqlite://") == "sqlite://" and storage_url("sqlite:///:memory:") == "sqlite:///:memory:"
