r"""Checkpoint files of a DP-GIBO run: ``save_state(directory, state)`` / ``load_state(directory)``.

The state is SENSITIVE: it holds the per-user losses, the noise generator's state and the
ledger. Protect the directory like the data (it is created ``0700``, its files ``0600``).

Nothing is ever unpickled. The layout of a checkpoint directory (schema version 1)::

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
- Copies: two copies of one checkpoint resumed against one shared stored ledger are
  both charged, but two copies each resumed with its own in-memory ledger cannot know of
  each other and each spends the remaining budget again. A stored ledger,
  ``PrivacyLedger(storage=..., dataset=...)`` passed to the run and to ``DPGIBO.resume``,
  protects against that.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from gpytorch.kernels import (
    Kernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    RBFKernel,
    RQKernel,
    ScaleKernel,
)
from torch import Tensor

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


# ---------------------------------------------------------------------- exact encodings
def tensor_to_json(t: Tensor) -> dict[str, Any]:
    r"""An exact JSON encoding of a small float tensor: dtype, shape and ``float.hex`` values."""
    t = t.detach().cpu()
    if t.dtype not in (torch.float64, torch.float32):
        raise ValueError(f"Only float tensors are stored in JSON, got {t.dtype}.")
    return {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "hex": [float(v).hex() for v in t.reshape(-1).tolist()],
    }


def tensor_from_json(obj: Any, name: str, shape: Sequence[int | None] | None = None) -> Tensor:
    r"""Decode ``tensor_to_json``'s output, checking type, dtype, shape and finiteness.

    Args:
        obj: The decoded JSON value.
        name: The field's name, used in error messages.
        shape: Expected shape (``None`` entries are free); ``None`` accepts any shape.

    Returns:
        The tensor; a ``ValueError`` naming ``name`` if anything is wrong.
    """
    _check_keys(obj, {"dtype", "shape", "hex"}, name)
    dtype = {"float64": torch.float64, "float32": torch.float32}.get(obj["dtype"])
    if dtype is None:
        raise ValueError(f"Checkpoint field {name!r}: unsupported dtype {obj['dtype']!r}.")
    dims = obj["shape"]
    if not isinstance(dims, list) or not all(_is_int(s) and s >= 0 for s in dims):
        raise ValueError(f"Checkpoint field {name!r}: shape must be a list of integers >= 0.")
    if shape is not None and (len(dims) != len(shape) or any(e is not None and e != s for e, s in zip(shape, dims))):
        raise ValueError(f"Checkpoint field {name!r}: shape {dims}, expected {list(shape)}.")
    values = obj["hex"]
    if not isinstance(values, list) or len(values) != math.prod(dims) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"Checkpoint field {name!r}: values do not match the shape {dims}.")
    try:
        floats = [float.fromhex(v) for v in values]
    except ValueError:
        raise ValueError(f"Checkpoint field {name!r}: a value is not a hex float.") from None
    if not all(math.isfinite(v) for v in floats):
        raise ValueError(f"Checkpoint field {name!r}: values must be finite.")
    return torch.tensor(floats, dtype=dtype).reshape(dims)


def float_from_json(obj: Any, name: str, *, allow_inf: bool = False) -> float:
    r"""A float stored as ``float.hex``, finite unless ``allow_inf``."""
    if not isinstance(obj, str):
        raise ValueError(f"Checkpoint field {name!r}: expected a hex float string.")
    try:
        value = float.fromhex(obj)
    except ValueError:
        raise ValueError(f"Checkpoint field {name!r}: {obj!r} is not a hex float.") from None
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"Checkpoint field {name!r}: value must be finite, got {obj!r}.")
    return value


def generator_to_json(gen: torch.Generator | None) -> str | None:
    r"""A ``torch.Generator``'s state as base64 of its byte tensor (``None`` for no generator)."""
    return None if gen is None else base64.b64encode(bytes(gen.get_state().tolist())).decode("ascii")


