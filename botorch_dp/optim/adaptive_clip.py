r"""Adaptive clipping (``clip_bound="adaptive"``): the clip bound tracks a private quantile of the
per-user gradient-estimate norms (Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially
private learning with adaptive clipping").

At step ``t`` with bound ``B_t`` the run makes two releases from the same per-user estimates
``g_i = A y_i``:

- the gradient ``(1/n) Σ_i clip_{B_t}(g_i) + N(0, σ_t² I)``, ``σ_t = 2B_t√T/(n μ_g)``
  (``GaussianGradientMechanism`` at ``B_t``: ``μ_g/√T``-GDP whatever ``B_t`` is, because the
  noise scales with the bound);
- the count ``b̃_t = #{i : ‖g_i‖ ≤ B_t} + N(0, (√T/μ_C)²)`` (``GaussianClipCountMechanism``,
  sensitivity 1: ``μ_C/√T``-GDP);

and the next bound is the geometric update ``B_{t+1} = B_t · exp(−η_C (b̃_t/n − γ))``:
post-processing of the released count, so ``B_{t+1}`` is public. Its fixed point is the
``γ``-quantile of the norms. The budget split is explicit: ``μ_C = μ_steps √f_C`` and
``μ_g = μ_steps √(1 − f_C)``, so the ``2T`` releases compose to ``√(μ_g² + μ_C²) = μ_steps``
(GDP composition; the bounds are chosen from released values only).

Why every step, not only the first ones: the norms ``‖A y_i‖`` change along the run, both
because ``θ_t`` moves (the gradients shrink near an optimum) and because ``A = ∇k(θ, D)K⁻¹``
changes as points are added, so a bound fitted at ``θ₀`` goes stale; Andrew et al. likewise
update every round. The price is ``f_C`` of the budget (default 0.1: the gradient noise grows
by ``1/√0.9 ≈ 1.054``). Runs are short (``T`` of 10 to 100), so a starting bound within a
factor of a few of the quantile matters: ``η_C = 0.2`` moves ``B`` by at most ``e^{0.2·max(γ, 1−γ)}``
per step; take ``B₀`` from ``botorch_dp.plan`` on a public proxy, or raise ``η_C``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from botorch_dp.optim import checkpoint as ckpt
from botorch_dp.privacy.ledger import PrivacyLedger, release_key

__all__ = [
    "CLIP_KEY",
    "DEFAULT_CLIP_INIT",
    "DEFAULT_CLIP_LEARNING_RATE",
    "DEFAULT_CLIP_MU_FRACTION",
    "DEFAULT_CLIP_QUANTILE",
    "check_clip_state",
    "clip_bounds_from_counts",
    "encode_clip_state",
    "next_clip_bound",
]

#: ``B₀`` when none is given.
DEFAULT_CLIP_INIT = 1.0
#: ``γ``, the target quantile (Andrew et al.'s default, the median).
DEFAULT_CLIP_QUANTILE = 0.5
#: ``η_C`` of the geometric update (Andrew et al.'s default).
DEFAULT_CLIP_LEARNING_RATE = 0.2
#: ``f_C``, the share of ``μ_steps²`` spent on the counts.
DEFAULT_CLIP_MU_FRACTION = 0.1
#: Ledger key suffix of a step's count release: ``step-0003/clip`` (the gradient: ``step-0003/grad``).
CLIP_KEY = "clip"


def next_clip_bound(bound: float, noisy_count: float, num_users: int, quantile: float, learning_rate: float) -> float:
    r"""``B · exp(−η_C (b̃/n − γ))``: the geometric update (Andrew et al. 2021, Alg. 1).

    The noisy fraction ``b̃/n`` may lie outside ``[0, 1]``; it is used as released (clamping
    would bias the update). Public arithmetic on released values.

    Args:
        bound: ``B_t``.
        noisy_count: The released ``b̃_t``.
        num_users: ``n``.
        quantile: ``γ``.
        learning_rate: ``η_C``.
    """
    return bound * math.exp(-learning_rate * (noisy_count / num_users - quantile))


def clip_bounds_from_counts(
    init: float, counts: Sequence[float], num_users: int | None, quantile: float, learning_rate: float
) -> list[float]:
    r"""``[B_0, …, B_t]`` from ``B_0`` and the released counts ``b̃_0..b̃_{t−1}`` (``t + 1`` values)."""
    bounds = [float(init)]
    if len(counts) == 0:
        return bounds
    if num_users is None:
        raise ValueError(f"Replaying {len(counts)} clip counts needs num_users (n), got None.")
    for count in counts:
        bounds.append(next_clip_bound(bounds[-1], count, num_users, quantile, learning_rate))
    return bounds


def encode_clip_state(bounds: Sequence[float], counts: Sequence[float]) -> dict[str, Any]:
    r"""The adaptive-clip state as exact JSON (floats as ``float.hex``)."""
    return {"bounds": [float(b).hex() for b in bounds], "counts": [float(c).hex() for c in counts]}


def check_clip_state(
    entry: Any, *, config: Any, T: int, num_users: int | None, ledger: PrivacyLedger, run_id: str, step_mu: float | None
) -> tuple[list[float], list[float]]:
    r"""Decode and check a checkpoint's ``adaptive_clip`` entry.

    ``None`` (fixed clip bound, or a checkpoint written before the field existed) is accepted
    only for a fixed-bound config. With ``clip_bound="adaptive"`` the entry holds ``T + 1``
    bounds and ``T`` counts; the bounds must be the ones the counts give by the update rule
    (recomputed exactly), and each step's count must be recorded in the ledger as
    ``step-t/clip`` with the config's per-step ``μ_C/√T``.

    Returns:
        ``(bounds, counts)`` (both empty for a fixed bound).
    """
    adaptive = config.clip_bound == "adaptive"
    if entry is None:
        if adaptive:
            raise ValueError("Checkpoint field 'adaptive_clip' is missing for a run with clip_bound='adaptive'.")
        return [], []
    if not adaptive:
        raise ValueError("Checkpoint field 'adaptive_clip' must be None for a fixed clip_bound.")
    ckpt.check_keys(entry, {"bounds", "counts"}, "adaptive_clip")
    bounds, counts = entry["bounds"], entry["counts"]
    if not isinstance(bounds, list) or len(bounds) != T + 1 or not isinstance(counts, list) or len(counts) != T:
        raise ValueError(f"Checkpoint field 'adaptive_clip' must hold {T + 1} bounds and {T} counts.")
    bounds = [ckpt.float_from_json(v, "adaptive_clip.bounds") for v in bounds]
    counts = [ckpt.float_from_json(v, "adaptive_clip.counts") for v in counts]
    if T and num_users is None:
        raise ValueError("Checkpoint field 'adaptive_clip' holds counts but the run has no users.")
    expected = clip_bounds_from_counts(
        config.clip_init, counts, num_users, config.clip_quantile, config.clip_learning_rate
    )
    if [b.hex() for b in bounds] != [b.hex() for b in expected]:
        raise ValueError(
            "Checkpoint field 'adaptive_clip.bounds' does not follow from clip_init and the released counts."
        )
    recorded: dict[str, list[float]] = {}
    for record in ledger.validation.records(run_id):
        recorded.setdefault(record.key, []).append(getattr(record.event, "mu", math.nan))
    for t in range(T):
        if step_mu not in recorded.get(release_key(t, CLIP_KEY, ("grad", CLIP_KEY)), []):
            raise ValueError(f"Checkpoint field 'adaptive_clip.counts' disagrees with the ledger at step {t}.")
    return bounds, counts
