r"""Who holds a reservation: the process and host of an open charge, with a lease it renews.

A charge's reservation (the budget held between its worst-case check and its records) names
its ``Holder``: the process id, the host name, the ``node`` on which that process id means
something (the host's boot id and pid namespace) and a random token of the process. A stored
reservation also has a lease (``lease_expires``, wall-clock seconds) that a thread of the
holding process renews every ``LEASE_SECONDS / 3`` while the charge is open.

A holder is **gone** (``holder_gone``) when its lease has expired, or when it ran on this
node and its process is no longer alive (no such pid, a zombie, or this very pid now held by
another process: the token differs), or when it is this process and the charge is no longer
open. Only then may a settle (``PrivacyLedger.cancel_reservations``, ``DPGIBO.resume``)
drop its reservation. A reservation that names no holder (written before holders existed,
or migrated from a version-1 database) is never settled automatically: it stays counted
(an over-count) until ``cancel_reservations(run_id, holderless=True)``.

A holder whose lease expired while it was alive (stopped, suspended, cut off from the
database) may find its reservation settled: its next record then checks the budget again
before its draw, so an expired lease can delay or refuse a release, never overspend.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LEASE_SECONDS", "Holder", "holder_gone", "holding", "lease_expiry", "this_holder"]

#: How long a stored reservation's lease lasts without renewal (renewed every third of it).
LEASE_SECONDS = 60.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    r"""The process holding a reservation.

    Attributes:
        pid: Its process id (meaningful on ``node`` only).
        host: Its host name (for messages).
        node: Where ``pid`` names a process: the boot id and pid namespace of its host.
        token: A random token of the process (a reused pid has another).
    """

    pid: int
    host: str
    node: str
    token: str

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "node": self.node, "token": self.token}

    @classmethod
    def from_json(cls, value: Any) -> Holder:
        r"""A stored holder, checked (``ValueError`` for anything else)."""
        if (
            not isinstance(value, Mapping)
            or set(value) != {"pid", "host", "node", "token"}
            or isinstance(value["pid"], bool)
            or not isinstance(value["pid"], int)
            or not all(isinstance(value[k], str) for k in ("host", "node", "token"))
        ):
            raise ValueError(f"A reservation's holder must be {{pid, host, node, token}}, got {value!r}.")
        return cls(value["pid"], value["host"], value["node"], value["token"])

    def describe(self) -> str:
        return f"process {self.pid} on host {self.host!r} (holder {self.token[:8]})"


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:  # closed: no ResourceWarning reaches the caller
        return f.read().strip()


def _node() -> str:
    parts = []
    for read in (_boot_id, lambda: os.readlink("/proc/self/ns/pid")):
        try:
            parts.append(read())
        except OSError:
            parts.append("?")
    return f"{socket.gethostname()}/{'/'.join(parts)}"


# the process's holder and its open charges (reset in a forked child: those are the parent's)
_state_lock = threading.Lock()
_holder: Holder | None = None
_open: dict[str, tuple[Any, str | None]] = {}  # owner token of an open charge -> (storage or None, dataset)
_renewer: threading.Thread | None = None


def _after_fork() -> None:
    global _state_lock, _holder, _renewer
    _state_lock, _holder, _renewer = threading.Lock(), None, None
    _open.clear()


os.register_at_fork(after_in_child=_after_fork)


def this_holder() -> Holder:
    r"""This process's ``Holder``."""
    global _holder
    with _state_lock:
        if _holder is None or _holder.pid != os.getpid():
            _holder = Holder(os.getpid(), socket.gethostname(), _node(), secrets.token_hex(16))
        return _holder


def lease_expiry() -> float:
    r"""When a lease taken or renewed now expires (wall-clock seconds)."""
    return time.time() + LEASE_SECONDS


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # a zombie (exited, not yet reaped by its parent) holds nothing
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def holder_gone(holder: Holder | None, lease_expires: float | None, owner: str | None, now: float) -> bool:
    r"""Whether the holder of a reservation is gone (see the module); never for one without a holder.

    Args:
        holder: The reservation's holder (None: written before holders existed).
        lease_expires: Its lease (None: an in-memory reservation of this process).
        owner: The token of the charge that took it.
        now: The current wall-clock time.
    """
    if holder is None:
        return False
    if lease_expires is not None and lease_expires < now:
        return True
    me = this_holder()
    if holder.node != me.node:
        return False  # elsewhere: only its lease tells
    if holder.pid != me.pid:
        return not _pid_alive(holder.pid)
    if holder.token != me.token:
        return True  # this pid belonged to another process, which is gone
    with _state_lock:
        return owner not in _open


@contextlib.contextmanager
def holding(owner: str, storage: Any, dataset: str | None) -> Iterator[None]:
    r"""Mark the charge ``owner`` open in this process for the block, its stored lease renewed."""
    global _renewer
    with _state_lock:
        _open[owner] = (storage, dataset)
        if storage is not None and (_renewer is None or not _renewer.is_alive()):
            _renewer = threading.Thread(target=_renew_leases, name="botorch-dp-lease", daemon=True)
            _renewer.start()
    try:
        yield
    finally:
        with _state_lock:
            _open.pop(owner, None)


def _renew_leases() -> None:
    r"""The renewal thread: every ``LEASE_SECONDS / 3``, extend the leases of the open stored
    charges; it ends when none is open."""
    global _renewer
    while True:
        time.sleep(LEASE_SECONDS / 3.0)
        with _state_lock:
            groups: dict[tuple[int, str], tuple[Any, list[str]]] = {}
            for owner, (storage, dataset) in _open.items():
                if storage is not None and dataset is not None:
                    groups.setdefault((id(storage), dataset), (storage, []))[1].append(owner)
            if not groups:
                if _renewer is threading.current_thread():
                    _renewer = None
                return
        for (_, dataset), (storage, owners) in groups.items():
            try:
                storage.renew_leases(dataset, owners, lease_expiry())
            except Exception as err:  # the database is unreachable: a lease may expire (see the module)
                _log.warning("botorch-dp could not renew reservation leases in %s: %s", dataset, err)