def generator_state_from_json(obj: Any, name: str) -> Tensor | None:
    r"""Decode ``generator_to_json``'s output into a ``uint8`` state tensor (checked on use)."""
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise ValueError(f"Checkpoint field {name!r}: expected a base64 string or null.")
    try:
        raw = base64.b64decode(obj, validate=True)
    except ValueError:
        raise ValueError(f"Checkpoint field {name!r}: not valid base64.") from None
    if len(raw) != len(torch.Generator().get_state()):
        raise ValueError(f"Checkpoint field {name!r}: a CPU generator state has {len(torch.Generator().get_state())} bytes, got {len(raw)}.")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_keys(obj: Any, keys: set[str], name: str) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"Checkpoint field {name!r}: expected an object.")
    if set(obj) != keys:
        missing, unknown = sorted(keys - set(obj)), sorted(set(obj) - keys)
        raise ValueError(f"Checkpoint field {name!r}: missing keys {missing}, unknown keys {unknown}.")


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


# ---------------------------------------------------------------------- durable writes
def _write_atomic(
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
    st = _lstat(name, dir_fd)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise _symlink_error(path)
    tmp = f"{name}.{secrets.token_hex(8)}.tmp"
    digest, size = hashlib.sha256(), 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, _FILE_MODE)
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
        raise _taken_error(path.parent) from None
    except OSError as err:  # a file system without hard links: check, then rename
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        if _lstat(name, dir_fd) is not None:
            raise _taken_error(path.parent) from None
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    os.unlink(tmp, dir_fd=dir_fd)


def _safetensors_parts(tensors: dict[str, Tensor]) -> list[bytes | memoryview]:
    r"""The bytes of a safetensors file holding float64 ``tensors``, without copying their data.

    Layout (the safetensors format): an 8-byte little-endian header length, a JSON header
    padded with spaces to a multiple of 8, then the raw little-endian tensor data.
    """
    header: dict[str, Any] = {"__metadata__": {"format": FORMAT}}
    views, offset = [], 0
    for key in sorted(tensors):
        t = tensors[key].detach().cpu()
        if t.dtype != torch.float64:
            raise ValueError(f"Checkpoint tensor {key!r} must be float64, got {t.dtype}.")
        t = t.contiguous()
        nbytes = t.numel() * 8
        header[key] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        if nbytes:
            views.append(memoryview(t.numpy()).cast("B"))
        offset += nbytes
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    return [len(head).to_bytes(8, "little"), head, *views]


def _write_tensors(dir_fd: int, folder: Path, name: str, tensors: dict[str, Tensor]) -> dict[str, Any]:
    r"""Write ``tensors`` as the safetensors file ``folder.name/name``; returns its record."""
    return {"file": f"{folder.name}/{name}", **_write_atomic(dir_fd, name, _safetensors_parts(tensors), folder / name)}


def save_state(
    directory: str | os.PathLike, state: dict[str, Any], committed: dict[str, Any] | None = None
) -> dict[str, Any]:
    r"""Write a run's state into ``directory`` durably; only new files are written.

    Nothing is written through a symbolic link: the directory, ``gp/``, ``losses/`` and
    the files written must not be links, and the directory must belong to this user and
    be closed to group and others (``ValueError`` naming the path otherwise).

    Args:
        directory: The checkpoint directory (created ``0700`` if missing).
        state: ``{"meta": dict, "gp": dict[str, Tensor], "loss_blocks": list[Tensor]}``:
            the JSON-able public state (everything but the file records), the
            ``gp/<iteration>`` tensors and the per-batch loss blocks (SENSITIVE).
        committed: The value this function returned for the previous checkpoint of the
            same run (``None`` at first): loss files it lists are not written again, nor
            the gp file of the same iteration. With ``None`` the directory must not hold a
            checkpoint yet (``ValueError`` naming ``DPGIBO.resume``): a run's first save
            never replaces another run's ``state.json``.

    Returns:
        The file records now committed (pass them to the next call).
    """
    root = Path(directory)
    meta, blocks = state["meta"], state["loss_blocks"]
    first = committed is None
    committed = committed or {"gp_file": None, "loss_files": []}
    with contextlib.ExitStack() as fds:
        root_fd = _open_dir(root, root, create=True)
        fds.callback(os.close, root_fd)
        if first and _lstat(STATE_FILE, root_fd) is not None:
            raise _taken_error(root)
        sub_fds = {}
        for sub in ("gp", "losses"):  # losses/ is made once there are losses (a partitioned run has none)
            fd = _open_dir(sub, root / sub, dir_fd=root_fd, create=sub == "gp" or bool(blocks))
            if fd is not None:
                fds.callback(os.close, fd)
                sub_fds[sub] = fd
        loss_files = list(committed["loss_files"][: len(blocks)])
        for index in range(len(loss_files), len(blocks)):
            record = _write_tensors(
                sub_fds["losses"], root / "losses", f"{index:06d}.safetensors", {"losses": blocks[index]}
            )
            loss_files.append({**record, "rows": int(blocks[index].shape[0])})
        gp_name = f"gp/{meta['iteration']:06d}.safetensors"
        gp_file = committed["gp_file"]
        if gp_file is None or gp_file["file"] != gp_name:
            gp_file = _write_tensors(sub_fds["gp"], root / "gp", f"{meta['iteration']:06d}.safetensors", state["gp"])
        document = {**meta, "gp_file": gp_file, "loss_files": loss_files}
        data = json.dumps(document, allow_nan=True, indent=1, sort_keys=True).encode("utf-8")
        _write_atomic(root_fd, STATE_FILE, [data], root / STATE_FILE, replace=not first)  # the commit point
        _remove_unreferenced(root_fd, sub_fds, {gp_file["file"], *(r["file"] for r in loss_files)})
    return {"gp_file": gp_file, "loss_files": loss_files}


