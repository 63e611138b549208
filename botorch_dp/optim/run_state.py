r"""What a DP-GIBO checkpoint stores besides tensors: the config as exact JSON, the kernel as
an allow-listed spec with a fingerprint, and the checks that refuse a changed run on resume.

Nothing here unpickles: kernels are rebuilt from the allow-list in ``checkpoint`` only."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import numbers
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import (
    build_kernel,
    json_fingerprint,
    kernel_fingerprint,
    kernel_spec,
    kernel_tensors,
    load_state,
)
from botorch_dp.optim.adaptive_clip import check_clip_state, encode_clip_state
from botorch_dp.optim.config import DPGIBOConfig, clip_count_privacy_mu, resolve_model
from botorch_dp.optim.selection import EVALUATED_SELECTIONS, SELECTION_KEY
from botorch_dp.optim.step_rules import make_step_optimizer
from botorch_dp.optim.subspace import SubspaceTrack, subspace_from_spec
from botorch_dp.privacy.ledger import PrivacyLedger, release_key
from botorch_dp.privacy.mechanisms import ReleaseDiagnostics

if TYPE_CHECKING:
    from botorch_dp.optim.dp_gibo import DPGIBO

#: Version of ``DPGIBO.state_dict`` (3: JSON + safetensors, per-batch loss blocks, run id).
STATE_VERSION = 3


META_KEYS = {
    "format", "schema_version", "version", "run_id", "config", "config_fingerprint", "kernel", "iteration",
    "theta", "iterates", "pending", "batch_sizes", "traces", "released", "diagnostics", "step_optimizer",
    "ledger", "noise_generator", "search_generator", "noise_and_selection", "subspace", "adaptive_clip", "partitioned_users",
}
#: Meta keys added after schema version 1, with what an older checkpoint means by them.
#: ``noise_and_selection`` (issue 15, Menart et al.): nothing adaptive and no selection yet.
#: ``subspace`` (issue 15, Kairouz et al.): no subspace, no private preconditioner yet.
#: ``adaptive_clip`` (issue 16, Andrew et al.): a fixed clip bound.
#: ``partitioned_users`` (issue 17): ``n`` of a run whose losses are held in partitions (none in the files).
_META_KEYS_ADDED = {"noise_and_selection": None, "subspace": None, "adaptive_clip": None, "partitioned_users": None}
#: Config fields that may differ on resume: the budget (only tightened), the unsafe
#: fitting callable (only its presence is compared) and the users per clipping chunk (a
#: memory and speed knob: it changes only the order of one floating-point sum, not what is
#: clipped or how much noise is added; its default changed in issue 13's scale work).
_RESUME_MAY_DIFFER = {"privacy_budget_mu", "hyperparameter_fit", "user_chunk_size"}
#: Config fields added after schema version 1 (issue 16's target (ε, δ)); a checkpoint
#: written before them reads them as not given.
_CONFIG_FIELDS_ADDED = ("epsilon", "delta")
#: Config fields added by issue 15 (Menart et al.: noise schedule, selection); a checkpoint
#: written before them reads them as their defaults (the fixed schedule, the last iterate).
_CONFIG_FIELDS_WITH_DEFAULTS = (
    "noise_schedule", "max_iterations", "norm_mu_fraction", "snr_factor", "max_step_mu",
    "selection", "selection_epsilon", "selection_mu", "loss_clip",
    # Kairouz et al.: no subspace, no projected acquisition, no full-matrix preconditioner
    "preconditioner", "preconditioner_mu_fraction", "subspace", "subspace_acquisition",
    # issue 16, Andrew et al.: a fixed clip bound
    "clip_init", "clip_quantile", "clip_learning_rate", "clip_mu_fraction",
    # issue 18: BoTorch's default L-BFGS-B iterations in the batch search
    "acqf_maxiter",
)


def _with_added_fields(stored: Any) -> Any:
    r"""A stored config with the fields added since it was written filled in."""
    if not isinstance(stored, dict):
        return stored
    defaults = {f.name: f.default for f in dataclasses.fields(DPGIBOConfig) if f.name in _CONFIG_FIELDS_WITH_DEFAULTS}
    added = {name: encode_value(value) for name, value in defaults.items() if name not in stored}
    return {**{name: None for name in _CONFIG_FIELDS_ADDED if name not in stored}, **added, **stored}


def committed_records(directory: str | os.PathLike) -> dict[str, Any]:
    r"""The file records of the checkpoint just loaded (so that they are not written again)."""
    raw = json.loads((Path(directory) / ckpt.STATE_FILE).read_text("utf-8"))
    return {"gp_file": raw["gp_file"], "loss_files": raw["loss_files"]}


def budget_of_ledger_state(ledger_state: Any) -> float | None:
    budget = ledger_state.get("validation_mu_budget") if isinstance(ledger_state, dict) else None
    return None if budget is None else float(budget)


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
    r"""The config's fields, exactly: kernel/model/callables are recorded by kind (the kernel
    itself is stored as the resolved kernel's spec and tensors); anything else not JSON-able
    raises a ``ValueError`` naming the field."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "kernel":
            out[field.name] = None if value is None else {"kernel": "resolved"}
        elif field.name == "subspace" and value is not None:  # compared and rebuilt by its exact spec
            try:
                out[field.name] = {"subspace": encode_value(value.spec())}
            except TypeError as err:
                raise ValueError(f"Config field 'subspace' cannot be written to a checkpoint: {err}.") from None
        elif value is not None and (field.name == "model" or callable(value) or isinstance(value, torch.Generator)):
            out[field.name] = {"object": type(value).__qualname__}
        else:
            try:
                out[field.name] = encode_value(value)
            except TypeError as err:
                raise ValueError(f"Config field {field.name!r} cannot be written to a checkpoint: {err}.") from None
    return out


