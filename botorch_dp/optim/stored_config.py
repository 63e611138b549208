r"""A run's config as a checkpoint stores it: every field as exact JSON (floats as ``float.hex``;
each option family as its strategy's ``spec()``, the kernel by the resolved kernel's spec and
tensors, callables by kind), rebuilt from an allow-list (the registry's ``from_spec`` for the
strategies), and compared field by field on resume (``check_same_run``). A config stored with
the old flat option fields is migrated once (``migrate_flat_config``)."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import torch
from torch import Tensor

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import build_kernel, kernel_fingerprint, kernel_tensors
from botorch_dp.optim.config import RENAMED_FIELDS, STRATEGY_FIELDS, DPGIBOConfig, resolve_model
from botorch_dp.optim.legacy_options import FLAT_FIELDS, FLAT_KINDS, strategies_from_flat
from botorch_dp.optim.options import from_spec
from botorch_dp.optim.subspace import subspace_from_spec

__all__ = [
    "check_same_run",
    "config_from_json",
    "config_to_json",
    "decode_value",
    "encode_value",
    "migrate_flat_config",
    "with_added_fields",
]

#: Config fields that may differ on resume: the budget (only tightened) and the users per
#: clipping chunk (a memory and speed knob: it changes only the order of one floating-point
#: sum, not what is clipped or how much noise is added; its default changed in issue 13's
#: scale work).
_RESUME_MAY_DIFFER = {"validation_mu_budget", "user_chunk_size"}
#: Config fields added after schema version 1, with the value a checkpoint written before them
#: means: issue 16's target (ε, δ) not given, issue 43's opt-ins (refused before), and issue 33's
#: batch search (such runs searched as ``"reference"`` does). The other option fields added since
#: (issues 15, 16 and 18) are left out: a flat keyword not given means its default
#: (``legacy_options``), which is what those runs did.
_CONFIG_FIELDS_ADDED: dict[str, Any] = {
    "epsilon": None,
    "delta": None,
    "unsafe_allow_large_delta": False,
    "allow_noise_dominated": False,
    "acqf_speed": "reference",
}
#: The option fields of schema version 1, which every config stored flat holds.
_OPTION_FIELDS_V1 = ("clip_bound", "step_rule", "batch_size", "bias_tolerance", "max_batch_size", "batch_search")


def with_added_fields(stored: Any) -> Any:
    r"""A config stored with the flat option fields, with ``_CONFIG_FIELDS_ADDED`` filled in and
    renamed fields (``config.RENAMED_FIELDS``) under their new names (the first step of
    ``migrate_flat_config``); a config stored as strategies' specs is returned as it is."""
    if not isinstance(stored, dict) or "clip" in stored:
        return stored
    stored = {RENAMED_FIELDS.get(name, name): value for name, value in stored.items()}
    return {**{name: value for name, value in _CONFIG_FIELDS_ADDED.items() if name not in stored}, **stored}


