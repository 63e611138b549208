r"""Private choice of the returned iterate (Menart et al., spec B2), and the budget split it needs.

- ``"last"``: ``θ_T``, as in Sopa et al.. Free.
- ``"min_noisy_norm"``: ``θ_{t*}``, ``t* = argmin_t N_t`` over the noisy gradient norms that
  ``noise_schedule="adaptive_norm"`` releases anyway. Post-processing of released values:
  free, and refused with the ``"fixed"`` schedule (which releases no norms).
- ``"exponential"``: the exponential mechanism on the iterates' mean losses clamped to
  ``[0, C]`` (sensitivity ``C/n``), ``P(j) ∝ exp(−ε u_j/(2Δ))``, sampled by Gumbel-max
  (``privacy.mechanisms.ExponentialLossSelection``). Pure ``ε``-DP, charged on the ledger
  as ``μ = 2Φ⁻¹(e^ε/(1 + e^ε))``.
- ``"noisy_loss"``: Gaussian noisy mean losses of all iterates, the smallest wins
  (``privacy.mechanisms.NoisyLossSelection``), ``μ_sel``-GDP in total.

The two evaluated rules need the per-user losses at the iterates ``θ_0..θ_T``: one extra
batch of ``T + 1`` evaluations after the last step. Their budget is taken from the run's
total ``μ`` explicitly: the selection gets ``μ_sel`` (from ``selection_epsilon`` or
``selection_mu``) and the gradient steps ``μ_steps = √(μ² − μ_sel²)``, so that the whole
run, steps and selection, is ``μ``-GDP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

import torch
from torch import Tensor

from botorch_dp.privacy.analysis.gdp import pure_dp_to_gdp_mu
from botorch_dp.privacy.checks import check_positive, did_you_mean
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger, PureDP
from botorch_dp.privacy.mechanisms import (
    ExponentialLossSelection,
    NoisyLossSelection,
    NonfiniteLosses,
    SelectionRelease,
)

__all__ = [
    "EVALUATED_SELECTIONS",
    "SELECTIONS",
    "SELECTION_KEY",
    "Selection",
    "check_selection",
    "check_selection_fields",
    "min_noisy_norm_index",
    "release_selection",
    "selection_event",
    "selection_mechanism",
    "selection_mu",
    "selection_mu_of",
    "steps_mu",
]

Selection = Literal["last", "min_noisy_norm", "exponential", "noisy_loss"]
SELECTIONS: tuple[str, ...] = get_args(Selection)
#: The rules that evaluate the iterates on the validation users (and spend budget).
EVALUATED_SELECTIONS: tuple[str, ...] = ("exponential", "noisy_loss")
#: The ledger key of the selection release within a run.
SELECTION_KEY = "select"


def check_selection(
    selection: str,
    *,
    noise_schedule: str,
    privacy_mu: float,
    selection_epsilon: float | None,
    selection_mu: float | None,
    loss_clip: float | None,
) -> tuple[float | None, float | None, float | None]:
    r"""Refuse an inconsistent choice of the returned iterate, naming the argument.

    Args:
        selection: One of ``SELECTIONS``.
        noise_schedule: ``"fixed"`` or ``"adaptive_norm"`` (``"min_noisy_norm"`` needs the latter).
        privacy_mu: The run's total ``μ``; the evaluated rules need it finite and larger
            than their own charge.
        selection_epsilon: ``ε_sel`` of ``"exponential"`` (required there, refused elsewhere).
        selection_mu: ``μ_sel`` of ``"noisy_loss"`` (required there, refused elsewhere).
        loss_clip: ``C`` of both evaluated rules (required there, refused elsewhere).

    Returns:
        ``(selection_epsilon, selection_mu, loss_clip)`` as floats (or ``None``).
    """
    checked = check_selection_fields(
        selection, selection_epsilon=selection_epsilon, selection_mu=selection_mu, loss_clip=loss_clip
    )
    if selection == "min_noisy_norm" and noise_schedule != "adaptive_norm":
        raise ValueError(
            "selection='min_noisy_norm' picks the iterate with the smallest released noisy "
            "gradient norm; only noise_schedule='adaptive_norm' releases those norms."
        )
    if selection in EVALUATED_SELECTIONS:
        charge = selection_mu_of(selection, checked[0], checked[1])
        if not math.isfinite(privacy_mu):
            raise ValueError(f"selection={selection!r} spends budget; it needs a finite privacy_mu (μ).")
        if not charge < privacy_mu:
            raise ValueError(
                f"The selection's charge μ_sel = {charge:.6g} must be below privacy_mu (μ) = {privacy_mu:.6g}: "
                "the gradient steps get √(μ² − μ_sel²)."
            )
    return checked


def check_selection_fields(
    selection: str, *, selection_epsilon: float | None, selection_mu: float | None, loss_clip: float | None
) -> tuple[float | None, float | None, float | None]:
    r"""A known ``selection`` with exactly the parameters it uses (``ValueError`` naming the
    argument); returns ``(selection_epsilon, selection_mu, loss_clip)`` as floats (or ``None``).
    What it needs of the other options is the selection strategy's to declare
    (``optim.options.selection``)."""
    if selection not in SELECTIONS:
        raise ValueError(
            f"selection must be one of {SELECTIONS}, got {selection!r}.{did_you_mean(selection, SELECTIONS)}"
        )
    users = {"selection_epsilon": ("exponential",), "selection_mu": ("noisy_loss",), "loss_clip": EVALUATED_SELECTIONS}
    given = {"selection_epsilon": selection_epsilon, "selection_mu": selection_mu, "loss_clip": loss_clip}
    for name, used_by in users.items():
        if selection in used_by and given[name] is None:
            raise ValueError(f"selection={selection!r} needs {name}.")
        if selection not in used_by and given[name] is not None:
            raise ValueError(f"{name} is only used by selection in {used_by}, not by selection={selection!r}.")
    epsilon, mu, clip = (
        None if value is None else check_positive(value, name, allow_inf=False) for name, value in given.items()
    )
    return epsilon, mu, clip


def _needed(value: float | None, name: str, selection: str) -> float:
    r"""``value``, which ``selection`` uses (``ValueError`` naming ``name`` if it is ``None``)."""
    if value is None:
        raise ValueError(f"selection={selection!r} needs {name}, got None.")
    return value


def selection_mu_of(selection: str, selection_epsilon: float | None, selection_mu: float | None) -> float:
    r"""The GDP charge ``μ_sel`` of a selection rule: ``2Φ⁻¹(e^ε/(1 + e^ε))`` for
    ``"exponential"``, ``selection_mu`` for ``"noisy_loss"``, 0 for the free rules."""
    if selection == "exponential":
        return pure_dp_to_gdp_mu(_needed(selection_epsilon, "selection_epsilon", selection))
    if selection == "noisy_loss":
        return float(_needed(selection_mu, "selection_mu", selection))
    return 0.0


def selection_mu(config: object) -> float:
    r"""``μ_sel`` of a ``DPGIBOConfig`` (its selection strategy's charge)."""
    return float(config.selection.charge)  # type: ignore[attr-defined]


def steps_mu(total_mu: float, selection_charge: float) -> float:
    r"""The gradient steps' share ``√(μ² − μ_sel²)`` (exactly ``μ`` when ``μ_sel = 0``)."""
    if selection_charge == 0.0 or math.isinf(total_mu):
        return total_mu
    return math.sqrt(math.fsum([total_mu * total_mu, -(selection_charge * selection_charge)]))


def min_noisy_norm_index(noisy_norms: Sequence[float]) -> int:
    r"""``argmin_t N_t`` (the first on ties): the iterate ``θ_{t*}`` whose released noisy
    gradient norm is smallest. Post-processing, free.

    Args:
        noisy_norms: The released ``N_0, ..., N_{T−1}`` (``N_t`` at ``θ_t``).
    """
    if len(noisy_norms) == 0:
        raise ValueError("No noisy norms were released yet.")
    return int(torch.argmin(torch.tensor(list(noisy_norms), dtype=torch.float64)))


def selection_mechanism(
    selection: str,
    *,
    selection_epsilon: float | None,
    selection_mu: float | None,
    loss_clip: float | None,
    generator: torch.Generator | None,
) -> ExponentialLossSelection | NoisyLossSelection:
    r"""The mechanism of an evaluated selection rule (``"exponential"`` or ``"noisy_loss"``)."""
    if selection == "exponential":
        return ExponentialLossSelection(
            epsilon=_needed(selection_epsilon, "selection_epsilon", selection),
            loss_clip=_needed(loss_clip, "loss_clip", selection),
            generator=generator,
        )
    if selection == "noisy_loss":
        return NoisyLossSelection(
            total_mu=_needed(selection_mu, "selection_mu", selection),
            loss_clip=_needed(loss_clip, "loss_clip", selection),
            generator=generator,
        )
    raise ValueError(f"selection={selection!r} needs no mechanism.")


def selection_event(selection: str, selection_epsilon: float | None, selection_mu: float | None) -> PureDP | Gaussian:
    r"""What an evaluated selection spends: ``PureDP(ε)`` (exponential) or ``Gaussian(μ)`` (noisy losses)."""
    if selection == "exponential":
        return PureDP(_needed(selection_epsilon, "selection_epsilon", selection))
    return Gaussian(_needed(selection_mu, "selection_mu", selection))


def release_selection(
    selection: str,
    losses: Tensor,
    *,
    selection_epsilon: float | None,
    selection_mu: float | None,
    loss_clip: float | None,
    generator: torch.Generator | None,
    ledger: PrivacyLedger | None = None,
    run_id: str | None = None,
    nonfinite: NonfiniteLosses = "refuse",
) -> SelectionRelease:
    r"""The evaluated selection over ``q`` candidates: with a ``ledger``, its cost is charged
    (``PrivacyLedger.charge``) before anything is drawn and recorded under ``(run_id, "select")``
    just before the draw.

    Args:
        selection: ``"exponential"`` or ``"noisy_loss"``.
        losses: The ``q x n`` per-user losses of the candidates (sensitive).
        selection_epsilon, selection_mu, loss_clip: As in ``check_selection``.
        generator: Source of the randomness (``None``: OS entropy).
        ledger: Optional ledger to check and record in.
        run_id: The run's ledger id (with ``ledger``).
        nonfinite: ``"refuse"`` or ``"zero_user"`` (see ``privacy.mechanisms``).

    Returns:
        The ``SelectionRelease`` (index, cost, and the noisy scores of ``"noisy_loss"``).
    """
    mechanism = selection_mechanism(
        selection,
        selection_epsilon=selection_epsilon,
        selection_mu=selection_mu,
        loss_clip=loss_clip,
        generator=generator,
    )
    if ledger is None:
        return mechanism.release(losses, nonfinite=nonfinite)
    if run_id is None:  # checked before anything is charged or drawn
        raise ValueError("release_selection with a ledger needs run_id (the run's ledger id), got None.")
    bound = {SELECTION_KEY: selection_event(selection, selection_epsilon, selection_mu)}
    with ledger.charge(bound, run_id=run_id) as meter:
        return mechanism.release(losses, nonfinite=nonfinite, meter=meter, part=SELECTION_KEY)