def config_from_json(stored: Any, gp: dict[str, Tensor], kernel_meta: Any, *, rebuild: bool) -> DPGIBOConfig | None:
    r"""Check the stored config's fields and, if ``rebuild``, build the ``DPGIBOConfig``."""
    names = {f.name for f in dataclasses.fields(DPGIBOConfig)}
    stored = _with_added_fields(stored)  # written before these fields existed
    if not isinstance(stored, dict) or set(stored) != names:
        have = set(stored) if isinstance(stored, dict) else set()
        raise ValueError(
            f"Checkpoint field 'config': missing fields {sorted(names - have)}, unknown fields {sorted(have - names)}."
        )
    ckpt._check_keys(kernel_meta, {"spec", "fingerprint", "noise_variance", "standardize"}, "kernel")
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
            continue
        if name == "subspace" and isinstance(value, dict) and set(value) == {"subspace"}:
            values[name] = subspace_from_spec(decode_value(value["subspace"], "config.subspace"))
            continue
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


def check_same_run(meta: dict[str, Any], config: DPGIBOConfig) -> None:
    r"""``ValueError`` naming the first field of ``config`` that differs from the checkpoint's."""
    stored = _with_added_fields(meta["config"])
    given = config_to_json(config)
    for field in dataclasses.fields(config):
        if field.name in _RESUME_MAY_DIFFER or field.name in ("kernel", "model"):
            continue
        if given[field.name] != stored.get(field.name):
            raise ValueError(
                f"Config field {field.name!r} differs from the checkpoint's; resuming would change "
                "the run (and its privacy accounting). Start a new run instead."
            )
    if (config.hyperparameter_fit is None) != (stored.get("hyperparameter_fit") is None):
        raise ValueError("Config field 'hyperparameter_fit' differs from the checkpoint's (given vs not given).")
    if (config.model is None) != (stored.get("model") is None):
        raise ValueError("Config field 'model' differs from the checkpoint's (kernel vs model).")
    kernel, noise_variance, standardize = resolve_model(config)
    k = meta["kernel"]
    if kernel_fingerprint(kernel) != k.get("fingerprint"):
        raise ValueError(
            "Config field 'kernel' differs from the checkpoint's (class, settings or hyperparameter values)."
        )
    if float(noise_variance).hex() != k.get("noise_variance") or standardize != k.get("standardize"):
        raise ValueError("Config field 'noise_variance' (or the model's likelihood noise) differs from the checkpoint's.")


