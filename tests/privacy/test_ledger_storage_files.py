r"""The stored ledger's files and URLs: how a storage argument becomes one database URL and what
the SQLite file holds (issue 17 item 5; the shared budget itself is tested in test_ledger_storage.py,
the schema version check and migrations in test_ledger_schema.py)."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import sqlalchemy as sa

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger, PureDP
from botorch_dp.privacy.ledger_storage import open_storage, storage_url

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


def test_the_sqlite_file_holds_json_text(tmp_path):
    path = tmp_path / "budget.db"
    ledger = PrivacyLedger(storage=path, dataset="d", validation_mu_budget=1.0)
    ledger.external.record(PureDP(0.5), run_id="r", key="select")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as db:
        row = db.execute(sa.text("SELECT run_id, release_key, release_id, entry FROM botorch_dp_ledger_records")).one()
        settings = db.execute(sa.text("SELECT settings FROM botorch_dp_ledger_datasets")).scalar_one()
    engine.dispose()
    assert row.run_id == '"r"' and row.release_key == "select" and len(row.release_id) == 32
    assert json.loads(row.entry) == {"mu": pure_dp_to_gdp_mu(0.5), "epsilon": 0.5}
    assert json.loads(settings)["validation_mu_budget"] == 1.0


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
    assert ledger.external.record(Gaussian(MU), run_id="run-a", key="step-0000")
    monkeypatch.chdir(tmp_path)
    # the same file, named relative to the new directory or by its path: the same storage
    assert open_storage("sqlite:///sub/ledger.db") is opened and open_storage(sub / "ledger.db") is opened
    assert ledger.storage_url == opened.url == file
    # the old relative name now names another file, under another key
    other = open_storage("sqlite:///ledger.db")
    assert other is not opened and other.url == "sqlite:///" + str(tmp_path / "ledger.db")
    # connections opened after the chdir (here: after the pool was emptied) reach the first file
    opened.engine.dispose()
    assert [r.key for r in ledger.validation.records()] == ["step-0000"]
    again = PrivacyLedger(storage="sqlite:///sub/ledger.db", dataset=dataset)
    assert [r.key for r in again.validation.records()] == ["step-0000"]
    assert [r.key for r in _rows(file, dataset)] == ["step-0000"]
    assert storage_url("sqlite://") == "sqlite://" and storage_url("sqlite:///:memory:") == "sqlite:///:memory:"
