r"""The checkpoint directory, never through a link: opened relative to a descriptor with
``O_NOFOLLOW``, private to this user, and refused to a new run when it holds a checkpoint."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Literal, overload

#: Name of the commit file and the identifier stored in it.
STATE_FILE = "state.json"
FORMAT = "botorch-dp/dp-gibo-checkpoint"
#: Version of the checkpoint layout; any other version is refused.
SCHEMA_VERSION = 1
#: Largest ``state.json`` read (a larger file is not ours).
MAX_STATE_BYTES = 256 * 2**20
_DIR_MODE = 0o700
_FILE_MODE = 0o600
_LOSS_NAME = re.compile(r"^losses/(\d{6})\.safetensors$")
_GP_NAME = re.compile(r"^gp/(\d{6})\.safetensors$")


# ---------------------------------------------------------------------- the directory, without following links
def _lstat(name: str | Path, dir_fd: int | None) -> os.stat_result | None:
    r"""``lstat`` of ``name`` (relative to ``dir_fd``), ``None`` if it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _symlink_error(path: Path) -> ValueError:
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
def _open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: Literal[True]) -> int: ...


@overload
def _open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: bool) -> int | None: ...


def _open_dir(name: str | Path, path: Path, *, dir_fd: int | None = None, create: bool) -> int | None:
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
            os.mkdir(name, _DIR_MODE, dir_fd=dir_fd)
            created = True
        except FileExistsError:  # made by someone else meanwhile: opened and checked below
            pass
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:  # O_NOFOLLOW|O_DIRECTORY refuses a link (ELOOP or ENOTDIR) and a file (ENOTDIR)
        st = _lstat(name, dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise _symlink_error(path) from None
        raise
    try:
        if created:
            os.fchmod(fd, _DIR_MODE)  # whatever the umask left
        _check_private_dir(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _taken_error(root: Path) -> ValueError:
    return ValueError(
        f"Checkpoint directory {root} already holds a checkpoint ({STATE_FILE}); a new run would "
        f"replace it, its ledger included. Continue that run with DPGIBO.resume({str(root)!r}), "
        "or give the new run another directory."
    )


def check_new_checkpoint_dir(directory: str | os.PathLike) -> None:
    r"""Refuse a directory that a NEW run must not checkpoint into.

    Called by ``DPGIBO(config, checkpoint_dir=...)`` before anything is computed or
    released (``DPGIBO.resume`` skips it). A missing or empty directory is fine.

    Args:
        directory: The new run's checkpoint directory.

    Raises:
        ValueError: naming ``directory`` if it already holds a checkpoint (``state.json``,
            whatever it is), is a symbolic link, belongs to another user or is open to
            group or others.
    """
    root = Path(directory)
    fd = _open_dir(root, root, create=False)
    if fd is None:
        return
    try:
        if _lstat(STATE_FILE, fd) is not None:
            raise _taken_error(root)
    finally:
        os.close(fd)