def check_state(
    state: dict[str, Any], *, config: DPGIBOConfig, kernel: Kernel, has_noise_generator: bool
) -> dict[str, Any]:
    r"""Check every field of a loaded state against the config and against each other.

    Returns the decoded values (``T``, ``theta``, ``iterates``, ``pending``, ``sizes``,
    ``traces``, ``released``, ``diag``, ``X``, ``L``, ``blocks``, ``kernel_tensors``,
    ``optimizer``, ``ledger_state``, ``noise_gen``, ``search_gen``, ``n``, ``meta``), or
    raises ``ValueError`` naming the first field that is wrong; nothing is changed.
    """
    meta, gp, blocks = _with_added_meta(state["meta"]), state["gp"], list(state["loss_blocks"])
    if meta.get("version") != STATE_VERSION:
        raise ValueError(f"Checkpoint state version {meta.get('version')!r}, expected {STATE_VERSION}.")
    ckpt._check_keys(meta, META_KEYS, "state")
    d, T = config.bounds.shape[1], meta["iteration"]
    if not ckpt._is_int(T) or not 0 <= T <= config.iteration_cap:
        raise ValueError(f"Checkpoint field 'iteration' must be an integer in [0, {config.iteration_cap}], got {T!r}.")
    if not isinstance(meta["run_id"], str) or len(meta["run_id"]) != 32 or not all(ch in "0123456789abcdef" for ch in meta["run_id"]):
        raise ValueError("Checkpoint field 'run_id' must be a uuid4 hex string.")
    theta = ckpt.tensor_from_json(meta["theta"], "theta", (d,))
    iterates = ckpt.tensor_from_json(meta["iterates"], "iterates", (T + 1, d))
    if not torch.equal(iterates[-1], theta):
        raise ValueError("Checkpoint fields 'theta' and 'iterates' disagree.")
    pending = None if meta["pending"] is None else ckpt.tensor_from_json(meta["pending"], "pending", (None, d))
    sizes = meta["batch_sizes"]
    if not isinstance(sizes, list) or len(sizes) != T or not all(ckpt._is_int(b) and b >= 0 for b in sizes):
        raise ValueError(f"Checkpoint field 'batch_sizes' must be {T} integers >= 0.")
    partitioned = meta["partitioned_users"]
    if partitioned is not None and (not ckpt._is_int(partitioned) or partitioned < 2 or blocks):
        raise ValueError("Checkpoint field 'partitioned_users' must be None or an integer n >= 2 with no loss files.")
    if partitioned is None and [b.shape[0] for b in blocks] != sizes:
        raise ValueError("Checkpoint field 'batch_sizes' does not match the rows of the loss files.")
    if partitioned is not None and sum(sizes) != gp["X"].shape[0]:
        raise ValueError("Checkpoint field 'batch_sizes' does not match the rows of X.")
    if not isinstance(meta["traces"], list) or len(meta["traces"]) != T:
        raise ValueError(f"Checkpoint field 'traces' must hold {T} values.")
    traces = [ckpt.float_from_json(v, "traces") for v in meta["traces"]]
    released = ckpt.tensor_from_json(meta["released"], "released", (T, d))
    if not isinstance(meta["diagnostics"], list) or len(meta["diagnostics"]) not in (0, T):
        raise ValueError(f"Checkpoint field 'diagnostics' must hold 0 or {T} entries.")
    diag = []
    for entry in meta["diagnostics"]:
        ckpt._check_keys(entry, {"unnoised_gradient", "clip_fraction", "noise_norm"}, "diagnostics")
        diag.append(ReleaseDiagnostics(
            unnoised_gradient=ckpt.tensor_from_json(entry["unnoised_gradient"], "diagnostics", (d,)),
            clip_fraction=ckpt.float_from_json(entry["clip_fraction"], "diagnostics"),
            noise_norm=ckpt.float_from_json(entry["noise_norm"], "diagnostics"),
        ))
    X, L = gp["X"], gp["L"]
    if X.shape[1:] != (d,):
        raise ValueError(f"Checkpoint tensor 'X' must have {d} columns.")
    stored_kernel_tensors = {k.removeprefix("kernel."): v for k, v in gp.items() if k.startswith("kernel.")}
    if set(stored_kernel_tensors) != set(kernel_tensors(kernel)):
        raise ValueError("Checkpoint kernel tensors do not match the kernel's hyperparameters.")
    noise_gen = ckpt.generator_state_from_json(meta["noise_generator"], "noise_generator")
    search_gen = ckpt.generator_state_from_json(meta["search_generator"], "search_generator")
    if (noise_gen is None) != (not has_noise_generator) or search_gen is None:
        raise ValueError("Checkpoint field 'noise_generator'/'search_generator' does not match the config's generators.")
    subspace = SubspaceTrack.from_json(
        meta["subspace"] if meta["subspace"] is not None else SubspaceTrack().to_json(), dim=d, steps=T,
        has_subspace=config.subspace is not None, private=config.preconditioner == "private",
    )
    optimizer = make_step_optimizer(theta, config.step_rule, config.step_size, preconditioner=config.preconditioner)
    try:
        optimizer.load_state_dict(decode_value(meta["step_optimizer"], "step_optimizer", optimizer_state=True))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"Checkpoint field 'step_optimizer' is not a {config.step_rule} state: {err}") from None
    ledger_state = meta["ledger"]
    ledger = PrivacyLedger.from_state_dict(ledger_state)  # validates before anything changes
    n = blocks[0].shape[1] if blocks else partitioned
    if n is not None and config.privacy_mu < math.inf and n == 0:
        raise ValueError("Checkpoint loss files hold no users.")
    check_ledger_covers_steps(config, ledger, meta["run_id"], T, n)
    adaptive = check_noise_and_selection(meta["noise_and_selection"], config=config, T=T, ledger=ledger, run_id=meta["run_id"])
    clip_mu = clip_count_privacy_mu(config)
    clip = check_clip_state(
        meta["adaptive_clip"], config=config, T=T, num_users=n, ledger=ledger, run_id=meta["run_id"],
        step_mu=None if clip_mu is None else clip_mu / math.sqrt(config.num_iterations),
    )
    return {
        "meta": meta, "T": T, "theta": theta, "iterates": iterates, "pending": pending, "sizes": sizes,
        "traces": traces, "released": released, "diag": diag, "X": X, "L": L, "blocks": blocks,
        "kernel_tensors": stored_kernel_tensors, "optimizer": optimizer, "ledger_state": ledger_state,
        "noise_gen": noise_gen, "search_gen": search_gen, "n": n, "noise_and_selection": adaptive,
        "subspace": subspace, "adaptive_clip": clip, "partitioned_users": partitioned,
    }


