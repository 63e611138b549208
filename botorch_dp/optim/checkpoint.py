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
written to a temporary name, fsync'd, renamed into place, and the directory is fsync'd;
``state.json`` is replaced last, so a crash at any moment leaves the previous or the new
checkpoint, never a mix. Loss files are written once per batch (named by the batch's
index), so the bytes written per iteration are proportional to the new evaluations.
Floats are stored exactly (``float.hex`` in JSON, raw float64 in safetensors): a resumed
run is bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
from collections.abc import Sequence
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


# ---------------------------------------------------------------------- durable writes
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dir(path: Path) -> None:
    path.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, _DIR_MODE)


def _write_atomic(path: Path, parts: Sequence[bytes | memoryview]) -> dict[str, Any]:
    r"""Write ``parts`` to ``path``: temp file (0600) → fsync → rename → fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    digest, size = hashlib.sha256(), 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
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
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return {"sha256": digest.hexdigest(), "bytes": size}


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


def _write_tensors(root: Path, name: str, tensors: dict[str, Tensor]) -> dict[str, Any]:
    path = root / name
    _make_dir(path.parent)
    return {"file": name, **_write_atomic(path, _safetensors_parts(tensors))}


def save_state(
    directory: str | os.PathLike, state: dict[str, Any], committed: dict[str, Any] | None = None
) -> dict[str, Any]:
    r"""Write a run's state into ``directory`` durably; only new files are written.

    Args:
        directory: The checkpoint directory (created ``0700`` if missing).
        state: ``{"meta": dict, "gp": dict[str, Tensor], "loss_blocks": list[Tensor]}``:
            the JSON-able public state (everything but the file records), the
            ``gp/<iteration>`` tensors and the per-batch loss blocks (SENSITIVE).
        committed: The value this function returned for the previous checkpoint of the
            same run (``None`` at first): loss files it lists are not written again, nor
            the gp file of the same iteration.

    Returns:
        The file records now committed (pass them to the next call).
    """
    root = Path(directory)
    _make_dir(root)
    meta, blocks = state["meta"], state["loss_blocks"]
    committed = committed or {"gp_file": None, "loss_files": []}
    loss_files = list(committed["loss_files"][: len(blocks)])
    for index in range(len(loss_files), len(blocks)):
        record = _write_tensors(root, f"losses/{index:06d}.safetensors", {"losses": blocks[index]})
        loss_files.append({**record, "rows": int(blocks[index].shape[0])})
    gp_name = f"gp/{meta['iteration']:06d}.safetensors"
    gp_file = committed["gp_file"]
    if gp_file is None or gp_file["file"] != gp_name:
        gp_file = _write_tensors(root, gp_name, state["gp"])
    document = {**meta, "gp_file": gp_file, "loss_files": loss_files}
    data = json.dumps(document, allow_nan=True, indent=1, sort_keys=True).encode("utf-8")
    _write_atomic(root / STATE_FILE, [data])  # the commit point
    _remove_unreferenced(root, {gp_file["file"], *(r["file"] for r in loss_files)})
    return {"gp_file": gp_file, "loss_files": loss_files}


def _remove_unreferenced(root: Path, keep: set[str]) -> None:
    r"""Delete gp/loss files (and temporaries) that the committed ``state.json`` does not name."""
    for sub in ("gp", "losses"):
        folder = root / sub
        if folder.is_dir():
            for path in folder.iterdir():
                if f"{sub}/{path.name}" not in keep and path.is_file():
                    path.unlink(missing_ok=True)
    (root / (STATE_FILE + ".tmp")).unlink(missing_ok=True)


# ---------------------------------------------------------------------- validated reads
def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"Checkpoint {STATE_FILE} has a repeated key {key!r}.")
        obj[key] = value
    return obj


def _read_checked(root: Path, record: Any, name: str, pattern: re.Pattern) -> bytes:
    _check_keys(record, {"file", "sha256", "bytes"} | ({"rows"} if name.startswith("loss") else set()), name)
    file = record["file"]
    if not isinstance(file, str) or not pattern.match(file):
        raise ValueError(f"Checkpoint field {name!r}: bad file name {file!r}.")
    path = root / file
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"Checkpoint file {file} is missing (field {name!r}).")
    if not _is_int(record["bytes"]) or path.stat().st_size != record["bytes"]:
        raise ValueError(f"Checkpoint file {file} has the wrong size: damaged or replaced.")
    data = path.read_bytes()
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

    Checks the format name and schema version, refuses repeated keys, verifies the size and
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
    path = root / STATE_FILE
    if not path.is_file():
        raise ValueError(f"No checkpoint in {root}: {STATE_FILE} is missing.")
    if path.stat().st_size > MAX_STATE_BYTES:
        raise ValueError(f"Checkpoint {STATE_FILE} is larger than {MAX_STATE_BYTES} bytes: not a DP-GIBO checkpoint.")
    raw = path.read_bytes()
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
    records = meta.pop("loss_files", None)
    partitioned = meta.get("partitioned_users") is not None  # the losses are in the partitions (issue 17)
    if not isinstance(records, list) or len(records) != (0 if partitioned else iteration):
        raise ValueError(f"Checkpoint field 'loss_files': expected one loss file per iteration ({iteration}).")
    blocks: list[Tensor] = []
    for t, record in enumerate(records):
        data = _read_checked(root, record, f"loss_files[{t}]", _LOSS_NAME)
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
    data = _read_checked(root, gp_record, "gp_file", _GP_NAME)
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


def kernel_spec(kernel: Kernel) -> dict[str, Any]:
    r"""Class and settings of an allow-listed GPyTorch kernel (``ValueError`` for any other)."""
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
        spec["base"] = kernel_spec(kernel.base_kernel)
    return spec


def kernel_tensors(kernel: Kernel) -> dict[str, Tensor]:
    r"""The kernel's hyperparameters (raw parameters; constraint bounds are in the spec)."""
    return {k: v.detach() for k, v in kernel.named_parameters()}


def kernel_fingerprint(kernel: Kernel) -> str:
    r"""SHA-256 of the kernel's class, settings and exact hyperparameter values."""
    spec = kernel_spec(kernel)
    values = {k: [float(x).hex() for x in v.to(torch.float64).reshape(-1).tolist()] for k, v in kernel_tensors(kernel).items()}
    return json_fingerprint({"spec": spec, "values": values})


def build_kernel(spec: Any) -> Kernel:
    if not isinstance(spec, dict) or spec.get("class") not in _KERNELS:
        raise ValueError(f"Checkpoint field 'kernel': class not in the allow-list {sorted(_KERNELS)}.")
    kw: dict[str, Any] = {"ard_num_dims": spec.get("ard_num_dims"), "active_dims": spec.get("active_dims")}
    name = spec["class"]
    if name == "MaternKernel":
        kw["nu"] = float_from_json(spec.get("nu"), "kernel.nu")
    if name == "PolynomialKernel":
        kw["power"] = spec.get("power")
    if name == "ScaleKernel":
        kw = {"base_kernel": build_kernel(spec.get("base"))}
    try:
        kernel = _KERNELS[name](**kw)
    except Exception as err:
        raise ValueError(f"Checkpoint field 'kernel': cannot build {name}: {err}") from None
    if kernel_spec(kernel) != spec:
        raise ValueError(
            f"Checkpoint field 'kernel': the stored {name} has settings or constraints that cannot be "
            "rebuilt from the checkpoint; pass the config on resume."
        )
    return kernel
