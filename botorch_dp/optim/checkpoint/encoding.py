r"""Exact JSON encodings of a checkpoint's values: tensors and floats as ``float.hex``, generator
states, strict key checks, and the canonical-JSON fingerprint."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any, TypeGuard

import torch
from torch import Tensor


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
    r"""Decode ``tensor_to_json``'s output, checking type, dtype, ``shape`` (``None`` entries, or
    ``None``, are free) and finiteness; a ``ValueError`` naming the field ``name`` if anything is wrong."""
    check_keys(obj, {"dtype", "shape", "hex"}, name)
    dtype = {"float64": torch.float64, "float32": torch.float32}.get(obj["dtype"])
    if dtype is None:
        raise ValueError(f"Checkpoint field {name!r}: unsupported dtype {obj['dtype']!r}.")
    dims = obj["shape"]
    if not isinstance(dims, list) or not all(is_int(s) and s >= 0 for s in dims):
        raise ValueError(f"Checkpoint field {name!r}: shape must be a list of integers >= 0.")
    if shape is not None and (
        len(dims) != len(shape) or any(e is not None and e != s for e, s in zip(shape, dims, strict=True))
    ):
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
        raise ValueError(
            f"Checkpoint field {name!r}: a CPU generator state has {len(torch.Generator().get_state())} bytes, "
            f"got {len(raw)}."
        )
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()


def is_int(x: Any) -> TypeGuard[int]:
    r"""An ``int`` of a checkpoint field, not a ``bool``."""
    return isinstance(x, int) and not isinstance(x, bool)


def check_keys(obj: Any, keys: set[str], name: str) -> None:
    r"""``ValueError`` naming the checkpoint field ``name`` unless ``obj`` is an object with exactly ``keys``."""
    if not isinstance(obj, dict):
        raise ValueError(f"Checkpoint field {name!r}: expected an object.")
    if set(obj) != keys:
        missing, unknown = sorted(keys - set(obj)), sorted(set(obj) - keys)
        raise ValueError(f"Checkpoint field {name!r}: missing keys {missing}, unknown keys {unknown}.")


def json_fingerprint(obj: Any) -> str:
    r"""SHA-256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=True).encode("utf-8")).hexdigest()
