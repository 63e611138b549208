r"""Database storage for ``PrivacyLedger``: one dataset's budget shared by many runs and machines.

A ``LedgerStorage`` keeps, per dataset name, the ledger's settings (its budgets) and its
entries in three tables (SQLAlchemy Core; SQLite or PostgreSQL):

* ``botorch_dp_ledger_meta``: ``schema_version`` (``SCHEMA_VERSION``); a database written by
  another version is refused.
* ``botorch_dp_ledger_datasets``: one row per dataset, its settings as JSON text (the
  validation μ budget, the training ε budget and δ, the training accountant and the PRV
  accuracy), fixed when the row is created.
* ``botorch_dp_ledger_records``: one row per entry, in recording order (``seq``): ``side``
  (``"validation"`` or ``"training"``), ``status`` (``"recorded"``, or ``"reserved"`` for a
  budget hold taken by ``PrivacyLedger.charge`` before its releases), the run id (as JSON,
  so ``3`` and ``"3"`` differ), the release key (``""`` for training), the ``release_id`` of
  a record (unique in its dataset: every release made has its own, so a step replayed with
  fresh noise is a second row), the ``owner`` of a reservation (the token of the charge that
  holds it; its run id is in ``run_id``), the ``holder`` of a reservation (JSON ``{"pid",
  "host", "node", "token"}``: the process that holds it, ``ledger.holders``) and its
  ``lease_expires`` (wall-clock seconds, renewed by the holder while it holds it), and the
  entry itself as JSON text (``Infinity`` for ``inf``). No pickle. Validation entries:
  ``{"mu"}`` (Gaussian), ``{"mu", "epsilon"}`` (pure ε-DP), ``{"description", "rdp"}`` (an
  RDP curve on the ledger's order grid) or ``{"description", "epsilon", "delta"}`` (an ``(ε, δ)``
  statement, held alone); training entries: DP-SGD parameters,
  ``{"description", "rdp"}`` or ``{"description", "epsilon", "delta"}`` (an ``(ε, δ)``
  statement). A validation reservation holds ``{"mu"}``, ``{"description", "rdp"}`` (a
  step's composed worst case) or the ``(ε, δ)`` entry it reserves; a training one the entry it
  reserves (turned into the record
  in place, keeping its position). Records are never updated or deleted; a reservation is
  deleted when its charge ends, or by a settle once its holder is gone
  (``holders.holder_gone``).

Schema version 3. A version-2 database (the same tables without ``holder`` and
``lease_expires``) gets the two columns on open, in one locked transaction; its
reservations name no holder, so they are never settled automatically (see
``PrivacyLedger.cancel_reservations``). A version-1 database (table ``botorch_dp_ledger_entries``, whose rows had
no release id and were unique on ``(run_id, key)``) is migrated on open, in one locked
transaction: its rows are copied in order, recorded ones with ``legacy:`` release ids that
depend only on ``(side, run_id, key)`` (as a version-4 ledger state's entries get, so the
same record from a checkpoint is not counted twice), its reservations under run id
``"legacy-reservation"`` without a holder (cancel them with
``cancel_reservations("legacy-reservation", holderless=True)`` once you know their releases
were not made); the old table is left as it was. Either way the version becomes 3, which
older botorch-dp refuses (it would settle reservations of live holders).

Every change runs in ONE transaction that first takes the dataset's lock: ``BEGIN
IMMEDIATE`` on SQLite (the database's write lock), ``SELECT … FOR UPDATE`` on the
dataset's row on PostgreSQL. The ledger reads all of the dataset's entries, checks the
budget and writes the new row inside it, so two processes on two machines can never both
spend the last of a budget; a process that dies inside the transaction leaves nothing
(SQLite rolls the journal back, PostgreSQL aborts the dead session's transaction).

SQLAlchemy is imported by this module only, and the ledger imports this module only for a
ledger with ``storage=``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from botorch_dp.privacy.ledger_schema import (
    SCHEMA_VERSION,
    datasets,
    dumps,
    meta,
    metadata,
    migrate,
    now,
    records,
)

__all__ = ["SCHEMA_VERSION", "LedgerStorage", "LedgerTransaction", "StoredRow", "open_storage", "storage_url"]

_SIDES = ("validation", "training")
_STATUSES = ("recorded", "reserved")


@dataclass(frozen=True)
class StoredRow:
    r"""One stored entry, decoded.

    Attributes:
        seq: Its position in recording order (increasing within a dataset).
        side: ``"validation"`` or ``"training"``.
        status: ``"recorded"`` or ``"reserved"``.
        run_id: The run id (str or int); for a reservation, the run holding it.
        key: The release key (``""`` for training; None for a reservation).
        release_id: The record's own id (None for a reservation).
        owner: The token of the charge holding a reservation (None when recorded).
        entry: The decoded JSON entry.
        holder: The decoded holder of a reservation (None when recorded, or not named).
        lease_expires: When the reservation's lease expires (None when recorded, or not named).
    """

    seq: int
    side: str
    status: str
    run_id: Any
    key: str | None
    release_id: str | None
    owner: str | None
    entry: dict[str, Any]
    holder: dict[str, Any] | None = None
    lease_expires: float | None = None


def storage_url(storage: str | os.PathLike) -> str:
    r"""The SQLAlchemy URL of ``storage``: a URL (``"sqlite:///budget.db"``,
    ``"postgresql://user@/db?host=/run/postgresql"``) as it is, with ``postgresql://``
    given the psycopg (3) driver; any other string or path is an SQLite file. A relative
    SQLite file (``"budget.db"``, ``"sqlite:///budget.db"``) is made absolute in the current
    directory, so that one file has one URL (``open_storage``'s cache key, what the ledger
    records) whatever directory the process is in later.

    Args:
        storage: A SQLAlchemy URL, or the path of an SQLite file.

    Returns:
        The URL string.
    """
    if isinstance(storage, os.PathLike):
        storage = os.fspath(storage)
    if not isinstance(storage, str) or not storage.strip():
        raise ValueError(f"storage must be a database URL or a file path, got {storage!r}.")
    if "://" not in storage:
        return "sqlite:///" + os.path.abspath(storage)
    if storage.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + storage.split("://", 1)[1]
    if storage.startswith("sqlite"):
        return _absolute_sqlite(storage)
    return storage


def _absolute_sqlite(url: str) -> str:
    r"""``url`` with a relative SQLite file made absolute; in-memory databases, ``file:`` URIs and
    absolute files as they are."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as err:
        raise ValueError(f"storage is not a valid database URL: {url!r} ({err}).") from err
    database = parsed.database
    if (
        parsed.get_backend_name() != "sqlite"
        or not database
        or database == ":memory:"
        or database.startswith("file:")
        or os.path.isabs(database)
    ):
        return url
    return parsed.set(database=os.path.abspath(database)).render_as_string(hide_password=False)


