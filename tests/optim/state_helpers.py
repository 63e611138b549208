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


def flat_config_json(config) -> dict:
    r"""``config`` as checkpoints stored it before the strategies (issue 42): the flat option
    fields (``clip_bound``, ``noise_schedule``, ``batch_size``, ...), written here by hand."""
    import warnings

    from botorch_dp.optim.config import STRATEGY_FIELDS
    from botorch_dp.optim.legacy_options import FLAT_FIELDS
    from botorch_dp.optim.stored_config import config_to_json, encode_value

    out = {k: v for k, v in config_to_json(config).items() if k not in STRATEGY_FIELDS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in FLAT_FIELDS:
            value = getattr(config, name)
            if name == "subspace" and value is not None:
                out[name] = {"subspace": encode_value(value.spec())}
            elif name == "hyperparameter_fit" and value is not None:
                out[name] = {"object": type(value).__qualname__}
            else:
                out[name] = encode_value(value)
    out["step_rule"], out["selection"] = config.step_rule.name, config.selection.name
    return out


def version_3_meta(meta: dict) -> dict:
    r"""A checkpoint's ``meta`` as state version 3 wrote it (before issue 42 item 3): the families'
    payloads under ``strategies`` spread back into the per-family keys ``adaptive_clip`` (``None``
    for a fixed bound), ``noise_and_selection`` and ``subspace``, each with all its keys."""
    strategies = meta["strategies"]
    noise, selection, clip = strategies["noise"], strategies["selection"], strategies["clip"]
    track = {**strategies["projection"], **strategies["step_rule"]}
    lists = ("step_mus", "noise_stds", "noisy_norms", "norm_mus")
    subspace = ("bases", "coordinates", "preconditioners", "preconditioner_noise_stds", "columns")
    old = {k: v for k, v in meta.items() if k != "strategies"}
    return {
        **old,
        "version": 3,
        "noise_and_selection": {
            **{name: noise.get(name, []) for name in lists},
            "stopped": noise.get("stopped", False),
            "selected_index": selection.get("selected_index"),
            "selection_scores": selection.get("selection_scores"),
        },
        "subspace": {name: track.get(name, []) for name in subspace},
        "adaptive_clip": {"bounds": clip.get("bounds", []), "counts": clip.get("counts", [])} if clip else None,
    }
