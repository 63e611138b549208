r"""A DP-GIBO run's state as its checkpoint stores it: ``encode_state``/``apply_state`` (every
field checked against the config and each other on load) and ``resume_run``. The checks of
the releases against the checkpoint's ledger are in ``optim.resume_checks``; the config's own
encoding and comparison are in ``optim.stored_config``.

Nothing here unpickles: kernels are rebuilt from the allow-list in ``checkpoint`` only."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.checkpoint import (
    json_fingerprint,
    kernel_fingerprint,
    kernel_spec,
    kernel_tensors,
    load_state,
    save_state,
)
from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.options import (
    FAMILY_PROTOCOLS,
    ResumeContext,
    RunRecords,
    resolved_mu,
    restore_state_of,
    state_json_of,
    state_keepers,
)
from botorch_dp.optim.options.noise import NOISE_LISTS
from botorch_dp.optim.options.records import compact
from botorch_dp.optim.resume_checks import check_ledger_covers_steps, recorded_mus, step_parts
from botorch_dp.optim.state import Run, RunState
from botorch_dp.optim.stored_config import check_same_run, config_from_json, config_to_json, decode_value, encode_value
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import ReleaseDiagnostics
from botorch_dp.storage.lock import CheckpointLock

__all__ = [
    "META_KEYS",
    "STATE_VERSION",
    "apply_state",
    "budget_of_ledger_state",
    "committed_records",
    "encode_state",
    "migrate_state_meta",
    "resume_config",
    "resume_run",
]

#: Version of ``DPGIBO.state_dict`` (3: JSON + safetensors, per-batch loss blocks, run id; 4: each
#: strategy's run state under ``strategies``, by family). Version 3 is read through ``migrate_state_meta``.
STATE_VERSION = 4


META_KEYS = {
    "format",
    "schema_version",
    "version",
    "run_id",
    "config",
    "config_fingerprint",
    "kernel",
    "iteration",
    "theta",
    "iterates",
    "pending",
    "batch_sizes",
    "traces",
    "released",
    "diagnostics",
    "step_optimizer",
    "ledger",
    "noise_generator",
    "search_generator",
    "strategies",
    "partitioned_users",
}
#: Version 3's per-family keys and the keys each held (``None``: written before the key existed, issues
#: 15 and 16: the fixed schedule, no selection, no subspace or private preconditioner, a fixed clip bound).
_VERSION_3_KEYS = {
    "noise_and_selection": {*NOISE_LISTS, "stopped", "selected_index", "selection_scores"},
    "subspace": {"bases", "coordinates", "preconditioners", "preconditioner_noise_stds", "columns"},
    "adaptive_clip": {"bounds", "counts"},
}
#: Where version 4 keeps what version 3's keys held: the family and the keys of its payload.
_VERSION_3_FAMILIES = {
    "clip": ("adaptive_clip", ("bounds", "counts")),
    "noise": ("noise_and_selection", (*NOISE_LISTS, "stopped")),
    "projection": ("subspace", ("bases", "coordinates")),
    "step_rule": ("subspace", ("preconditioners", "preconditioner_noise_stds", "columns")),
    "selection": ("noise_and_selection", ("selected_index", "selection_scores")),
}


def migrate_state_meta(meta: Any) -> Any:
    r"""A checkpoint's ``meta`` of version 3 in version 4's layout (anything else as it is): the
    per-family keys ``adaptive_clip``, ``noise_and_selection`` and ``subspace`` (each checked to
    hold exactly its keys) become the families' payloads under ``strategies`` (empty values left
    out, as ``state_json`` writes them), and ``partitioned_users``, added in issue 17, is ``None``
    where it is missing. The payloads are then checked by each strategy's ``restore_state``."""
    if not isinstance(meta, dict) or meta.get("version") != 3:
        return meta
    old: dict[str, dict[str, Any]] = {}
    for key, keys in _VERSION_3_KEYS.items():
        value = meta.get(key)
        if value is not None:
            ckpt.check_keys(value, keys, key)
        old[key] = value or {}
    strategies: dict[str, dict[str, Any]] = {family: {} for family in FAMILY_PROTOCOLS}
    for family, (key, names) in _VERSION_3_FAMILIES.items():
        strategies[family] = compact({k: old[key][k] for k in names if k in old[key]})
    kept = {k: v for k, v in meta.items() if k not in _VERSION_3_KEYS}
    return {"partitioned_users": None, **kept, "version": STATE_VERSION, "strategies": strategies}