def _with_added_meta(meta: Any) -> Any:
    r"""A stored ``meta`` with the keys added since it was written filled in."""
    if not isinstance(meta, dict):
        return meta
    return {**{k: v for k, v in _META_KEYS_ADDED.items() if k not in meta}, **meta}


_NOISE_LISTS = ("step_mus", "noise_stds", "noisy_norms", "norm_mus")


def encode_noise_and_selection(opt: DPGIBO) -> dict[str, Any]:
    r"""Menart et al.'s public state as exact JSON: the adaptive schedule's per-step values, whether
    its filter stopped the steps, and the evaluated selection's choice (and scores)."""
    lists = {"step_mus": opt._step_mus, "noise_stds": opt._noise_stds, "noisy_norms": opt._noisy_norms, "norm_mus": opt._norm_mus}
    return {
        **{name: [float(v).hex() for v in values] for name, values in lists.items()},
        "stopped": opt._stopped,
        "selected_index": opt._selected,
        "selection_scores": None if opt._selection_scores is None else ckpt.tensor_to_json(opt._selection_scores),
    }


def check_noise_and_selection(
    entry: Any, *, config: DPGIBOConfig, T: int, ledger: PrivacyLedger, run_id: str
) -> dict[str, Any]:
    r"""Decode and check the ``noise_and_selection`` field against the config and the ledger.

    ``None`` (a checkpoint written before the field existed) is a run with the fixed
    schedule and no selection made. With ``"adaptive_norm"`` each list holds ``T`` values
    and every ``μ`` equals the ledger's record of that release (``step-t/norm``,
    ``step-t/grad``): the filter's spent budget is read from the ledger, so the two must
    agree. A made selection needs its ledger record (``"select"``).
    """
    empty = {name: [] for name in _NOISE_LISTS} | {"stopped": False, "selected_index": None, "selection_scores": None}
    if entry is None:
        entry = empty
    ckpt._check_keys(entry, set(empty), "noise_and_selection")
    adaptive = config.noise_schedule == "adaptive_norm"
    out: dict[str, Any] = {}
    for name in _NOISE_LISTS:
        values = entry[name]
        if not isinstance(values, list) or len(values) != (T if adaptive else 0):
            raise ValueError(f"Checkpoint field 'noise_and_selection.{name}' must hold {T if adaptive else 0} values.")
        out[name] = [ckpt.float_from_json(v, f"noise_and_selection.{name}") for v in values]
        if name != "noisy_norms" and not all(v > 0 for v in out[name]):
            raise ValueError(f"Checkpoint field 'noise_and_selection.{name}' must hold positive values.")
    recorded = recorded_mus(ledger, run_id)
    for t in range(len(out["step_mus"])):
        for name, part in (("norm_mus", "norm"), ("step_mus", "grad")):
            if out[name][t] not in recorded.get(release_key(t, part, ("norm", "grad")), []):
                raise ValueError(f"Checkpoint field 'noise_and_selection.{name}' disagrees with the ledger at step {t}.")
    stopped, selected, scores = entry["stopped"], entry["selected_index"], entry["selection_scores"]
    if not isinstance(stopped, bool) or (stopped and not adaptive):
        raise ValueError("Checkpoint field 'noise_and_selection.stopped' must be a bool (True only with adaptive_norm).")
    evaluated = config.selection in EVALUATED_SELECTIONS
    if selected is not None and (not evaluated or not ckpt._is_int(selected) or not 0 <= selected <= T
                                 or SELECTION_KEY not in recorded):
        raise ValueError(f"Checkpoint field 'noise_and_selection.selected_index' must be None or an index in [0, {T}] "
                         "of a recorded evaluated selection.")
    if (scores is not None) != (selected is not None and config.selection == "noisy_loss"):
        raise ValueError("Checkpoint field 'noise_and_selection.selection_scores' must be given exactly for a made noisy_loss selection.")
    out["stopped"], out["selected_index"] = stopped, selected
    out["selection_scores"] = None if scores is None else ckpt.tensor_from_json(scores, "noise_and_selection.selection_scores", (T + 1,))
    return out


