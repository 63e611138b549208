r"""``tune(..., checkpoint_dir=...)``: resume an interrupted ``tune`` call without re-running or re-charging.

The directory (private: this user's, ``0700``, never through a symbolic link) holds::

    owner.lock               the lock of the call that owns the directory (``storage.lock``)
    tune.json                the public description of the call's arguments (written first)
    configuration-000/       configuration 0's DP-GIBO checkpoint (``DPGIBO(checkpoint_dir=...)``)
    configuration-001/       ...
    selection.json           the released noisy scores of the choice and the ledger after them

One call owns the directory at a time: it holds ``owner.lock`` until it returns or raises
(each configuration's ``DPGIBO`` holds its own directory's lock while it runs), and a second
call, in this process or another, is refused (``CheckpointInUseError`` naming the holder).
A call with ``checkpoint_dir`` compares its arguments with ``tune.json`` before anything is
computed or released; any difference is refused (``ValueError`` naming each argument). Then
configuration ``k`` resumes from its directory (``DPGIBO.resume``, which merges the run's
stored ledger into the call's ledger and continues its noise streams): a finished run returns
its release without evaluating or drawing anything, an interrupted one continues from its
last checkpointed step. The choice's scores are released once; ``selection.json`` is written
right after the release, with the ledger's state (which ``PrivacyLedger.load_state_dict``
merges, never replaces), and a resumed call reads them instead of drawing new noise.

What is lost with an interruption, as in ``DPGIBO``: evaluations of a batch that was not
told yet (the resumed run evaluates the batch again; with DP-SGD those trainings are charged
again when the ledger is stored, an over-count, never an under-count). The directory is as
SENSITIVE as a DP-GIBO checkpoint: it holds the per-user losses.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim.checkpoint import STATE_FILE
from botorch_dp.optim.stored_config import migrate_flat_config
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.storage.json_files import load_json, save_json
from botorch_dp.storage.lock import LOCK_FILE, CheckpointLock

__all__ = ["ARGUMENTS_FILE", "FORMAT", "SELECTION_FILE", "TuneCheckpoint", "plain", "seed_digest"]

ARGUMENTS_FILE = "tune.json"
SELECTION_FILE = "selection.json"
FORMAT = "botorch-dp/tune-checkpoint-1"


def plain(obj: Any) -> Any:
    r"""``obj`` as the JSON values it is stored as (``repr`` for what JSON cannot hold), so that a
    given argument compares equal to its stored copy."""
    return json.loads(json.dumps(obj, sort_keys=True, allow_nan=True, default=repr))


def seed_digest(seed: int | None) -> str | None:
    r"""A digest of the noise seed (the seed itself is never written), ``None`` without one."""
    return None if seed is None else hashlib.sha256(f"botorch-dp tune seed {int(seed)}".encode()).hexdigest()


def _differences(stored: Any, given: Any, prefix: str = "") -> list[str]:
    r"""The names (``a`` or ``a.b``) whose values differ between two argument descriptions."""
    if isinstance(stored, dict) and isinstance(given, dict) and not prefix:
        names = sorted(set(stored) | set(given))
        out: list[str] = []
        for name in names:
            if isinstance(stored.get(name), dict) and isinstance(given.get(name), dict):
                out += [
                    f"{name}.{sub}"
                    for sub in sorted(set(stored[name]) | set(given[name]))
                    if stored[name].get(sub) != given[name].get(sub)
                ]
            elif stored.get(name) != given.get(name):
                out.append(name)
        return out
    return [] if stored == given else [prefix or "arguments"]


class TuneCheckpoint:
    r"""The checkpoint directory of one ``tune`` call (see the module).

    Args:
        directory: The directory (created ``0700`` if missing).
        arguments: The call's public description (``one_call``); compared with a stored one.

    Raises:
        ValueError: The directory is a link, another user's or open to others; it holds a
            ``tune.json`` of other arguments (naming them) or DP-GIBO checkpoints without one.
        CheckpointInUseError: Another call (or object) owns the directory (naming it).
    """

    def __init__(self, directory: str | os.PathLike, arguments: dict[str, Any]) -> None:
        if not isinstance(directory, (str, os.PathLike)):
            raise ValueError(f"checkpoint_dir must be a path (str or os.PathLike), got {directory!r}.")
        self._lock = CheckpointLock(directory, "tune")  # created 0700 if missing; ours before anything is read
        self.directory = self._lock.directory
        try:
            self._check(plain({"format": FORMAT, **arguments}))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        r"""Give the directory up (idempotent)."""
        self._lock.release()

    def _check(self, given: Any) -> None:
        stored = load_json(self.directory, ARGUMENTS_FILE)
        if stored is None:
            taken = sorted(p.name for p in self.directory.iterdir() if p.name != LOCK_FILE)
            if taken:
                raise ValueError(
                    f"checkpoint_dir {self.directory} is not empty ({taken[:3]}) but holds no "
                    f"{ARGUMENTS_FILE}: it is not a tune checkpoint. Give a new or empty directory."
                )
            save_json(self.directory, ARGUMENTS_FILE, given)
            return
        if isinstance(stored, dict) and isinstance(stored.get("settings"), dict):
            # written before the config held strategies: its flat option fields as the strategies' specs
            stored = {**stored, "settings": plain(migrate_flat_config(stored["settings"]))}
        differ = _differences(stored, given)
        if differ:
            raise ValueError(
                f"checkpoint_dir {self.directory} holds a tune call with other arguments: {', '.join(differ)} "
                "differ. Resume with the same arguments, or give a new directory for a new call (nothing was run)."
            )

    def run_dir(self, k: int) -> Path:
        r"""Configuration ``k``'s DP-GIBO checkpoint directory."""
        return self.directory / f"configuration-{k:03d}"

    def has_run(self, k: int) -> bool:
        r"""Whether configuration ``k`` has a checkpoint to resume (``DPGIBO.resume`` verifies it)."""
        return os.path.lexists(self.run_dir(k) / STATE_FILE)

    def selection(self, num_configurations: int, ledger: PrivacyLedger) -> tuple[str, Tensor] | None:
        r"""The stored choice: its ledger state merged into ``ledger``, then ``(selection run id,
        noisy scores)``; ``None`` if no choice was released yet."""
        stored = load_json(self.directory, SELECTION_FILE)
        if stored is None:
            return None
        path = self.directory / SELECTION_FILE
        try:
            scores = [float.fromhex(s) for s in stored["scores"]]
            selection_id, state = stored["selection_id"], stored["ledger"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path} is damaged (scores, selection_id and ledger expected).") from None
        if len(scores) != num_configurations:
            raise ValueError(f"{path} holds {len(scores)} scores for {num_configurations} configurations.")
        ledger.load_state_dict(state)  # merges: the choice's record is restored, never duplicated
        if selection_id not in ledger.validation.run_ids():
            raise ValueError(f"{path}: the ledger state holds no record of the choice {selection_id!r}.")
        return selection_id, torch.tensor(scores, dtype=torch.float64)

    def save_selection(self, selection_id: str, scores: Tensor, ledger: PrivacyLedger) -> None:
        r"""Store the released scores and the ledger right after the release."""
        save_json(
            self.directory,
            SELECTION_FILE,
            {
                "selection_id": selection_id,
                "scores": [float(s).hex() for s in scores.tolist()],
                "ledger": ledger.state_dict(),
            },
        )