def committed_records(directory: str | os.PathLike) -> dict[str, Any]:
    r"""The file records of the checkpoint just loaded (so that they are not written again)."""
    raw = json.loads((Path(directory) / ckpt.STATE_FILE).read_text("utf-8"))
    return {"gp_file": raw["gp_file"], "loss_files": raw["loss_files"]}


def budget_of_ledger_state(ledger_state: Any) -> float | None:
    budget = ledger_state.get("validation_mu_budget") if isinstance(ledger_state, dict) else None
    return None if budget is None else float(budget)


_R = TypeVar("_R", bound=Run)  # the run class resume_run rebuilds


def resume_config(
    state: dict[str, Any], config: DPGIBOConfig | None, ledger: PrivacyLedger | None
) -> tuple[DPGIBOConfig, float | None]:
    r"""The config a resumed run continues with, and its (possibly tightened) budget.

    Without ``config`` it is rebuilt from the checkpoint; with one, every field that affects
    privacy or the algorithm must equal the stored one (``check_same_run``). A budget on
    ``config`` or ``ledger`` may only tighten the stored one.
    """
    meta = migrate_state_meta(state["meta"])
    ckpt.check_keys(meta, META_KEYS, "state")
    stored = config_from_json(meta["config"], state["gp"], meta["kernel"], rebuild=config is None)
    stored_budget = budget_of_ledger_state(meta["ledger"])
    budgets = [] if config is None else [config.validation_mu_budget]
    if ledger is not None:
        budgets.append(ledger.validation_mu_budget)
    for budget in budgets:
        if budget is not None and stored_budget is not None and budget > stored_budget:
            raise ValueError(
                f"validation_mu_budget={budget!r} on resume is looser than the checkpoint's budget "
                f"{stored_budget!r}; a budget can only be tightened on resume."
            )
    budget = min([b for b in [stored_budget, *budgets] if b is not None], default=None)
    if config is None:
        if stored is None:  # config_from_json rebuilds it whenever no config is given
            raise ValueError("The checkpoint's config was not rebuilt; pass the config to DPGIBO.resume.")
        config = stored
    else:
        check_same_run(meta, config)
    return config, budget


# ---------------------------------------------------------------- a run's RunState, encoded
def encode_state(opt: Run) -> dict[str, Any]:
    r"""Full state as written to the checkpoint (SENSITIVE): ``meta`` (JSON-able: public
    state, config, ledger, generator states, run id), ``gp`` (``X``, the Cholesky factor,
    the kernel's tensors) and ``loss_blocks`` (the per-batch per-user losses)."""
    s = opt.state
    records = s.records
    book = opt.checkpoint_book
    config_json = book.config_json if book.config_json is not None else config_to_json(opt.config)
    fingerprint = book.kernel_fingerprint or kernel_fingerprint(opt.kernel)
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
            "standardize": bool(getattr(opt.options.fitting, "standardize", False)),
        },
        "iteration": s.iteration,
        "theta": ckpt.tensor_to_json(s.theta),
        "iterates": ckpt.tensor_to_json(torch.stack(s.iterates)),
        "pending": None if s.pending is None else ckpt.tensor_to_json(s.pending),
        "batch_sizes": list(s.batch_sizes),
        "traces": [float(t).hex() for t in s.traces],
        "released": ckpt.tensor_to_json(s.released_matrix(opt.dim)),
        "diagnostics": [  # NON-PRIVATE, only when asked for
            {
                "unnoised_gradient": ckpt.tensor_to_json(dg.unnoised_gradient),
                "clip_fraction": float(dg.clip_fraction).hex(),
                "noise_norm": float(dg.noise_norm).hex(),
            }
            for dg in s.diagnostics
        ],
        "step_optimizer": encode_value(s.optimizer),
        "ledger": opt.ledger.state_dict(),
        "noise_generator": ckpt.generator_to_json(opt.generators.noise),
        "search_generator": ckpt.generator_to_json(opt.generators.search),
        "strategies": {family: state_json_of(keeper, records) for family, keeper in state_keepers(opt.options).items()},
        "partitioned_users": s.num_users if s.partitioned else None,
    }
    gp = {"X": s.X, "L": s.gp.L}  # the factor is restored as is: refactorizing changes bits
    gp.update({f"kernel.{k}": v.to(torch.float64) for k, v in kernel_tensors(opt.kernel).items()})
    return {"meta": meta, "gp": gp, "loss_blocks": s.blocks}


