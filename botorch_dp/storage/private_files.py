r"""Owner-only files, never read or written through a symbolic link: a private directory
(``open_dir``: this user's, ``0700``, opened with ``O_NOFOLLOW``), atomic and durable writes
(``write_atomic``) and checked reads (``read_file``) relative to it."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, overload

__all__ = ["DIR_MODE", "FILE_MODE", "lstat", "open_dir", "read_file", "strict_object", "symlink_error", "write_atomic"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def lstat(name: str | Path, dir_fd: int | None) -> os.stat_result | None:
    r"""``lstat`` of ``name`` (relative to ``dir_fd``), ``None`` if it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def symlink_error(path: Path) -> ValueError:
    return ValueError(
        f"Checkpoint path {path} is a symbolic link; a checkpoint is never read or written "
        "through a link. Use the real directory, or remove the link."
    )


def _check_private_dir(st: os.stat_result, path: Path) -> None:
    r"""Refuse a directory that another user owns or that group or others may access.

    Args:
        st: ``fstat`` of the opened directory.
        path: Its path, for the message.
    """
    if st.st_uid != os.geteuid():
        raise ValueError(
            f"Checkpoint directory {path} is owned by user {st.st_uid}, not by this user "
            f"({os.geteuid()}): a checkpoint holds sensitive data and must be private to the run's user."
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ValueError(
            f"Checkpoint directory {path} is accessible to group or others (mode {oct(mode)}): a "
            f"checkpoint holds sensitive data. Make it private (e.g. chmod -R go= {path}) or use a new directory."
        )


@overload
def open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: Literal[True]) -> int: ...


@overload
def open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: bool) -> int | None: ...


def open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: bool) -> int | None:
    r"""Open a checkpoint directory without following a symbolic link, and check it is private.

    Args:
        name: The directory, relative to ``dir_fd`` (or to the working directory).
        path: Its path as the caller named it, for messages.
        dir_fd: An open directory that ``name`` is relative to, or ``None``.
        create: Create it (``0700``, and its parents) if it is missing.

    Returns:
        A file descriptor of the directory (the caller closes it); ``None`` if it is missing
        and ``create`` is false. ``ValueError`` names ``path`` if it is a symbolic link,
        another user's, or open to group or others; ``NotADirectoryError`` if it is a file.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    created = False
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            return None
        if dir_fd is None:
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
            created = True
        except FileExistsError:  # made by someone else meanwhile: opened and checked below
            pass
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:  # O_NOFOLLOW|O_DIRECTORY refuses a link (ELOOP or ENOTDIR) and a file (ENOTDIR)
        st = lstat(name, dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise symlink_error(path) from None
        raise
    try:
        if created:
            os.fchmod(fd, DIR_MODE)  # whatever the umask left
        _check_private_dir(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomic(
    dir_fd: int, name: str, parts: Sequence[bytes | memoryview], path: Path, *, replace: bool = True
) -> dict[str, Any]:
    r"""Write ``parts`` to ``name`` in the open directory ``dir_fd``, atomically and durably.

    A new temporary file with a random name is created exclusively (``O_EXCL``, never
    through a link, ``0600``), written, fsync'd and renamed onto ``name``; then the
    directory is fsync'd. The temporary file is removed if anything fails.

    Args:
        dir_fd: The open directory.
        name: The file's name in it.
        parts: The bytes to write, in order.
        path: The file's full path, for messages.
        replace: Replace an existing ``name``; if false, ``name`` must not exist (it is
            linked into place, which fails rather than replaces).

    Returns:
        ``{"sha256": hex digest, "bytes": size}`` of what was written.
    """
    st = lstat(name, dir_fd)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise symlink_error(path)
    tmp = f"{name}.{secrets.token_hex(8)}.tmp"
    digest, size = hashlib.sha256(), 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, FILE_MODE)
            for part in parts:
                view = memoryview(part).cast("B")
                digest.update(view)
                size += len(view)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            _link_new(dir_fd, tmp, name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return {"sha256": digest.hexdigest(), "bytes": size}


def _link_new(dir_fd: int, tmp: str, name: str, path: Path) -> None:
    r"""Move ``tmp`` to ``name`` only if ``name`` does not exist (a hard link fails instead of replacing)."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
    except OSError as err:  # a file system without hard links: check, then rename
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        if lstat(name, dir_fd) is not None:
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    os.unlink(tmp, dir_fd=dir_fd)


def strict_object(pairs: list[tuple[str, Any]], message: str = "repeated key {key!r}") -> dict[str, Any]:
    r"""A JSON object's pairs as a dict, refusing a repeated key (``message`` formatted with ``key``)."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(message.format(key=key))
        obj[key] = value
    return obj


def read_file(dir_fd: int, name: str, path: Path, *, check_size: Callable[[int], None] | None = None) -> bytes | None:
    r"""The bytes of the regular file ``name`` in the open directory ``dir_fd``, never through a link.

    Args:
        dir_fd: The open directory.
        name: The file's name in it.
        path: Its full path, for messages.
        check_size: Called with the file's size before it is read (to refuse it unread).

    Returns:
        The bytes, or ``None`` if there is no such file; ``ValueError`` naming ``path`` for a
        symbolic link or something other than a regular file.
    """
    try:  # O_NONBLOCK: a FIFO planted here is refused below instead of blocking the open
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:
        st = lstat(name, dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise symlink_error(path) from None
        raise
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"Checkpoint path {path} is not a regular file.")
        if check_size is not None:
            check_size(st.st_size)
        return file.read()
