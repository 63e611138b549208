r"""The tables of a stored ledger (``ledger_storage``) and the migrations of older layouts.

See ``ledger_storage`` for what each table and column holds. Schema version 3; a version-2
database gets the reservations' ``holder`` and ``lease_expires`` columns, a version-1 one is
copied into the records table; any other version is refused.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = [
    "LEGACY_RESERVATION_RUN",
    "SCHEMA_VERSION",
    "datasets",
    "dumps",
    "meta",
    "metadata",
    "migrate",
    "now",
    "records",
]

#: Version of the tables' layout; versions 1 and 2 are migrated, any other is refused.
SCHEMA_VERSION = 3
#: The run id that reservations migrated from a version-1 database are held under.
LEGACY_RESERVATION_RUN = "legacy-reservation"

metadata = sa.MetaData()
meta = sa.Table(
    "botorch_dp_ledger_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
datasets = sa.Table(
    "botorch_dp_ledger_datasets",
    metadata,
    sa.Column("dataset", sa.String(255), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)
records = sa.Table(
    "botorch_dp_ledger_records",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(255), sa.ForeignKey("botorch_dp_ledger_datasets.dataset"), nullable=False),
    sa.Column("side", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("run_id", sa.Text, nullable=True),
    sa.Column("release_key", sa.Text, nullable=True),
    sa.Column("release_id", sa.String(255), nullable=True),
    sa.Column("owner", sa.String(64), nullable=True),
    sa.Column("entry", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("holder", sa.Text, nullable=True),
    sa.Column("lease_expires", sa.Float, nullable=True),
    sa.UniqueConstraint("dataset", "release_id", name="botorch_dp_ledger_records_release"),
    sa.CheckConstraint("side IN ('validation', 'training')", name="botorch_dp_ledger_records_side"),
    sa.CheckConstraint("status IN ('recorded', 'reserved')", name="botorch_dp_ledger_records_status"),
)
sa.Index("botorch_dp_ledger_records_dataset_seq", records.c.dataset, records.c.seq)

# Version 1's table, read only to migrate it (never created: not in ``metadata``).
_legacy_metadata = sa.MetaData()
_legacy_entries = sa.Table(
    "botorch_dp_ledger_entries",
    _legacy_metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("dataset", sa.String(255)),
    sa.Column("side", sa.String(16)),
    sa.Column("status", sa.String(16)),
    sa.Column("run_id", sa.Text),
    sa.Column("release_key", sa.Text),
    sa.Column("owner", sa.String(64)),
    sa.Column("entry", sa.Text),
    sa.Column("created_at", sa.String(40)),
)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=True)


def _migrate_from_version_2(connection: Connection) -> None:
    r"""Add the reservations' ``holder`` and ``lease_expires`` columns to a version-2 database and
    mark it version 3, inside the caller's locked transaction (its reservations name no holder)."""
    for column, kind in (("holder", "TEXT"), ("lease_expires", "DOUBLE PRECISION")):
        connection.execute(sa.text(f"ALTER TABLE botorch_dp_ledger_records ADD COLUMN {column} {kind}"))
    connection.execute(meta.update().where(meta.c.name == "schema_version").values(value=str(SCHEMA_VERSION)))


def _migrate_from_version_1(connection: Connection) -> None:
    r"""Copy a version-1 database's entries into ``botorch_dp_ledger_records`` (see the module
    docstring) and mark the database version 3, inside the caller's locked transaction (the
    table was created with this version's columns)."""
    rows = connection.execute(sa.select(_legacy_entries).order_by(_legacy_entries.c.seq)).mappings().all()
    for r in rows:
        recorded = r["status"] == "recorded"
        run_id = json.loads(r["run_id"]) if r["run_id"] is not None else None
        key = r["release_key"] if recorded else None
        release_id = None
        if recorded:
            release_id = f"legacy:{r['side']}:{json.dumps(run_id)}:{r['release_key'] or ''}"
        connection.execute(
            records.insert().values(
                dataset=r["dataset"],
                side=r["side"],
                status=r["status"],
                run_id=dumps(run_id if recorded else LEGACY_RESERVATION_RUN),
                release_key=key,
                release_id=release_id,
                owner=None if recorded else (r["owner"] or "legacy"),
                entry=r["entry"],
                created_at=r["created_at"],
            )
        )
    connection.execute(meta.update().where(meta.c.name == "schema_version").values(value=str(SCHEMA_VERSION)))


def migrate(connection: Connection, version: str) -> str:
    r"""Bring a database of schema ``version`` to ``SCHEMA_VERSION`` inside the caller's locked
    transaction (versions 1 and 2); returns the version it is now (any other is left as it is)."""
    if version == "1":
        _migrate_from_version_1(connection)
    elif version == "2":
        _migrate_from_version_2(connection)
    else:
        return version
    return str(SCHEMA_VERSION)