#: Temporary files a crashed write may leave in the checkpoint directory (and the name the
#: writer used before temporary names were random).
_STATE_TMP_NAME = re.compile(r"^state\.json(\.[0-9a-f]{16})?\.tmp$")


def _remove_unreferenced(root_fd: int, sub_fds: dict[str, int], keep: set[str]) -> None:
    r"""Delete what the committed ``state.json`` does not name: gp/loss files, temporaries.

    Only regular files and symbolic links are removed (a link itself, never its target).

    Args:
        root_fd: The open checkpoint directory.
        sub_fds: ``{"gp": fd, "losses": fd}``, its open subdirectories (those that exist).
        keep: The files ``state.json`` names (``"gp/000012.safetensors"``, ...).
    """
    doomed = [(root_fd, name) for name in os.listdir(root_fd) if _STATE_TMP_NAME.match(name)]
    doomed += [(fd, name) for sub, fd in sub_fds.items() for name in os.listdir(fd) if f"{sub}/{name}" not in keep]
    for fd, name in doomed:
        st = _lstat(name, fd)
        if st is not None and (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)


# ---------------------------------------------------------------------- validated reads
def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"Checkpoint {STATE_FILE} has a repeated key {key!r}.")
        obj[key] = value
    return obj


def _read_file(
    dir_fd: int, name: str, path: Path, *, check_size: Callable[[int], None] | None = None
) -> bytes | None:
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
        st = _lstat(name, dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise _symlink_error(path) from None
        raise
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"Checkpoint path {path} is not a regular file.")
        if check_size is not None:
            check_size(st.st_size)
        return file.read()


def _read_checked(root: Path, dir_fds: dict[str, int | None], record: Any, name: str, pattern: re.Pattern) -> bytes:
    r"""The bytes of the gp or loss file ``record`` names, checked against its size and SHA-256.

    Args:
        root: The checkpoint directory, for messages.
        dir_fds: ``{"gp": fd, "losses": fd}``, the open subdirectories (``None``: missing).
        record: ``{"file", "sha256", "bytes"}`` (and ``"rows"`` for a loss file) from ``state.json``.
        name: The record's field in ``state.json``, for messages.
        pattern: What the file's name must look like.

    Returns:
        The file's bytes; a ``ValueError`` naming the file if it is missing, a link,
        of another size or another SHA-256.
    """
    _check_keys(record, {"file", "sha256", "bytes"} | ({"rows"} if name.startswith("loss") else set()), name)
    file = record["file"]
    if not isinstance(file, str) or not pattern.match(file):
        raise ValueError(f"Checkpoint field {name!r}: bad file name {file!r}.")
    if not _is_int(record["bytes"]) or record["bytes"] < 0:
        raise ValueError(f"Checkpoint field {name!r}: 'bytes' must be an integer >= 0.")

    def check_size(size: int) -> None:
        if size != record["bytes"]:
            raise ValueError(f"Checkpoint file {file} has the wrong size: damaged or replaced.")

    folder, base = file.split("/")
    dir_fd = dir_fds[folder]
    data = None if dir_fd is None else _read_file(dir_fd, base, root / file, check_size=check_size)
    if data is None:
        raise ValueError(f"Checkpoint file {file} is missing (field {name!r}).")
    check_size(len(data))  # changed while it was read
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise ValueError(f"Checkpoint file {file} does not match its SHA-256 in {STATE_FILE}: damaged or replaced.")
    return data