def recorded_mus(ledger: PrivacyLedger, run_id: str) -> dict[str, list[float]]:
    r"""The μ of every validation record of ``run_id``, by key (a key recorded twice, a retried
    release, has two values)."""
    found: dict[str, list[float]] = {}
    for record in ledger.validation_records(run_id):
        found.setdefault(record.key, []).append(getattr(record.event, "mu", math.nan))
    return found


def check_ledger_covers_steps(config: DPGIBOConfig, ledger: PrivacyLedger, run_id: str, T: int, n: int | None) -> None:
    r"""``ValueError`` unless the checkpoint's ledger records every release of the ``T`` steps
    the run has taken: the gradient of each step at the config's ``μ_g/√T`` (the fixed
    schedule), the clip count or the preconditioner where the config releases one, the norm
    and gradient of an adaptive step (their μ are checked against the noise lists). A state
    whose ledger lost records it had, however consistently edited, is refused here."""
    from botorch_dp.optim.config import split_privacy_mu  # the config's own split of μ

    if T == 0 or config.unsafe_allow_sensitive_fitting and math.isinf(config.privacy_mu):
        return
    recorded = recorded_mus(ledger, run_id)
    adaptive = config.noise_schedule == "adaptive_norm"
    parts = ["norm", "grad"] if adaptive else ["grad"]
    if config.clip_bound == "adaptive":
        parts.append("clip")
    mu_g, mu_h = split_privacy_mu(config)
    if mu_h is not None:
        parts.append("precond")
    grad_mu = None if adaptive else mu_g / math.sqrt(config.num_iterations)
    for t in range(T):
        for part in parts:
            key = release_key(t, part, parts)
            if key not in recorded:
                raise ValueError(
                    f"Checkpoint field 'ledger' lacks the release {key!r} of run {run_id!r}: the run has taken {T} "
                    "steps, so its ledger must record each of them. The checkpoint is inconsistent (edited or "
                    "damaged); it is refused."
                )
            if part == "grad" and grad_mu is not None and not any(math.isclose(v, grad_mu, rel_tol=1e-12)
                                                                   for v in recorded[key]):
                raise ValueError(f"Checkpoint field 'ledger': release {key!r} of run {run_id!r} was not charged "
                                 f"mu={grad_mu:.6g}, the config's per-step mu; the checkpoint is refused.")


