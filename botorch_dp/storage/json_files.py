r"""Small JSON files next to checkpoints (``save_json`` / ``load_json``), with the checkpoint's care.

A procedure made of several DP-GIBO runs (``tuning.tune``) keeps, besides each run's own
checkpoint directory, a few JSON files of its own: the arguments it was called with, the
releases it made between the runs. They are written like ``state.json``: in a private
directory (this user's, ``0700``, never through a symbolic link), to a new temporary file
(``0600``) that is fsync'd and renamed into place, so a crash leaves the old file or the new
one, never a mix. Reading refuses a link, a file that is not regular, a file over
``MAX_JSON_BYTES`` and repeated keys; nothing is unpickled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from botorch_dp.storage.private_files import open_dir, read_file, strict_object, write_atomic

__all__ = ["MAX_JSON_BYTES", "load_json", "open_private_dir", "save_json"]

#: Largest JSON file read (a larger one is not ours).
MAX_JSON_BYTES = 256 * 2**20


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.endswith(".json") or os.sep in name or name.startswith("."):
        raise ValueError(f"name must be a plain file name ending in .json, got {name!r}.")
    return name


def open_private_dir(directory: str | os.PathLike) -> Path:
    r"""Create ``directory`` (``0700``, with its parents) if missing, and check it is private.

    Raises:
        ValueError: naming the directory if it is a symbolic link, another user's, or open to
            group or others.
    """
    root = Path(directory)
    fd = open_dir(root, root, create=True)
    assert fd is not None  # created if missing
    os.close(fd)
    return root


def save_json(directory: str | os.PathLike, name: str, obj: Any) -> None:
    r"""Write ``obj`` as JSON to ``directory/name`` atomically and durably (see the module).

    Args:
        directory: The private directory (created ``0700`` if missing).
        name: The file's name (``*.json``).
        obj: A ``json.dumps``-able value (``inf`` and ``nan`` are written as ``Infinity`` and ``NaN``).
    """
    root = Path(directory)
    data = json.dumps(obj, sort_keys=True, allow_nan=True).encode("utf-8")
    fd = open_dir(root, root, create=True)
    assert fd is not None
    try:
        write_atomic(fd, _check_name(name), [data], root / name)
    finally:
        os.close(fd)


def load_json(directory: str | os.PathLike, name: str) -> Any:
    r"""The JSON value in ``directory/name``, or ``None`` if the directory or the file is missing.

    Raises:
        ValueError: naming the file for a symbolic link, a file that is not regular, too large
            or not strict JSON (repeated keys included), or a directory that is not private.
    """
    root = Path(directory)
    path = root / _check_name(name)
    fd = open_dir(root, root, create=False)
    if fd is None:
        return None

    def check_size(size: int) -> None:
        if size > MAX_JSON_BYTES:
            raise ValueError(f"{path} holds {size} bytes, more than {MAX_JSON_BYTES}: it is not ours.")

    try:
        data = read_file(fd, name, path, check_size=check_size)
    finally:
        os.close(fd)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=strict_object)
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path} is not valid JSON: {err}.") from None
