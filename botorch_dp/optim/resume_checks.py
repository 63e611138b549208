r"""The releases a resumed run has made, checked against its ledger: the public state of the
adaptive noise schedule and of the evaluated selection (Menart et al.), encoded and checked
against the config and the ledger's records, and the ledger's coverage of every step taken.
``run_state`` uses these when it encodes and checks a checkpoint's state."""

from __future__ import annotations

import math
from typing import Any

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.optim.config import DPGIBOConfig
from botorch_dp.optim.options import NoisyLoss, resolved_mu
from botorch_dp.optim.options.budget import recorded_mus
from botorch_dp.optim.options.selection import SELECTION_KEY
from botorch_dp.optim.state import Run
from botorch_dp.privacy.ledger import PrivacyLedger, release_key

__all__ = ["check_ledger_covers_steps", "check_noise_and_selection", "encode_noise_and_selection", "recorded_mus"]

#: The per-step lists of a ``NoiseState``, in its field order (a checkpoint stores them by these names).
NOISE_LISTS = ("step_mus", "noise_stds", "noisy_norms", "norm_mus")


def _stores_steps(noise: Any) -> bool:
    r"""Whether the checkpoint keeps the schedule's per-step values: a schedule that releases
    noisy norms (``"noisy_norms"``) chooses each step's noise from them, so its values do not
    follow from the config."""
    return "noisy_norms" in noise.provides


def encode_noise_and_selection(opt: Run) -> dict[str, Any]:
    r"""Menart et al.'s public state as exact JSON: the adaptive schedule's per-step values (none
    for the fixed schedule, whose values follow from the config), whether its filter stopped
    the steps, and the evaluated selection's choice (and scores)."""
    s = opt.state
    per_step = _stores_steps(opt.options.noise)
    return {
        **{name: [float(v).hex() for v in getattr(s.noise, name)] if per_step else [] for name in NOISE_LISTS},
        "stopped": s.noise.stopped,
        "selected_index": s.selected,
        "selection_scores": None if s.selection_scores is None else ckpt.tensor_to_json(s.selection_scores),
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
    empty: dict[str, Any] = {name: [] for name in NOISE_LISTS} | {
        "stopped": False,
        "selected_index": None,
        "selection_scores": None,
    }
    if entry is None:
        entry = empty
    ckpt.check_keys(entry, set(empty), "noise_and_selection")
    adaptive = _stores_steps(config.noise)
    out: dict[str, Any] = {}
    for name in NOISE_LISTS:
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
                raise ValueError(
                    f"Checkpoint field 'noise_and_selection.{name}' disagrees with the ledger at step {t}."
                )
    stopped, selected, scores = entry["stopped"], entry["selected_index"], entry["selection_scores"]
    if not isinstance(stopped, bool) or (stopped and not adaptive):
        raise ValueError(
            "Checkpoint field 'noise_and_selection.stopped' must be a bool (True only with adaptive_norm)."
        )
    evaluated = config.selection.evaluated
    if selected is not None and (
        not evaluated or not ckpt.is_int(selected) or not 0 <= selected <= T or SELECTION_KEY not in recorded
    ):
        raise ValueError(
            f"Checkpoint field 'noise_and_selection.selected_index' must be None or an index in [0, {T}] "
            "of a recorded evaluated selection."
        )
    if (scores is not None) != (selected is not None and isinstance(config.selection, NoisyLoss)):
        raise ValueError(
            "Checkpoint field 'noise_and_selection.selection_scores' must be given exactly for a made "
            "noisy_loss selection."
        )
    out["stopped"], out["selected_index"] = stopped, selected
    out["selection_scores"] = (
        None if scores is None else ckpt.tensor_from_json(scores, "noise_and_selection.selection_scores", (T + 1,))
    )
    return out


def check_ledger_covers_steps(config: DPGIBOConfig, ledger: PrivacyLedger, run_id: str, T: int, n: int | None) -> None:
    r"""``ValueError`` unless the checkpoint's ledger records every release of the ``T`` steps
    the run has taken: the gradient of each step at the config's ``μ_g/√T`` (the fixed
    schedule), the clip count or the preconditioner where the config releases one, the norm
    and gradient of an adaptive step (their μ are checked against the noise lists). A state
    whose ledger lost records it had, however consistently edited, is refused here."""

    if T == 0 or config.unsafe_allow_sensitive_fitting and math.isinf(resolved_mu(config.privacy_mu)):
        return
    recorded = recorded_mus(ledger, run_id)
    adaptive = _stores_steps(config.noise)
    parts = ["norm", "grad"] if adaptive else ["grad"]
    mu_g, mu_c, mu_h = config.mu_split.gradient_mu, config.mu_split.clip_mu, config.mu_split.precond_mu
    if mu_c is not None:
        parts.append("clip")
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
            if (
                part == "grad"
                and grad_mu is not None
                and not any(math.isclose(v, grad_mu, rel_tol=1e-12) for v in recorded[key])
            ):
                raise ValueError(
                    f"Checkpoint field 'ledger': release {key!r} of run {run_id!r} was not charged "
                    f"mu={grad_mu:.6g}, the config's per-step mu; the checkpoint is refused."
                )