def resume_config(
    state: dict[str, Any], config: DPGIBOConfig | None, ledger: PrivacyLedger | None
) -> tuple[DPGIBOConfig, float | None]:
    r"""The config a resumed run continues with, and its (possibly tightened) budget.

    Without ``config`` it is rebuilt from the checkpoint; with one, every field that affects
    privacy or the algorithm must equal the stored one (``check_same_run``). A budget on
    ``config`` or ``ledger`` may only tighten the stored one.
    """
    meta = _with_added_meta(state["meta"])
    ckpt._check_keys(meta, META_KEYS, "state")
    stored = config_from_json(meta["config"], state["gp"], meta["kernel"], rebuild=config is None)
    stored_budget = budget_of_ledger_state(meta["ledger"])
    budgets = [] if config is None else [config.privacy_budget_mu]
    if ledger is not None:
        budgets.append(ledger.validation_mu_budget)
    for budget in budgets:
        if budget is not None and stored_budget is not None and budget > stored_budget:
            raise ValueError(
                f"privacy_budget_mu={budget!r} on resume is looser than the checkpoint's budget "
                f"{stored_budget!r}; a budget can only be tightened on resume."
            )
    budget = min([b for b in [stored_budget, *budgets] if b is not None], default=None)
    if config is None:
        config = stored
    else:
        check_same_run(meta, config)
    return config, budget


def encode_diagnostics(diagnostics: list[ReleaseDiagnostics]) -> list[dict[str, Any]]:
    r"""The NON-PRIVATE diagnostics as exact JSON (checkpoint only)."""
    return [
        {
            "unnoised_gradient": ckpt.tensor_to_json(dg.unnoised_gradient),
            "clip_fraction": float(dg.clip_fraction).hex(),
            "noise_norm": float(dg.noise_norm).hex(),
        }
        for dg in diagnostics
    ]


# ---------------------------------------------------------------- DPGIBO state (its private companion)
#: Attributes that ``ask``/``tell`` replace (never mutate in place), restored when they fail.
_MUTABLE = (
    "iteration", "_iterates", "_X", "_Y_blocks", "_gp", "_pending", "_batch_sizes", "_traces",
    "_released", "_diag", "_mechanism", "_committed",
    "_step_mus", "_noise_stds", "_noisy_norms", "_norm_mus", "_stopped", "_selected", "_selection_scores",
    "_subspace", "_clip_bounds", "_clip_counts", "_partitioned_users",
)


def snapshot(opt: DPGIBO) -> dict[str, Any]:
    r"""What ``ask``/``tell`` may change, to restore it exactly when they fail."""
    return {
        "attrs": {k: getattr(opt, k) for k in _MUTABLE},
        "theta": opt.theta.clone(),
        "optimizer": copy.deepcopy(opt._optimizer.state_dict()),
        "noise_gen": None if opt._noise_gen is None else opt._noise_gen.get_state(),
        "search_gen": opt._search_gen.get_state(),
        "kernel": copy.deepcopy(opt.kernel.state_dict()) if opt.config.hyperparameter_fit is not None else None,
    }