class LedgerTransaction:
    r"""The open transaction of one dataset, its lock held (see ``LedgerStorage.transaction``)."""

    def __init__(self, connection: Connection, dataset: str) -> None:
        self._connection = connection
        self.dataset = dataset

    def rows(self) -> list[StoredRow]:
        r"""All of the dataset's entries (recorded and reserved), in recording order."""
        return _select_rows(self._connection, self.dataset)

    def record(self, *, side: str, entry: Mapping[str, Any], run_id: Any, key: str, release_id: str) -> int:
        r"""Append a record (a release that was made); returns its ``seq``."""
        return self._insert(side=side, status="recorded", entry=entry, run_id=run_id, key=key, release_id=release_id)

    def reserve(
        self,
        *,
        side: str,
        entry: Mapping[str, Any],
        run_id: Any,
        owner: str,
        holder: Mapping[str, Any] | None = None,
        lease_expires: float | None = None,
    ) -> int:
        r"""Append a reservation held by the charge ``owner`` of run ``run_id`` in the process
        ``holder`` until ``lease_expires`` (renewed); returns its ``seq``."""
        return self._insert(
            side=side,
            status="reserved",
            entry=entry,
            run_id=run_id,
            owner=owner,
            holder=None if holder is None else dumps(dict(holder)),
            lease_expires=lease_expires,
        )

    def _insert(
        self,
        *,
        side: str,
        status: str,
        entry: Mapping[str, Any],
        run_id: Any = None,
        key: str | None = None,
        release_id: str | None = None,
        owner: str | None = None,
        holder: str | None = None,
        lease_expires: float | None = None,
    ) -> int:
        if side not in _SIDES or status not in _STATUSES:
            raise ValueError(f"side/status must be in {_SIDES}/{_STATUSES}, got {side!r}/{status!r}.")
        result = self._connection.execute(
            records.insert().values(
                dataset=self.dataset,
                side=side,
                status=status,
                run_id=None if run_id is None else dumps(run_id),
                release_key=key,
                release_id=release_id,
                owner=owner,
                entry=dumps(dict(entry)),
                created_at=now(),
                holder=holder,
                lease_expires=lease_expires,
            )
        )
        key = result.inserted_primary_key
        if key is None:
            raise RuntimeError(f"The database returned no primary key for the new {side} row.")
        return int(key[0])

    def shrink_reservation(self, seq: int, *, entry: Mapping[str, Any]) -> None:
        r"""Replace what reservation ``seq`` holds (part of it was used by a record)."""
        self._connection.execute(
            records.update()
            .where(records.c.dataset == self.dataset, records.c.seq == seq, records.c.status == "reserved")
            .values(entry=dumps(dict(entry)))
        )

    def fulfil_reservation(self, seq: int, *, entry: Mapping[str, Any], run_id: Any, key: str, release_id: str) -> None:
        r"""Turn training reservation ``seq`` into the record of its run, in place (its position
        fixes the training filter's order)."""
        self._connection.execute(
            records.update()
            .where(records.c.dataset == self.dataset, records.c.seq == seq, records.c.status == "reserved")
            .values(
                entry=dumps(dict(entry)),
                status="recorded",
                run_id=dumps(run_id),
                release_key=key,
                release_id=release_id,
                owner=None,
                holder=None,
                lease_expires=None,
            )
        )

    def renew_leases(self, owners: list[str], lease_expires: float) -> None:
        r"""Extend the leases of the reservations held by the charges ``owners``."""
        self._connection.execute(
            records.update()
            .where(records.c.dataset == self.dataset, records.c.status == "reserved", records.c.owner.in_(owners))
            .values(lease_expires=lease_expires)
        )

    def drop_reservation(self, seq: int) -> None:
        r"""Remove reservation ``seq`` (its charge ended, or its run's reservations were cancelled);
        a record is never removed."""
        self._connection.execute(
            records.delete().where(
                records.c.dataset == self.dataset, records.c.seq == seq, records.c.status == "reserved"
            )
        )