def restore_records(
    opt: Run, stored: Any, steps: int, num_users: int | None, ledger: PrivacyLedger, run_id: str
) -> RunRecords:
    r"""The strategies' records from the checkpoint's ``strategies`` field (one payload per family),
    each restored and checked by its strategy, in the families' order (the clip policy's bounds
    before the noise schedule that reads them, the projection's coordinates before the step rule's)."""
    ckpt.check_keys(stored, set(FAMILY_PROTOCOLS), "strategies")
    plan = opt.plan(num_users)
    context = ResumeContext(
        steps=steps,
        dim=opt.dim,
        num_users=num_users,
        plan=plan,
        recorded=recorded_mus(ledger, run_id),
        options=opt.options,
        step_parts=step_parts(opt.options, plan),
        run_id=run_id,
    )
    records = RunRecords()
    for family, keeper in state_keepers(opt.options).items():
        records = restore_state_of(keeper, family, stored[family], records, context)
    return records


def apply_state(opt: Run, state: dict[str, Any]) -> None:
    r"""Restore a state produced by ``state_dict`` (e.g. read by ``checkpoint.load_state``).

    Every field is checked (type, shape, finiteness, consistency with the config, with the
    other fields and with the ledger's records); a ``ValueError`` names the first field that is
    wrong, and nothing is changed then. The saved ledger is MERGED into ``opt.ledger``.
    """
    noise_gen, search_gen = opt.generators
    c = opt.config
    meta, gp, blocks = migrate_state_meta(state["meta"]), state["gp"], list(state["loss_blocks"])
    if meta.get("version") != STATE_VERSION:
        raise ValueError(f"Checkpoint state version {meta.get('version')!r}, expected {STATE_VERSION}.")
    ckpt.check_keys(meta, META_KEYS, "state")
    d, T = c.bounds.shape[1], meta["iteration"]
    if not ckpt.is_int(T) or not 0 <= T <= c.iteration_cap:
        raise ValueError(f"Checkpoint field 'iteration' must be an integer in [0, {c.iteration_cap}], got {T!r}.")
    if (
        not isinstance(meta["run_id"], str)
        or len(meta["run_id"]) != 32
        or not all(ch in "0123456789abcdef" for ch in meta["run_id"])
    ):
        raise ValueError("Checkpoint field 'run_id' must be a uuid4 hex string.")
    theta = ckpt.tensor_from_json(meta["theta"], "theta", (d,))
    iterates = ckpt.tensor_from_json(meta["iterates"], "iterates", (T + 1, d))
    if not torch.equal(iterates[-1], theta):
        raise ValueError("Checkpoint fields 'theta' and 'iterates' disagree.")
    pending = None if meta["pending"] is None else ckpt.tensor_from_json(meta["pending"], "pending", (None, d))
    sizes = meta["batch_sizes"]
    if not isinstance(sizes, list) or len(sizes) != T or not all(ckpt.is_int(b) and b >= 0 for b in sizes):
        raise ValueError(f"Checkpoint field 'batch_sizes' must be {T} integers >= 0.")
    partitioned = meta["partitioned_users"]
    if partitioned is not None and (not ckpt.is_int(partitioned) or partitioned < 2 or blocks):
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
        ckpt.check_keys(entry, {"unnoised_gradient", "clip_fraction", "noise_norm"}, "diagnostics")
        diag.append(
            ReleaseDiagnostics(
                unnoised_gradient=ckpt.tensor_from_json(entry["unnoised_gradient"], "diagnostics", (d,)),
                clip_fraction=ckpt.float_from_json(entry["clip_fraction"], "diagnostics"),
                noise_norm=ckpt.float_from_json(entry["noise_norm"], "diagnostics"),
            )
        )
    X, L = gp["X"], gp["L"]
    if X.shape[1:] != (d,):
        raise ValueError(f"Checkpoint tensor 'X' must have {d} columns.")
    stored_kernel_tensors = {k.removeprefix("kernel."): v for k, v in gp.items() if k.startswith("kernel.")}
    if set(stored_kernel_tensors) != set(kernel_tensors(opt.kernel)):
        raise ValueError("Checkpoint kernel tensors do not match the kernel's hyperparameters.")
    noise_gen_state = ckpt.generator_state_from_json(meta["noise_generator"], "noise_generator")
    search_gen_state = ckpt.generator_state_from_json(meta["search_generator"], "search_generator")
    if (noise_gen_state is None) != (noise_gen is None) or search_gen_state is None:
        raise ValueError(
            "Checkpoint field 'noise_generator'/'search_generator' does not match the config's generators."
        )
    optimizer = c.step_rule.make_optimizer(theta, c.step_size)
    try:
        optimizer.load_state_dict(decode_value(meta["step_optimizer"], "step_optimizer", optimizer_state=True))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"Checkpoint field 'step_optimizer' is not a {c.step_rule.name} state: {err}") from None
    ledger_state = meta["ledger"]
    ledger = PrivacyLedger.from_state_dict(ledger_state)  # validates before anything changes
    n = blocks[0].shape[1] if blocks else partitioned
    if n is not None and resolved_mu(c.privacy_mu) < math.inf and n == 0:
        raise ValueError("Checkpoint loss files hold no users.")
    check_ledger_covers_steps(c, ledger, meta["run_id"], T, n)
    records = restore_records(opt, meta["strategies"], T, n, ledger, meta["run_id"])
    users = InMemoryUsers(tuple(blocks), c.user_chunk_size, c.nonfinite_losses) if blocks else None
    # all checked: assign
    opt.kernel.load_state_dict({**opt.kernel.state_dict(), **stored_kernel_tensors})
    gp_model = GradientGP.from_factor(X, L, opt.kernel, opt.noise_variance, jitter=c.jitter)
    opt.step_optimizer = optimizer
    opt.state = RunState(
        theta=theta,
        iterates=tuple(iterates),
        X=X,
        gp=gp_model,
        optimizer=copy.deepcopy(optimizer.state_dict()),
        users=users,
        num_users=n,
        partitioned=partitioned is not None,
        pending=pending,
        batch_sizes=tuple(sizes),
        traces=tuple(traces),
        released=tuple(released),
        diagnostics=tuple(diag),
        records=records,
    )
    opt.run_id = meta["run_id"]
    opt.ledger.load_state_dict(ledger_state)
    if noise_gen_state is not None and noise_gen is not None:  # checked above
        noise_gen.set_state(noise_gen_state)
    search_gen.set_state(search_gen_state)