def restore(opt: DPGIBO, saved: dict[str, Any]) -> None:
    for k, v in saved["attrs"].items():
        setattr(opt, k, v)
    opt.theta = saved["theta"]
    opt._optimizer = make_step_optimizer(
        opt.theta, opt.config.step_rule, opt.config.step_size, preconditioner=opt.config.preconditioner
    )
    opt._optimizer.load_state_dict(saved["optimizer"])
    if saved["noise_gen"] is not None:
        opt._noise_gen.set_state(saved["noise_gen"])
    opt._search_gen.set_state(saved["search_gen"])
    if saved["kernel"] is not None:
        opt.kernel.load_state_dict(saved["kernel"])


def encode_state(opt: DPGIBO) -> dict[str, Any]:
    r"""Full state as written to the checkpoint (SENSITIVE): ``meta`` (JSON-able: public
    state, config, ledger, generator states, run id), ``gp`` (``X``, the Cholesky factor,
    the kernel's tensors) and ``loss_blocks`` (the per-batch per-user losses)."""
    config_json = opt._config_json if opt._config_json is not None else config_to_json(opt.config)
    fingerprint = opt._kernel_fingerprint or kernel_fingerprint(opt.kernel)
    meta = {
        "format": ckpt.FORMAT,
        "schema_version": ckpt.SCHEMA_VERSION,
        "version": STATE_VERSION,
        "run_id": opt.run_id,
        "config": config_json,
        "config_fingerprint": json_fingerprint(config_json),
        "kernel": {
            "spec": kernel_spec(opt.kernel),
            "fingerprint": fingerprint,
            "noise_variance": float(opt.noise_variance).hex(),
            "standardize": opt._standardize,
        },
        "iteration": opt.iteration,
        "theta": ckpt.tensor_to_json(opt.theta),
        "iterates": ckpt.tensor_to_json(torch.stack(opt._iterates)),
        "pending": None if opt._pending is None else ckpt.tensor_to_json(opt._pending),
        "batch_sizes": list(opt._batch_sizes),
        "traces": [float(t).hex() for t in opt._traces],
        "released": ckpt.tensor_to_json(released_matrix(opt)),
        "diagnostics": encode_diagnostics(opt._diag),
        "step_optimizer": encode_value(opt._optimizer.state_dict()),
        "ledger": opt.ledger.state_dict(),
        "noise_generator": ckpt.generator_to_json(opt._noise_gen),
        "search_generator": ckpt.generator_to_json(opt._search_gen),
        "noise_and_selection": encode_noise_and_selection(opt),
        "subspace": opt._subspace.to_json(),
        "adaptive_clip": encode_clip_state(opt._clip_bounds, opt._clip_counts) if opt.config.clip_bound == "adaptive" else None,
        "partitioned_users": opt._partitioned_users,
    }
    gp = {"X": opt._X, "L": opt._gp.L}  # the factor is restored as is: refactorizing changes bits
    gp.update({f"kernel.{k}": v.to(torch.float64) for k, v in kernel_tensors(opt.kernel).items()})
    return {"meta": meta, "gp": gp, "loss_blocks": list(opt._Y_blocks)}


def released_matrix(opt: DPGIBO) -> Tensor:
    r"""The ``t x d`` released gradients of the run so far (public)."""
    return torch.stack(opt._released) if opt._released else torch.empty(0, opt.dim, dtype=torch.float64)


