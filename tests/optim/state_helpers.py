r"""Bit-exact comparison of optimizer states, for the refusal tests (issue 13 items 7, 9)."""

from __future__ import annotations

import dataclasses
import math

import torch


def same(a, b) -> bool:
    r"""``a`` and ``b`` are bit-identical: tensors byte for byte (NaN included), containers
    and dataclasses field by field, modules by identity, floats with NaN == NaN."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
    if isinstance(a, torch.nn.Module) or isinstance(b, torch.nn.Module):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def snapshot(opt) -> dict:
    r"""Everything a refused call must leave untouched: the full state, the ledger, the
    pending points and the noise/search generator states."""
    return {
        "state": opt.state_dict(),
        "ledger": opt.ledger.state_dict(),
        "validation_mu": opt.ledger.validation.mu(),
        "iteration": opt.iteration,
        "pending": None if opt.state.pending is None else opt.state.pending.clone(),
        "noise_gen": None if opt.generators.noise is None else opt.generators.noise.get_state(),
        "search_gen": opt.generators.search.get_state(),
    }