def _load_tensors(data: bytes, file: str) -> dict[str, Tensor]:
    from safetensors.torch import load

    try:
        tensors = load(data)
    except Exception as err:  # safetensors raises its own error types for malformed headers
        raise ValueError(f"Checkpoint file {file} is not a valid safetensors file: {err}") from None
    for key, t in tensors.items():
        if t.dtype != torch.float64:
            raise ValueError(f"Checkpoint file {file}: tensor {key!r} has dtype {t.dtype}, expected float64.")
        if not torch.isfinite(t).all():
            raise ValueError(f"Checkpoint file {file}: tensor {key!r} is not finite.")
    return tensors


def load_state(directory: str | os.PathLike) -> dict[str, Any]:
    r"""Read and verify the state written by ``save_state`` (no code is run: JSON and safetensors).

    Refuses a directory that is a symbolic link, belongs to another user or is open to
    group or others, and a symbolic link at ``state.json``, ``gp/``, ``losses/`` or any file
    read. Checks the format name and schema version, refuses repeated keys, checks that
    ``config_fingerprint`` is the SHA-256 of the stored ``config``, verifies the size and
    SHA-256 of every file ``state.json`` names, that the tensors are finite float64, that
    there is one loss file per finished iteration with the told batch sizes as rows and the
    same number of users in each, and that the gp file holds ``X`` (``N x d``) and ``L``
    (``N x N``) with ``N`` the total number of rows. The fields of ``meta`` are decoded and
    checked by ``DPGIBO.load_state_dict``.

    Args:
        directory: The checkpoint directory.

    Returns:
        ``{"meta": dict, "gp": dict[str, Tensor], "loss_blocks": list[Tensor]}``; a
        ``ValueError`` naming the problem for a foreign, damaged or inconsistent checkpoint.
    """
    root = Path(directory)
    with contextlib.ExitStack() as fds:
        root_fd = _open_dir(root, root, create=False)
        if root_fd is None:
            raise ValueError(f"No checkpoint in {root}: the directory is missing.")
        fds.callback(os.close, root_fd)
        dir_fds: dict[str, int | None] = {}
        for sub in ("gp", "losses"):
            dir_fds[sub] = _open_dir(sub, root / sub, dir_fd=root_fd, create=False)
            if dir_fds[sub] is not None:
                fds.callback(os.close, dir_fds[sub])
        meta = _read_meta(root, root_fd)
        return _read_files(root, dir_fds, meta)


def _read_meta(root: Path, root_fd: int) -> dict[str, Any]:
    r"""``state.json``, parsed and checked: format, schema version, iteration, config fingerprint."""
    path = root / STATE_FILE

    def check_size(size: int) -> None:
        if size > MAX_STATE_BYTES:
            raise ValueError(
                f"Checkpoint {STATE_FILE} is larger than {MAX_STATE_BYTES} bytes: not a DP-GIBO checkpoint."
            )

    raw = _read_file(root_fd, STATE_FILE, path, check_size=check_size)
    if raw is None:
        raise ValueError(f"No checkpoint in {root}: {STATE_FILE} is missing.")
    try:
        meta = json.loads(raw.decode("utf-8"), object_pairs_hook=_strict_object)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"Checkpoint {STATE_FILE} is not valid JSON (truncated or damaged): {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a DP-GIBO checkpoint (field 'format' is not {FORMAT!r}).")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"Checkpoint field 'schema_version' is {meta.get('schema_version')!r}; this version reads {SCHEMA_VERSION}."
        )
    iteration = meta.get("iteration")
    if not _is_int(iteration) or iteration < 0:
        raise ValueError("Checkpoint field 'iteration' must be an integer >= 0.")
    if meta.get("config_fingerprint") != json_fingerprint(meta.get("config")):
        raise ValueError(
            f"Checkpoint field 'config_fingerprint' does not match the stored 'config' in {path}: "
            "the config was edited or damaged."
        )
    return meta