def apply_state(opt: DPGIBO, state: dict[str, Any]) -> None:
    r"""Restore a state produced by ``state_dict`` (e.g. read by ``checkpoint.load_state``).

    Every field is checked (type, shape, finiteness, consistency with the config and
    with the other fields); a ``ValueError`` names the first field that is wrong, and
    nothing is changed then.
    """
    checked = check_state(
        state, config=opt.config, kernel=opt.kernel, has_noise_generator=opt._noise_gen is not None
    )
    meta, X, L, blocks = checked["meta"], checked["X"], checked["L"], checked["blocks"]
    T, theta, iterates, pending = checked["T"], checked["theta"], checked["iterates"], checked["pending"]
    sizes, traces, released, diag = checked["sizes"], checked["traces"], checked["released"], checked["diag"]
    kernel_tensors_, optimizer, ledger_state = checked["kernel_tensors"], checked["optimizer"], checked["ledger_state"]
    noise_gen, search_gen, n = checked["noise_gen"], checked["search_gen"], checked["n"]
    adaptive = checked["noise_and_selection"]
    # all checked: assign
    opt.run_id = meta["run_id"]
    opt.iteration, opt.theta, opt._iterates, opt._pending = T, theta, list(iterates), pending
    opt._batch_sizes, opt._traces, opt._released, opt._diag = list(sizes), traces, list(released), diag
    opt._X, opt._Y_blocks = X, blocks
    opt.kernel.load_state_dict({**opt.kernel.state_dict(), **kernel_tensors_})
    opt._optimizer = optimizer
    opt.ledger.load_state_dict(ledger_state)
    if noise_gen is not None:
        opt._noise_gen.set_state(noise_gen)
    opt._search_gen.set_state(search_gen)
    opt._gp = GradientGP.from_factor(X, L, opt.kernel, opt.noise_variance, jitter=opt.config.jitter)
    opt._clip_bounds, opt._clip_counts = checked["adaptive_clip"]  # before the mechanism: it clips at B_t
    opt._mechanism = None if n is None else opt._make_mechanism(n)
    opt._step_mus, opt._noise_stds = adaptive["step_mus"], adaptive["noise_stds"]
    opt._noisy_norms, opt._norm_mus = adaptive["noisy_norms"], adaptive["norm_mus"]
    opt._stopped, opt._selected = adaptive["stopped"], adaptive["selected_index"]
    opt._selection_scores = adaptive["selection_scores"]
    opt._subspace = checked["subspace"]
    opt._partitioned_users = checked["partitioned_users"]


def resume_run(
    cls: type[DPGIBO], checkpoint_dir: str | os.PathLike, config: DPGIBOConfig | None, ledger: PrivacyLedger | None
) -> DPGIBO:
    r"""``DPGIBO.resume``: load and check the checkpoint, then rebuild the run in its state."""
    state = load_state(checkpoint_dir)
    meta = state["meta"]
    config, budget = resume_config(state, config, ledger)
    init_config = config if ledger is None else dataclasses.replace(config, privacy_budget_mu=None)
    with warnings.catch_warnings():
        if config.unsafe_allow_sensitive_fitting:
            warnings.simplefilter("ignore")  # already warned when the run started
        opt = cls(init_config, checkpoint_dir=checkpoint_dir, ledger=ledger, _resuming=True)  # its own checkpoint
    opt.config = dataclasses.replace(config, privacy_budget_mu=budget) if ledger is None else config
    if opt._config_json is not None and ledger is None:
        opt._config_json = config_to_json(opt.config)
    opt._kernel_fingerprint = meta["kernel"]["fingerprint"]
    opt.load_state_dict(state)  # merges the saved ledger into opt.ledger (never replaces it)
    opt.ledger.validation_mu_budget = budget
    opt.ledger.cancel_reservations(opt.run_id)  # holds left by a process that died inside a step
    opt._committed = committed_records(checkpoint_dir)
    return opt


@contextlib.contextmanager
def rollback_on_error(opt: DPGIBO) -> Iterator[None]:
    r"""Run the block; if it raises, put back everything ``ask``/``tell`` may have changed in
    the RUN (attributes, θ, step-rule state, generators, kernel) and re-raise. The ledger is
    never rolled back: a release whose noise was drawn before the failure stays recorded,
    and a retry that draws again is charged again."""
    saved = snapshot(opt)
    try:
        yield
    except BaseException:
        restore(opt, saved)
        raise
