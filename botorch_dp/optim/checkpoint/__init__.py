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

``state.json`` is the commit point: it names every other file with its size and SHA-256 and is
replaced last, so a crash leaves the previous or the new checkpoint, never a mix; a run's first
save never replaces one. Floats are stored exactly: a resumed run is bit-identical to an
uninterrupted one. What a checkpoint can and cannot protect against (no secret key: damage is
detected, tampering by this user is not; copies need a stored ledger): ``docs/security.md``.
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