def resume_run(
    cls: Callable[..., _R], checkpoint_dir: str | os.PathLike, config: DPGIBOConfig | None, ledger: PrivacyLedger | None
) -> _R:
    r"""``DPGIBO.resume``: own the directory, load and check the checkpoint, then rebuild the run in its
    state (the directory given up again if anything fails)."""
    lock = CheckpointLock(checkpoint_dir, "DPGIBO")  # nothing is read there before it is ours
    try:
        return _resume_owned(cls, checkpoint_dir, config, ledger, lock)
    except BaseException:
        lock.release()
        raise


def _resume_owned(
    cls: Callable[..., _R],
    checkpoint_dir: str | os.PathLike,
    config: DPGIBOConfig | None,
    ledger: PrivacyLedger | None,
    lock: CheckpointLock,
) -> _R:
    state = load_state(checkpoint_dir)
    meta = state["meta"]
    config, budget = resume_config(state, config, ledger)
    init_config = config if ledger is None else dataclasses.replace(config, validation_mu_budget=None)
    with warnings.catch_warnings():
        if config.unsafe_allow_sensitive_fitting:
            warnings.simplefilter("ignore")  # already warned when the run started
        opt = cls(init_config, checkpoint_dir=checkpoint_dir, ledger=ledger, _resuming=lock)  # its own checkpoint
    opt.config = dataclasses.replace(config, validation_mu_budget=budget) if ledger is None else config
    opt.options = opt.config.options
    book = opt.checkpoint_book
    if book.config_json is not None and ledger is None:
        book.config_json = config_to_json(opt.config)
    book.kernel_fingerprint = meta["kernel"]["fingerprint"]
    opt.load_state_dict(state)  # merges the saved ledger into opt.ledger (never replaces it)
    opt.ledger.validation_mu_budget = budget
    opt.ledger.settle_run(opt.run_id)  # holds whose process is gone dropped; refused while one is live
    book.committed = committed_records(checkpoint_dir)
    if budget != budget_of_ledger_state(meta["ledger"]):  # a budget tightened on resume is durable at once
        book.committed = save_state(opt.checkpoint_dir, opt.state_dict(), book.committed)  # the run owns the directory
    return opt