def _select_rows(connection: Connection, dataset: str) -> list[StoredRow]:
    rows = connection.execute(sa.select(records).where(records.c.dataset == dataset).order_by(records.c.seq)).mappings()
    return [
        StoredRow(
            seq=int(r["seq"]),
            side=r["side"],
            status=r["status"],
            run_id=None if r["run_id"] is None else json.loads(r["run_id"]),
            key=r["release_key"],
            release_id=r["release_id"],
            owner=r["owner"],
            entry=json.loads(r["entry"]),
            holder=None if r["holder"] is None else json.loads(r["holder"]),
            lease_expires=None if r["lease_expires"] is None else float(r["lease_expires"]),
        )
        for r in rows
    ]


def _before_commit(transaction: LedgerTransaction) -> None:
    r"""Called inside every write transaction just before it commits (a seam for the crash tests)."""


class LedgerStorage:
    r"""A ledger database (SQLite file or PostgreSQL server) reached through SQLAlchemy.

    Use ``open_storage``; one object per URL per process is shared by the ledgers of that
    process. Do not carry it across ``fork`` (open the ledger in the child).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = sa.engine.make_url(url).get_backend_name()
        if self.dialect == "sqlite":
            # the driver's own transaction handling off, so that BEGIN IMMEDIATE is ours;
            # a writer waits up to 60 s for another one's lock
            self.engine: Engine = sa.create_engine(url, connect_args={"timeout": 60.0})

            @sa.event.listens_for(self.engine, "connect")
            def _connect(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.isolation_level = None
                dbapi_connection.execute("PRAGMA foreign_keys = ON")

            @sa.event.listens_for(self.engine, "begin")
            def _begin(connection: Connection) -> None:
                read_only = connection.get_execution_options().get("botorch_dp_read", False)
                connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        elif self.dialect == "postgresql":
            self.engine = sa.create_engine(url, pool_pre_ping=True)
        else:
            raise ValueError(
                f"storage: only SQLite and PostgreSQL are supported, got the {self.dialect!r} URL {url!r}."
            )
        self._create_schema()

    def _create_schema(self) -> None:
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":  # concurrent CREATE TABLEs would collide
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(7262304165)"))
            metadata.create_all(connection)
            insert = _dialect_insert(self.dialect, meta).values(name="schema_version", value=str(SCHEMA_VERSION))
            connection.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
            version = connection.execute(sa.select(meta.c.value).where(meta.c.name == "schema_version")).scalar_one()
            version = migrate(connection, version)
        if version != str(SCHEMA_VERSION):
            raise ValueError(
                f"The ledger database {self.url!r} has schema version {version}, this version of "
                f"botorch-dp reads version {SCHEMA_VERSION}."
            )

    def ensure_dataset(self, dataset: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        r"""The stored settings of ``dataset``, creating its row with ``settings`` if it is new.

        Args:
            dataset: The dataset's name.
            settings: Plain JSON-able settings (used only if the dataset is new).

        Returns:
            The settings stored with the dataset (those of whoever created it first).
        """
        with self.engine.begin() as connection:
            insert = _dialect_insert(self.dialect, datasets).values(
                dataset=dataset, settings=dumps(dict(settings)), created_at=now()
            )
            connection.execute(insert.on_conflict_do_nothing(index_elements=["dataset"]))
            stored = connection.execute(
                sa.select(datasets.c.settings).where(datasets.c.dataset == dataset)
            ).scalar_one()
        return json.loads(stored)

    def rows(self, dataset: str) -> list[StoredRow]:
        r"""A consistent snapshot of the dataset's entries, in recording order (no lock taken on PostgreSQL)."""
        options = {"botorch_dp_read": True} if self.dialect == "sqlite" else {"isolation_level": "REPEATABLE READ"}
        with self.engine.connect().execution_options(**options) as connection:  # SQLite: a deferred BEGIN
            with connection.begin():
                return _select_rows(connection, dataset)

    @contextlib.contextmanager
    def transaction(self, dataset: str) -> Iterator[LedgerTransaction]:
        r"""A write transaction on ``dataset`` with its lock held; commits if the block succeeds.

        SQLite: ``BEGIN IMMEDIATE`` (the database's write lock, waited for up to 60 s).
        PostgreSQL: ``SELECT … FOR UPDATE`` of the dataset's row, so that transactions on
        one dataset run one after the other (and transactions on different datasets do not
        wait for each other). Anything raised in the block rolls everything back.
        """
        with self.engine.begin() as connection:
            locked = connection.execute(
                sa.select(datasets.c.dataset).where(datasets.c.dataset == dataset).with_for_update()
            ).scalar_one_or_none()
            if locked is None:
                raise ValueError(f"Dataset {dataset!r} is not in the ledger database {self.url!r}.")
            tx = LedgerTransaction(connection, dataset)
            yield tx
            _before_commit(tx)

    def renew_leases(self, dataset: str, owners: list[str], lease_expires: float) -> None:
        r"""Extend the leases of the reservations of ``dataset`` held by the charges ``owners``
        (the holder's renewal thread, ``ledger.holders``)."""
        with self.transaction(dataset) as tx:
            tx.renew_leases(owners, lease_expires)

    def dispose(self) -> None:
        r"""Close the pooled connections."""
        self.engine.dispose()


def _dialect_insert(dialect: str, table: sa.Table) -> Any:
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert

    return postgresql_insert(table)


_open: dict[tuple[int, str], LedgerStorage] = {}
_open_lock = threading.Lock()


def open_storage(storage: str | os.PathLike) -> LedgerStorage:
    r"""The ``LedgerStorage`` of ``storage`` (a URL or an SQLite path), one per URL and process.

    Args:
        storage: See ``storage_url``.

    Returns:
        The shared ``LedgerStorage`` (tables created if the database is new).
    """
    url = storage_url(storage)
    key = (os.getpid(), url)
    with _open_lock:
        if key not in _open:
            _open[key] = LedgerStorage(url)
        return _open[key]
