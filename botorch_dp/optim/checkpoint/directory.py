r"""The checkpoint directory, never through a link: opened relative to a descriptor with
``O_NOFOLLOW``, private to this user, and refused to a new run when it holds a checkpoint."""

from __future__ import annotations

import os
import re
from pathlib import Path

from botorch_dp.storage.private_files import lstat, open_dir

#: Name of the commit file and the identifier stored in it.
STATE_FILE = "state.json"
FORMAT = "botorch-dp/dp-gibo-checkpoint"
#: Version of the checkpoint layout; any other version is refused.
SCHEMA_VERSION = 1
#: Largest ``state.json`` read (a larger file is not ours).
MAX_STATE_BYTES = 256 * 2**20
#: The names a loss file and the GP file may have inside the directory.
LOSS_NAME = re.compile(r"^losses/(\d{6})\.safetensors$")
GP_NAME = re.compile(r"^gp/(\d{6})\.safetensors$")


def taken_error(root: Path) -> ValueError:
    return ValueError(
        f"Checkpoint directory {root} already holds a checkpoint ({STATE_FILE}); a new run would "
        f"replace it, its ledger included. Continue that run with DPGIBO.resume({str(root)!r}), "
        "or give the new run another directory."
    )


def check_new_checkpoint_dir(directory: str | os.PathLike) -> None:
    r"""Refuse (``ValueError`` naming it) a directory a NEW run must not checkpoint into: one that holds
    a ``state.json`` (whatever it is), is a link, or is not private. Called by ``DPGIBO(config,
    checkpoint_dir=...)`` before anything is computed (``DPGIBO.resume`` skips it)."""
    root = Path(directory)
    fd = open_dir(root, root, create=False)
    if fd is None:
        return
    try:
        if lstat(STATE_FILE, fd) is not None:
            raise taken_error(root)
    finally:
        os.close(fd)