def _read_files(root: Path, dir_fds: dict[str, int | None], meta: dict[str, Any]) -> dict[str, Any]:
    r"""The loss blocks and gp tensors ``meta`` names, each checked (see ``load_state``)."""
    iteration = meta["iteration"]
    records = meta.pop("loss_files", None)
    partitioned = meta.get("partitioned_users") is not None  # the losses are in the partitions (issue 17)
    if not isinstance(records, list) or len(records) != (0 if partitioned else iteration):
        raise ValueError(f"Checkpoint field 'loss_files': expected one loss file per iteration ({iteration}).")
    blocks: list[Tensor] = []
    for t, record in enumerate(records):
        data = _read_checked(root, dir_fds, record, f"loss_files[{t}]", _LOSS_NAME)
        if record["file"] != f"losses/{t:06d}.safetensors":
            raise ValueError(f"Checkpoint field 'loss_files[{t}]': expected losses/{t:06d}.safetensors.")
        tensors = _load_tensors(data, record["file"])
        if set(tensors) != {"losses"} or tensors["losses"].dim() != 2:
            raise ValueError(f"Checkpoint file {record['file']} must hold one 2-d tensor 'losses'.")
        block = tensors["losses"]
        if block.shape[0] != record["rows"]:
            raise ValueError(f"Checkpoint file {record['file']} has {block.shape[0]} rows, {STATE_FILE} says {record['rows']}.")
        if blocks and block.shape[1] != blocks[0].shape[1]:
            raise ValueError(f"Checkpoint file {record['file']} has {block.shape[1]} users, earlier batches {blocks[0].shape[1]}.")
        blocks.append(block)
    gp_record = meta.pop("gp_file", None)
    data = _read_checked(root, dir_fds, gp_record, "gp_file", _GP_NAME)
    if gp_record["file"] != f"gp/{iteration:06d}.safetensors":
        raise ValueError(f"Checkpoint field 'gp_file': expected gp/{iteration:06d}.safetensors.")
    gp = _load_tensors(data, gp_record["file"])
    X, L = gp.get("X"), gp.get("L")
    N = X.shape[0] if partitioned and isinstance(X, Tensor) else sum(b.shape[0] for b in blocks)
    if X is None or L is None or X.dim() != 2 or X.shape[0] != N or L.shape != (N, N):
        raise ValueError(f"Checkpoint file {gp_record['file']}: expected X (N x d) and L (N x N) with N = {N} told points.")
    unknown = sorted(k for k in gp if k not in ("X", "L") and not k.startswith("kernel."))
    if unknown:
        raise ValueError(f"Checkpoint file {gp_record['file']}: unknown tensors {unknown}.")
    return {"meta": meta, "gp": gp, "loss_blocks": blocks}


# ---------------------------------------------------------------- kernels: an allow-list, never unpickled
def json_fingerprint(obj: Any) -> str:
    r"""SHA-256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=True).encode("utf-8")).hexdigest()


_KERNELS: dict[str, type[Kernel]] = {
    k.__name__: k for k in (RBFKernel, MaternKernel, PolynomialKernel, RQKernel, LinearKernel, ScaleKernel)
}


#: The dtypes a stored kernel may have.
_KERNEL_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def kernel_spec(kernel: Kernel) -> dict[str, Any]:
    r"""Class, settings and dtype of an allow-listed GPyTorch kernel.

    Args:
        kernel: The kernel (its hyperparameters are stored separately, ``kernel_tensors``).

    Returns:
        The JSON-able spec that ``build_kernel`` rebuilds the kernel from; a ``ValueError``
        for a kernel outside the allow-list, a batched one or one of mixed dtypes.
    """
    return {**_kernel_settings(kernel), "dtype": _kernel_dtype(kernel)}


def _kernel_dtype(kernel: Kernel) -> str:
    r"""The one float dtype of all of ``kernel``'s parameters, by name (``"float64"``)."""
    dtypes = {str(p.dtype).removeprefix("torch.") for p in kernel.parameters()}
    if len(dtypes) != 1 or not dtypes <= set(_KERNEL_DTYPES):
        raise ValueError(
            f"kernel: its parameters must share one dtype of {sorted(_KERNEL_DTYPES)}, got {sorted(dtypes)}."
        )
    return dtypes.pop()


