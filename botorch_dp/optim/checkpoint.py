r"""Checkpoint file I/O of a DP-GIBO run: ``save_state(directory, state)`` / ``load_state(directory)``.

The state is SENSITIVE: it holds the per-user losses, the noise generator's state and the
ledger. Protect the directory like the data. Today the state is one ``torch.save`` file
replaced atomically; the format is private to these two functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_FILE = "dp_gibo_checkpoint.pt"


def save_state(directory: str | os.PathLike, state: dict[str, Any]) -> Path:
    r"""Write a run's state into ``directory`` atomically.

    A crash during the write leaves the previous checkpoint intact (write a temporary
    file, then ``os.replace`` it).

    Args:
        directory: The checkpoint directory (created if missing).
        state: The run's ``state_dict`` (SENSITIVE).

    Returns:
        The path of the checkpoint file.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_state(directory: str | os.PathLike) -> dict[str, Any]:
    r"""Read the state written by ``save_state``.

    The file holds tensors, the config and the kernel module, so it is unpickled: load
    only checkpoints you wrote yourself (a trusted local file).

    Args:
        directory: The checkpoint directory.

    Returns:
        The state dict.
    """
    return torch.load(Path(directory) / CHECKPOINT_FILE, weights_only=False)
