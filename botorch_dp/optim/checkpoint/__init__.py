r"""Checkpoint files of a DP-GIBO run: ``save_state(directory, state)`` / ``load_state(directory)``.

Modules: ``directory`` (the checkpoint's names; a new run's directory must hold none),
``files`` (the state's files, written atomically and read checked), ``encoding`` (exact JSON of
tensors, floats and generators), ``kernels`` (the kernel allow-list). The private directory,
atomic writes and the one-owner lock (a ``DPGIBO`` holds it for its life) are ``storage``'s.

The state is SENSITIVE: it holds the per-user losses, the noise generator's state and the
ledger. Protect the directory like the data (it is created ``0700``, its files ``0600``).

Nothing is ever unpickled. The layout of a checkpoint directory (schema version 1)::

    owner.lock                 the lock of the object that owns the directory (``storage.lock``)
    state.json                 public state, config, ledger, generator states (JSON)
    gp/000012.safetensors      evaluation points X, Cholesky factor L, kernel tensors
    losses/000000.safetensors  the per-user losses of batch 0 (b_0 x n), one file per batch
    losses/000001.safetensors  ...

``state.json`` is the commit point: it names every other file with its size and SHA-256, so
a file that was not written completely, replaced or damaged is refused. Every file is
written to a new temporary file (random name, created with ``O_EXCL | O_NOFOLLOW``, removed
if the write fails), fsync'd, renamed into place, and the directory is fsync'd;
``state.json`` is replaced last, so a crash at any moment leaves the previous or the new
checkpoint, never a mix. A run's first save never replaces an existing ``state.json`` (it
is linked into place, which fails instead), and a new ``DPGIBO`` refuses a directory that
holds one (``check_new_checkpoint_dir``): only ``DPGIBO.resume`` continues a checkpoint.
Loss files are written once per batch (named by the batch's index), so the bytes written
per iteration are proportional to the new evaluations. Floats are stored exactly
(``float.hex`` in JSON, raw float64 in safetensors; the kernel's spec records its dtype): a
resumed run is bit-identical to an uninterrupted one.

What a checkpoint can and cannot protect against. There is no secret key, so:

- A consistent edit by someone who can write the directory cannot be detected: a
  ``config`` rewritten together with its ``config_fingerprint``, or an older copy of the
  whole directory put back (an older checkpoint IS a legitimate one, with less budget
  spent in its ledger). The SHA-256s and the config fingerprint detect damage and
  partial writes, not tampering.
- The ownership, permission and symbolic-link checks protect against OTHER local users.
  The directory must belong to this user and be closed to group and others (``mode &
  0o077 == 0``), checked on every read and on every write to an existing directory;
  ``state.json``, ``gp/``, ``losses/`` and every file are opened relative to the opened
  directory (``dir_fd``) with ``O_NOFOLLOW``, so a symbolic link at any of them is refused
  (``ValueError`` naming it) and never followed, even one swapped in after a check (a
  rename replaces a link, it does not write through it).
  What remains: only the last component of the directory's path is checked, so whoever
  can write to a parent directory (or is root, or is the run's own user) can still swap
  the whole directory between two saves or reads.
- Copies: a copy is another directory (the lock does not cover it). Two copies of one
  checkpoint resumed against one shared stored ledger are both charged (and neither
  resumes while the other's process is inside a step), but two copies each resumed with
  its own in-memory ledger cannot know of each other and each spends the remaining budget
  again. A stored ledger,
  ``PrivacyLedger(storage=..., dataset=...)`` passed to the run and to ``DPGIBO.resume``,
  protects against that.
"""

from botorch_dp.optim.checkpoint.directory import (
    FORMAT,
    MAX_STATE_BYTES,
    SCHEMA_VERSION,
    STATE_FILE,
    check_new_checkpoint_dir,
)
from botorch_dp.optim.checkpoint.encoding import (
    check_keys,
    float_from_json,
    generator_state_from_json,
    generator_to_json,
    is_int,
    json_fingerprint,
    tensor_from_json,
    tensor_to_json,
)
from botorch_dp.optim.checkpoint.files import load_state, save_state
from botorch_dp.optim.checkpoint.kernels import build_kernel, kernel_fingerprint, kernel_spec, kernel_tensors

__all__ = [
    "FORMAT",
    "MAX_STATE_BYTES",
    "SCHEMA_VERSION",
    "STATE_FILE",
    "check_keys",
    "is_int",
    "build_kernel",
    "check_new_checkpoint_dir",
    "float_from_json",
    "generator_state_from_json",
    "generator_to_json",
    "json_fingerprint",
    "kernel_fingerprint",
    "kernel_spec",
    "kernel_tensors",
    "load_state",
    "save_state",
    "tensor_from_json",
    "tensor_to_json",
]