def encode_value(value: Any) -> Any:
    r"""Exact JSON encoding of plain values and tensors (floats as ``float.hex``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return {"float": float(value).hex()}
    if isinstance(value, Tensor):
        return {"tensor": ckpt.tensor_to_json(value.to(torch.float64) if not value.is_floating_point() else value)}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    raise TypeError(f"{type(value).__name__} cannot be stored exactly")


def decode_value(value: Any, name: str, optimizer_state: bool = False) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, list):
        return [decode_value(v, name, optimizer_state) for v in value]
    if isinstance(value, dict) and set(value) == {"float"}:
        return ckpt.float_from_json(value["float"], name, allow_inf=True)
    if isinstance(value, dict) and set(value) == {"tensor"}:
        return ckpt.tensor_from_json(value["tensor"], name)
    if isinstance(value, dict) and set(value) == {"dict"} and isinstance(value["dict"], list):
        items = value["dict"]
        if not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
            raise ValueError(f"Checkpoint field {name!r}: malformed mapping.")
        return {decode_value(k, name): decode_value(v, name, optimizer_state) for k, v in items}
    raise ValueError(f"Checkpoint field {name!r}: unknown value {value!r:.80}.")


def config_to_json(config: DPGIBOConfig) -> dict[str, Any]:
    r"""The config's fields, exactly: each option family as its strategy's ``spec()`` (a
    ``Projected``'s oracle spec included), kernel/model/callables by kind (the kernel itself is
    stored as the resolved kernel's spec and tensors); anything else not JSON-able raises a
    ``ValueError`` naming the field."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name in STRATEGY_FIELDS:
            value = value.spec()
        if field.name == "kernel":
            out[field.name] = None if value is None else {"kernel": "resolved"}
        elif value is not None and (field.name == "model" or callable(value) or isinstance(value, torch.Generator)):
            out[field.name] = {"object": type(value).__qualname__}
        else:
            try:
                out[field.name] = encode_value(value)
            except TypeError as err:
                raise ValueError(f"Config field {field.name!r} cannot be written to a checkpoint: {err}.") from None
    return out


def migrate_flat_config(stored: Any) -> Any:
    r"""A config stored with the flat option fields (every schema before the strategies: the
    fields ``with_added_fields`` fills in, the renamed ones under their new names) as the
    strategies' specs, built by ``legacy_options.strategies_from_flat`` (the rule the old
    keywords follow); a config already stored as specs is returned as it is. A flat field whose
    value is not stored (a callable ``hyperparameter_fit``) becomes the spec it would have."""
    if not isinstance(stored, dict) or "clip" in stored:
        return stored
    stored = with_added_fields(stored)
    if missing := [name for name in (*_OPTION_FIELDS_V1, "hyperparameter_fit") if name not in stored]:
        raise ValueError(f"Checkpoint field 'config': missing fields {missing}.")
    flat: dict[str, Any] = {}
    fit = stored.get("hyperparameter_fit")
    for name in [name for name in FLAT_FIELDS if name in stored]:
        value = stored.pop(name)
        if name == "subspace" and isinstance(value, dict) and set(value) == {"subspace"}:
            flat[name] = subspace_from_spec(decode_value(value["subspace"], "config.subspace"))
        elif name == "hyperparameter_fit":
            flat[name] = None  # stored by kind only (below)
        else:
            flat[name] = decode_value(value, f"config.{name}")
    kinds = {name: decode_value(stored.pop(name), f"config.{name}") for name in FLAT_KINDS if name in stored}
    try:
        strategies = strategies_from_flat(flat, kinds, families=STRATEGY_FIELDS)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Checkpoint field 'config' is not a valid DPGIBOConfig: {err}") from None
    specs = {family: strategy.spec() for family, strategy in strategies.items()}
    if isinstance(fit, dict) and set(fit) == {"object"}:  # the callable was never stored, only its kind
        specs["fitting"] = {"kind": "sensitive", "fit": fit["object"], "standardize": False}
    return {**stored, **{family: encode_value(spec) for family, spec in specs.items()}}


def config_from_json(stored: Any, gp: dict[str, Tensor], kernel_meta: Any, *, rebuild: bool) -> DPGIBOConfig | None:
    r"""Check the stored config's fields and, if ``rebuild``, build the ``DPGIBOConfig``."""
    names = {f.name for f in dataclasses.fields(DPGIBOConfig)}
    stored = migrate_flat_config(stored)  # written with the flat option fields
    if not isinstance(stored, dict) or set(stored) != names:
        have = set(stored) if isinstance(stored, dict) else set()
        raise ValueError(
            f"Checkpoint field 'config': missing fields {sorted(names - have)}, unknown fields {sorted(have - names)}."
        )
    ckpt.check_keys(kernel_meta, {"spec", "fingerprint", "noise_variance", "standardize"}, "kernel")
    if not rebuild:
        return None
    values: dict[str, Any] = {}
    for name, value in stored.items():
        if isinstance(value, dict) and set(value) == {"object"}:
            raise ValueError(
                f"The checkpoint's config has a {name!r} ({value['object']}), which is not stored; "
                "pass the config to DPGIBO.resume."
            )
        if name == "kernel":
            values[name] = None
        elif name in STRATEGY_FIELDS:  # through the registry: registered kinds only
            spec = decode_value(value, f"config.{name}")
            if isinstance(spec, dict) and spec.get("fit") is not None:
                raise ValueError(
                    f"The checkpoint's config has a {name!r} with a callable ({spec['fit']}), which is not stored; "
                    "pass the config to DPGIBO.resume."
                )
            try:
                values[name] = from_spec(name, spec)
            except (TypeError, KeyError) as err:
                raise ValueError(f"Checkpoint field 'config.{name}' is not a {name} spec: {err!r}") from None
        else:
            values[name] = decode_value(value, f"config.{name}")
    if stored["kernel"] is not None:
        kernel = build_kernel(kernel_meta["spec"])  # already in the stored dtype: the values load exactly
        tensors = {k.removeprefix("kernel."): v for k, v in gp.items() if k.startswith("kernel.")}
        if set(tensors) != set(kernel_tensors(kernel)):
            raise ValueError("Checkpoint kernel tensors do not match the kernel's hyperparameters.")
        kernel.load_state_dict({**kernel.state_dict(), **tensors})
        if kernel_fingerprint(kernel) != kernel_meta["fingerprint"]:
            raise ValueError("Checkpoint field 'kernel': the rebuilt kernel does not match its stored fingerprint.")
        values["kernel"] = kernel
    try:
        return DPGIBOConfig(**values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Checkpoint field 'config' is not a valid DPGIBOConfig: {err}") from None


def _compared(encoded: Any, tolerates: Any) -> Any:
    r"""What of a stored field must equal on resume: all of it, except the spec keys its strategy
    ``resume_tolerates`` (``"any"``: left out; ``"presence"``: only whether a value is given)."""
    if not tolerates or not (isinstance(encoded, dict) and set(encoded) == {"dict"}):
        return encoded
    pairs = [kv for kv in encoded["dict"] if isinstance(kv, list) and len(kv) == 2]
    kept = [kv for kv in pairs if kv[0] not in tolerates]
    return {"dict": kept + [[kv[0], kv[1] is not None] for kv in pairs if tolerates.get(kv[0]) == "presence"]}


def check_same_run(meta: dict[str, Any], config: DPGIBOConfig) -> None:
    r"""``ValueError`` naming the first field of ``config`` that differs from the checkpoint's."""
    stored = migrate_flat_config(meta["config"])
    given = config_to_json(config)
    for field in dataclasses.fields(config):
        if field.name in _RESUME_MAY_DIFFER or field.name in ("kernel", "model"):
            continue
        tolerates = getattr(getattr(config, field.name), "resume_tolerates", None)  # a strategy's, else none
        if _compared(given[field.name], tolerates) != _compared(stored.get(field.name), tolerates):
            raise ValueError(
                f"Config field {field.name!r} differs from the checkpoint's; resuming would change "
                "the run (and its privacy accounting). Start a new run instead."
            )
    if (config.model is None) != (stored.get("model") is None):
        raise ValueError("Config field 'model' differs from the checkpoint's (kernel vs model).")
    kernel, noise_variance, standardize = resolve_model(config)
    k = meta["kernel"]
    if kernel_fingerprint(kernel) != k.get("fingerprint"):
        raise ValueError(
            "Config field 'kernel' differs from the checkpoint's (class, settings or hyperparameter values)."
        )
    if float(noise_variance).hex() != k.get("noise_variance") or standardize != k.get("standardize"):
        raise ValueError(
            "Config field 'noise_variance' (or the model's likelihood noise) differs from the checkpoint's."
        )
