r"""One owner per checkpoint directory: an exclusive ``flock`` on ``owner.lock`` inside it.

A ``DPGIBO`` or a ``tune`` call with a checkpoint directory takes ``CheckpointLock`` on it
before it reads or writes anything there, and holds it for its life: the lock is released by
``close()`` (or leaving a ``with`` block), when the object is garbage collected, and by the
operating system when the process ends, however it ends. A second opener, in this process or
another, is refused with ``CheckpointInUseError`` naming the directory and the holder's
process and host. The lock file is created like the other checkpoint files: relative to the
opened private directory, never through a symbolic link (``O_NOFOLLOW``), owner-only
(``0600``), and it must be a regular file of this user. It is never deleted (deleting a lock
file lets two openers lock two different files); it holds the holder's JSON for messages.

``flock`` locks are per open file, so two objects of one process exclude each other too. A
child made by ``fork`` closes its copies of the lock files at once (the parent keeps the
lock; the child owns nothing). On network file systems ``flock`` may be local to each
machine: keep one machine per directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from botorch_dp.storage.private_files import FILE_MODE, lstat, open_dir, symlink_error

__all__ = ["LOCK_FILE", "CheckpointInUseError", "CheckpointLock", "OwnsCheckpoint", "own_checkpoint"]

#: The lock file's name inside a checkpoint directory.
LOCK_FILE = "owner.lock"
_MAX_HOLDER_BYTES = 4096


class CheckpointInUseError(RuntimeError):
    r"""Another object (in this process or another) holds the checkpoint directory."""


def _open_lock_file(dir_fd: int, path: Path) -> int:
    r"""Open (create ``0600``) the lock file in the open directory, never through a link."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(LOCK_FILE, flags, FILE_MODE, dir_fd=dir_fd)
    except OSError:
        st = lstat(LOCK_FILE, dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise symlink_error(path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ValueError(f"Checkpoint path {path} is not a regular file of this user: it is not our lock file.")
        if stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _holder_of(fd: int) -> str:
    r"""Who holds the lock, as its lock file says (for the message)."""
    try:
        data = os.pread(fd, _MAX_HOLDER_BYTES, 0)
        holder = json.loads(data.decode("utf-8"))
        where = f"this process ({holder['pid']})" if holder["pid"] == os.getpid() else f"process {holder['pid']}"
        return f"a {holder['what']} of {where} on host {holder['host']!r} (since {time.ctime(holder['since'])})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process or object (its lock file names none yet)"


class CheckpointLock:
    r"""The exclusive lock of one checkpoint directory (see the module).

    Args:
        directory: The checkpoint directory (created ``0700`` if missing; it must be private
            and not a symbolic link).
        what: What opens it, for the refusal's message (``"DPGIBO"``, ``"tune"``).

    Raises:
        CheckpointInUseError: naming the directory and the holder (pid, host) if another
            object holds it; ``ValueError`` for a link or a directory that is not private.
    """

    def __init__(self, directory: str | os.PathLike, what: str) -> None:
        self.directory = Path(directory)
        path = self.directory / LOCK_FILE
        dir_fd = open_dir(self.directory, self.directory, create=True)
        try:
            fd = _open_lock_file(dir_fd, path)
        finally:
            os.close(dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_of(fd)
            os.close(fd)
            raise CheckpointInUseError(
                f"Checkpoint directory {self.directory} is in use by {holder}: one DPGIBO or tune call owns a "
                f"checkpoint directory at a time, and this {what} was refused. Close that one (or let its process "
                "end) first, or use another directory."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "what": what}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode("utf-8"), 0)
        self._release = weakref.finalize(self, os.close, fd)  # closing the file releases the lock
        _held.add(self)

    @property
    def held(self) -> bool:
        r"""Whether this object still holds the lock."""
        return self._release.alive

    def release(self) -> None:
        r"""Give the directory up (idempotent)."""
        self._release()

    def check_held(self) -> None:
        r"""``RuntimeError`` if the lock was given up: nothing may be written there any more."""
        if not self.held:
            raise RuntimeError(
                f"This object gave up checkpoint directory {self.directory} (closed); it writes nothing "
                "there any more. Resume the run from the directory to continue it."
            )

    def __getstate__(self) -> dict:
        raise TypeError("A CheckpointLock cannot be copied or pickled: it is this object's hold on a directory.")


_held: weakref.WeakSet[CheckpointLock] = weakref.WeakSet()


def _close_in_child() -> None:
    r"""In a child made by ``fork``: close the inherited lock files (the parent keeps its locks)."""
    for lock in list(_held):
        lock.release()


os.register_at_fork(after_in_child=_close_in_child)


def own_checkpoint(
    directory: Path | None,
    what: str,
    lock: CheckpointLock | None = None,
    *,
    check: Callable[[Path], None] | None = None,
) -> CheckpointLock | None:
    r"""The lock of ``directory`` for a new owner (None without a directory): ``lock`` if given (taken
    by the caller), else a new one; then ``check(directory)`` under it (released if it raises)."""
    if directory is None:
        return None
    lock = CheckpointLock(directory, what) if lock is None else lock
    try:
        if check is not None:
            check(directory)
    except BaseException:
        lock.release()
        raise
    return lock


class OwnsCheckpoint:
    r"""``close()`` and the ``with`` statement for an object that may hold a ``CheckpointLock``
    in ``_checkpoint_lock`` (None: no checkpoint directory)."""

    _checkpoint_lock: CheckpointLock | None

    def close(self) -> None:
        r"""Give up the checkpoint directory (idempotent): another object or process may resume it."""
        if self._checkpoint_lock is not None:
            self._checkpoint_lock.release()

    def _check_owner(self) -> None:
        r"""``RuntimeError`` once closed: a closed object releases and writes nothing more."""
        if self._checkpoint_lock is not None:
            self._checkpoint_lock.check_held()

    def __enter__(self) -> OwnsCheckpoint:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
