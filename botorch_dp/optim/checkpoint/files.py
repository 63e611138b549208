r"""Durable, atomic writes of a checkpoint's files and their checked reads (``save_state``,
``load_state``): every file named with its size and SHA-256 in ``state.json``, the commit point."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim.checkpoint.directory import (
    FORMAT,
    GP_NAME,
    LOSS_NAME,
    MAX_STATE_BYTES,
    SCHEMA_VERSION,
    STATE_FILE,
    taken_error,
)
from botorch_dp.optim.checkpoint.encoding import check_keys, is_int, json_fingerprint
from botorch_dp.storage.private_files import lstat, open_dir, read_file, strict_object, write_atomic


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
            views.append(t.numpy().data.cast("B"))  # ndarray.data: the memoryview of its buffer
        offset += nbytes
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    return [len(head).to_bytes(8, "little"), head, *views]


def _write_tensors(dir_fd: int, folder: Path, name: str, tensors: dict[str, Tensor]) -> dict[str, Any]:
    r"""Write ``tensors`` as the safetensors file ``folder.name/name``; returns its record."""
    return {"file": f"{folder.name}/{name}", **write_atomic(dir_fd, name, _safetensors_parts(tensors), folder / name)}


def save_state(
    directory: str | os.PathLike, state: dict[str, Any], committed: dict[str, Any] | None = None
) -> dict[str, Any]:
    r"""Write ``state`` (``{"meta": JSON-able public state, "gp": tensors, "loss_blocks": the per-batch
    losses (SENSITIVE)}``) into the private ``directory`` durably, never through a link, and return
    the file records now committed. ``committed``: what the previous save of the same run returned
    (its loss files and same-iteration gp file are not written again); ``None`` at first, when the
    directory must not hold a checkpoint yet (``ValueError`` naming ``DPGIBO.resume``)."""
    root = Path(directory)
    meta, blocks = state["meta"], state["loss_blocks"]
    first = committed is None
    committed = committed or {"gp_file": None, "loss_files": []}
    with contextlib.ExitStack() as fds:
        root_fd = open_dir(root, root, create=True)
        fds.callback(os.close, root_fd)
        if first and lstat(STATE_FILE, root_fd) is not None:
            raise taken_error(root)
        sub_fds = {}
        for sub in ("gp", "losses"):  # losses/ is made once there are losses (a partitioned run has none)
            fd = open_dir(sub, root / sub, dir_fd=root_fd, create=sub == "gp" or bool(blocks))
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
        try:
            write_atomic(root_fd, STATE_FILE, [data], root / STATE_FILE, replace=not first)  # the commit point
        except FileExistsError:  # committed by another opener since the check above
            raise taken_error(root) from None
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
        st = lstat(name, fd)
        if st is not None and (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)


# ---------------------------------------------------------------------- validated reads
_strict_state = functools.partial(strict_object, message=f"Checkpoint {STATE_FILE} has a repeated key {{key!r}}.")


def _read_checked(root: Path, dir_fds: dict[str, int | None], record: Any, name: str, pattern: re.Pattern) -> bytes:
    r"""The bytes of the gp or loss file ``record`` (the ``state.json`` field ``name``) names, from the
    open subdirectories ``dir_fds``; a ``ValueError`` naming it if it is missing, a link, misnamed
    (``pattern``), or of another size or SHA-256."""
    check_keys(record, {"file", "sha256", "bytes"} | ({"rows"} if name.startswith("loss") else set()), name)
    file = record["file"]
    if not isinstance(file, str) or not pattern.match(file):
        raise ValueError(f"Checkpoint field {name!r}: bad file name {file!r}.")
    if not is_int(record["bytes"]) or record["bytes"] < 0:
        raise ValueError(f"Checkpoint field {name!r}: 'bytes' must be an integer >= 0.")

    def check_size(size: int) -> None:
        if size != record["bytes"]:
            raise ValueError(f"Checkpoint file {file} has the wrong size: damaged or replaced.")

    folder, base = file.split("/")
    dir_fd = dir_fds[folder]
    data = None if dir_fd is None else read_file(dir_fd, base, root / file, check_size=check_size)
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
    checked by ``DPGIBO.load_state_dict``. A foreign, damaged or inconsistent checkpoint is a
    ``ValueError`` naming the problem.
    """
    root = Path(directory)
    with contextlib.ExitStack() as fds:
        root_fd = open_dir(root, root, create=False)
        if root_fd is None:
            raise ValueError(f"No checkpoint in {root}: the directory is missing.")
        fds.callback(os.close, root_fd)
        dir_fds: dict[str, int | None] = {}
        for sub in ("gp", "losses"):
            fd = dir_fds[sub] = open_dir(sub, root / sub, dir_fd=root_fd, create=False)
            if fd is not None:
                fds.callback(os.close, fd)
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

    raw = read_file(root_fd, STATE_FILE, path, check_size=check_size)
    if raw is None:
        raise ValueError(f"No checkpoint in {root}: {STATE_FILE} is missing.")
    try:
        meta = json.loads(raw.decode("utf-8"), object_pairs_hook=_strict_state)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"Checkpoint {STATE_FILE} is not valid JSON (truncated or damaged): {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a DP-GIBO checkpoint (field 'format' is not {FORMAT!r}).")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"Checkpoint field 'schema_version' is {meta.get('schema_version')!r}; this version reads {SCHEMA_VERSION}."
        )
    iteration = meta.get("iteration")
    if not is_int(iteration) or iteration < 0:
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
        data = _read_checked(root, dir_fds, record, f"loss_files[{t}]", LOSS_NAME)
        if record["file"] != f"losses/{t:06d}.safetensors":
            raise ValueError(f"Checkpoint field 'loss_files[{t}]': expected losses/{t:06d}.safetensors.")
        tensors = _load_tensors(data, record["file"])
        if set(tensors) != {"losses"} or tensors["losses"].dim() != 2:
            raise ValueError(f"Checkpoint file {record['file']} must hold one 2-d tensor 'losses'.")
        block = tensors["losses"]
        if block.shape[0] != record["rows"]:
            raise ValueError(
                f"Checkpoint file {record['file']} has {block.shape[0]} rows, {STATE_FILE} says {record['rows']}."
            )
        if blocks and block.shape[1] != blocks[0].shape[1]:
            raise ValueError(
                f"Checkpoint file {record['file']} has {block.shape[1]} users, earlier batches {blocks[0].shape[1]}."
            )
        blocks.append(block)
    gp_record = meta.pop("gp_file", None)
    data = _read_checked(root, dir_fds, gp_record, "gp_file", GP_NAME)
    if gp_record["file"] != f"gp/{iteration:06d}.safetensors":
        raise ValueError(f"Checkpoint field 'gp_file': expected gp/{iteration:06d}.safetensors.")
    gp = _load_tensors(data, gp_record["file"])
    X, L = gp.get("X"), gp.get("L")
    N = X.shape[0] if partitioned and isinstance(X, Tensor) else sum(b.shape[0] for b in blocks)
    if X is None or L is None or X.dim() != 2 or X.shape[0] != N or L.shape != (N, N):
        raise ValueError(
            f"Checkpoint file {gp_record['file']}: expected X (N x d) and L (N x N) with N = {N} told points."
        )
    unknown = sorted(k for k in gp if k not in ("X", "L") and not k.startswith("kernel."))
    if unknown:
        raise ValueError(f"Checkpoint file {gp_record['file']}: unknown tensors {unknown}.")
    return {"meta": meta, "gp": gp, "loss_blocks": blocks}