def _kernel_settings(kernel: Kernel) -> dict[str, Any]:
    r"""Class and settings of an allow-listed kernel, without its dtype (``ValueError`` for any other)."""
    name = type(kernel).__name__
    if _KERNELS.get(name) is not type(kernel):
        raise ValueError(
            f"kernel: {name} cannot be stored in a checkpoint; allowed are {sorted(_KERNELS)} "
            "(or pass the config again on resume)."
        )
    if len(kernel.batch_shape) != 0:
        raise ValueError("kernel: batched kernels cannot be stored in a checkpoint.")
    spec: dict[str, Any] = {
        "class": name,
        "ard_num_dims": kernel.ard_num_dims,
        "active_dims": None if kernel.active_dims is None else [int(i) for i in kernel.active_dims.tolist()],
        "constraints": {
            k: [
                type(c).__name__,
                getattr(getattr(c, "_transform", None), "__name__", None),
                [float(v).hex() for v in torch.stack([c.lower_bound, c.upper_bound]).reshape(-1).tolist()],
            ]
            for k, c in kernel.named_constraints()
        },
    }
    if isinstance(kernel, MaternKernel):
        spec["nu"] = float(kernel.nu).hex()
    if isinstance(kernel, PolynomialKernel):
        spec["power"] = int(kernel.power)
    if isinstance(kernel, ScaleKernel):
        spec["base"] = _kernel_settings(kernel.base_kernel)
    return spec


def kernel_tensors(kernel: Kernel) -> dict[str, Tensor]:
    r"""The kernel's hyperparameters (raw parameters; constraint bounds are in the spec)."""
    return {k: v.detach() for k, v in kernel.named_parameters()}


def kernel_fingerprint(kernel: Kernel) -> str:
    r"""SHA-256 of the kernel's class, settings and exact hyperparameter values.

    The dtype is left out: a float32 kernel and its float64 copy hold the same values (a
    run computes with the float64 copy), and fingerprints stored before the spec had a
    dtype stay valid.
    """
    spec = _kernel_settings(kernel)
    values = {k: [float(x).hex() for x in v.to(torch.float64).reshape(-1).tolist()] for k, v in kernel_tensors(kernel).items()}
    return json_fingerprint({"spec": spec, "values": values})


def build_kernel(spec: Any) -> Kernel:
    r"""Rebuild a kernel from ``kernel_spec``'s output, in the stored dtype (hyperparameters at their defaults).

    Args:
        spec: The stored spec. A spec without ``"dtype"`` (schema version 1, written before
            it was stored) means float64: the dtype every run's kernel is converted to.

    Returns:
        The kernel, converted to its dtype before any hyperparameter is loaded into it (so
        that float64 values are not rounded through float32); a ``ValueError`` if the class
        is not allow-listed or the rebuilt settings differ from the stored ones.
    """
    if not isinstance(spec, dict):
        raise ValueError("Checkpoint field 'kernel.spec': expected an object.")
    dtype_name = spec.get("dtype", "float64")
    dtype = _KERNEL_DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
    if dtype is None:
        raise ValueError(
            f"Checkpoint field 'kernel.spec.dtype': {dtype_name!r} is not one of {sorted(_KERNEL_DTYPES)}."
        )
    settings = {k: v for k, v in spec.items() if k != "dtype"}
    kernel = _build_from_settings(settings).to(dtype)
    if _kernel_settings(kernel) != settings:
        raise ValueError(
            f"Checkpoint field 'kernel': the stored {settings['class']} has settings or constraints that cannot be "
            "rebuilt from the checkpoint; pass the config on resume."
        )
    return kernel


def _build_from_settings(settings: Any) -> Kernel:
    r"""The allow-listed kernel ``settings`` describe, in torch's default dtype (checked by the caller)."""
    if not isinstance(settings, dict) or settings.get("class") not in _KERNELS:
        raise ValueError(f"Checkpoint field 'kernel': class not in the allow-list {sorted(_KERNELS)}.")
    kw: dict[str, Any] = {"ard_num_dims": settings.get("ard_num_dims"), "active_dims": settings.get("active_dims")}
    name = settings["class"]
    if name == "MaternKernel":
        kw["nu"] = float_from_json(settings.get("nu"), "kernel.nu")
    if name == "PolynomialKernel":
        kw["power"] = settings.get("power")
    if name == "ScaleKernel":
        kw = {"base_kernel": _build_from_settings(settings.get("base"))}
    try:
        return _KERNELS[name](**kw)
    except Exception as err:
        raise ValueError(f"Checkpoint field 'kernel': cannot build {name}: {err}") from None
