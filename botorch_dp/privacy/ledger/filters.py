r"""The ledger's budget filters and compositions: pure functions of events and budgets.

Validation side: μ-GDP composition ``√Σμ_j²`` while every entry is Gaussian or pure ε-DP,
with the GDP filter of Smith & Thakurta (2022, "Fully adaptive composition for Gaussian
differential privacy"); once an entry is given by its Rényi-DP curve, everything is
composed in RDP on ``TRAINING_RDP_ORDERS`` and a new entry is admitted only while the
summed curve stays ≤ α B²/2 at every grid order (each order a valid Rényi filter, Feldman &
Zrnic 2021). Training side: RDP summed on the grid and filtered at ONE order fixed by the
budget and the first training entry (``filter_order``), or Opacus's PRV accountant when
every entry is a DP-SGD run. See ``PrivacyLedger`` for what each guarantee means.

Training entries known only by an ``(ε_i, δ_i)`` statement (``ApproximateDP``, e.g. a private
selection accounted by its privacy profile) are composed with the rest by basic composition:
the total at ``δ`` is ``Σ ε_i + ε_R(δ − Σ δ_i)``, where ``ε_R`` is the RDP conversion of the
other entries' summed curve (``inf`` when no ``δ`` is left for them, ``0`` when there are none).
Why it holds: an ``(ε, δ)``-DP mechanism is ``δ``-approximately ``ε``-DP (its output laws on
neighbours are ``(1 − δ)``-mixtures of laws within ``e^{±ε}`` of each other), so outside events
of total probability ``≤ Σ δ_i`` each such step has privacy loss ``≤ ε_i`` (an RDP of ``ε_i`` at
every order, a constant that the conversion passes through unchanged), and the rest converts at
``δ − Σ δ_i`` (approximate RDP and its composition: Bun & Steinke 2016, approximate zCDP).

The FILTER (a training budget ``(ε_B, δ_B)``) admits an ``ApproximateDP`` entry only as the
ledger's FIRST training entry, which is chosen before any training output exists, and splits
the budget there: ``(ε₁, δ₁)`` must fit it, and every later entry is filtered in RDP as
before (one order, fixed by the first of them) within ``(ε_B − ε₁, δ_B − δ₁)``; a ledger whose
first training entry is anything else admits no ``ApproximateDP`` entry. For every output of the
first entry, the rest is then an RDP filter with a fixed budget, ``(ε_B − ε₁, δ_B − δ₁)``-DP
(Feldman & Zrnic 2021, and the RDP conversion), so the adaptive composition of the two is
``(ε_B, δ_B)``-DP by basic composition.

Validation entries known only by an ``(ε_i, δ_i)`` statement (``ValidationApproximateDP``, e.g. the
Gaussian scores of a private selection accounted by their privacy profile) are read the same way:
``Σ ε_i + ε_R(δ − Σ δ_i)`` with ``ε_R`` the GDP (or RDP) conversion of the other validation entries
(``validation_epsilon_of``, ``validation_composition``); no μ covers them and their RDP curve counts
``inf``. Why it holds, in any order of the entries: on each pair of neighbours an ``(ε_i, δ_i)``
mechanism's output laws are ``(1 − δ_i)``-mixtures of laws within ``e^{±ε_i}`` of each other plus a
``δ_i`` part (Kairouz, Oh & Viswanath 2015; Murtagh & Vadhan 2016), so outside events of total
probability ``≤ Σ δ_i`` the privacy loss is ``L ≤ Σ ε_i + L_R``, ``L_R`` the other entries' loss, and
``E[(1 − e^{Σε_i + ε − L})_+] ≤ E[(1 − e^{ε − L_R})_+]``: the rest's own bound at ``ε``, its GDP
profile (f-DP composition is a tensor product, which does not depend on the order; Dong, Roth & Su
2022) or its RDP conversion (Canonne, Kamath & Steinke 2020, which uses only the moments of ``L_R``).

The validation budget is a GDP ``μ_B``, of which no ``(ε, δ)`` statement leaves a GDP remainder, so
the FILTER (a finite ``μ_B``) states what it admits at one δ fixed in advance, the ledger's
``validation_delta`` ``δ_B``: the side's composed guarantee at ``δ_B`` must be a statement ``μ_B``-GDP
makes, ``Σ ε_i + ε_R(δ_B − Σ δ_i) ≤ ε_{μ_B}(δ_B)`` (the exact GDP conversion, Dong, Roth & Su 2022);
the δ split is the one the reads use, what the ``(ε, δ)`` entries leave of ``δ_B``. The rest is then
held to a Gaussian budget fixed by the ``(ε, δ)`` entries: GDP-only, ``μ_R ≤ μ_G``, the largest ``μ``
with ``ε_μ(δ_B − Σ δ_i) ≤ ε_{μ_B}(δ_B) − Σ ε_i`` (the Smith–Thakurta filter with budget ``μ_G``; this
is exactly the composed check); with RDP entries, their summed curve ``≤ α μ'_G²/2`` at EVERY grid
order (each order a Rényi filter), ``μ'_G`` the largest ``μ`` whose RDP conversion on the grid meets
the same bound (``rest_mu_budget``), so the stated ``ε`` (the realised curve's conversion) can only be
smaller. Every part of an admitted set of entries is admitted, so whether a set is admitted does not
depend on the order its entries arrive in. Adaptivity: when the ``(ε, δ)`` entries come before the
rest, the filter is valid for adaptively chosen parameters: the ``(ε_i, δ_i)`` entries, then the rest
as one filter whose budget is fixed when it starts, are mechanisms with adaptively chosen ``(ε_k,
δ_k)`` whose sums stay within ``(ε_{μ_B}(δ_B), δ_B)`` on every path (the basic-composition filter of
Rogers, Roth, Ullman & Vadhan 2016). An ``(ε, δ)`` entry admitted AFTER GDP or RDP releases lowers
the budget of a rest already under way; that is the composition theorem applied to the entries as
charged, valid when their parameters do not depend on the released values (a schedule fixed in
advance and stopped or skipped adaptively is post-processing of running all of it), as the
library's charges are (each follows from public settings and the budget); a filter for ``(ε, δ)``
and GDP parameters both chosen from released values, in that order, is not covered by a theorem we
know of. Without ``validation_delta`` the filter keeps its earlier rule: an ``(ε₁, δ₁)`` entry only as
the validation side's SOLE entry (nothing recorded or reserved before it, of any run, and nothing
admitted after it), with ``ε₁ ≤ ε_{μ_B}(δ₁)``; the side's guarantee is then exactly ``(ε₁, δ₁)``.
Without a budget nothing is filtered (as on the training side) and the reads compose by basic
composition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, gdp_mu
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.checks import check_choice
from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PureDP,
    TrainingEvent,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationEvent,
    ValidationMechanism,
)

__all__ = [
    "BUDGET_RTOL",
    "PrivacyBudgetExceeded",
    "TRAINING_ACCOUNTANTS",
    "accountant_for",
    "approximate_parts",
    "check_training_admits",
    "check_validation_admits",
    "event_rdp",
    "approximate_validation_parts",
    "filter_order",
    "gdp_only",
    "merged_history",
    "rdp_grid_epsilon",
    "remaining_validation_mu",
    "rest_mu_budget",
    "training_epsilon_of",
    "training_rdp_curve",
    "validation_composition",
    "validation_epsilon_of",
    "validation_rdp_curve",
]

ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
TRAINING_ACCOUNTANTS = ("rdp", "prv")
#: Relative slack absorbing floating-point rounding, so that T steps of μ/√T fit a budget μ.
BUDGET_RTOL = 1e-9


class PrivacyBudgetExceeded(RuntimeError):
    r"""Raised before a release (or a step's releases) that would exceed the privacy budget."""


# ------------------------------------------------------------------------- validation
def gaussian_rdp(mu: float) -> np.ndarray:
    r"""The exact RDP curve of μ-GDP on the grid, α μ²/2 (``inf`` for μ = ∞)."""
    return ORDERS * (mu * mu / 2.0)


def event_rdp(event: ValidationEvent) -> np.ndarray:
    r"""The RDP curve on the grid of one validation event.

    Gaussian: α μ²/2. Pure ε-DP charged μ: min(α μ²/2, α ε²/2, ε) — μ-GDP, ε²/2-zCDP (Bun &
    Steinke 2016, Prop. 3.3) and D_α ≤ D_∞ ≤ ε are all valid bounds. An RDP entry: its curve.
    An ``(ε, δ)`` entry: ``inf`` at every order (an ``(ε, δ)``-DP mechanism with ``δ > 0`` has no
    finite Rényi bound in general; ``validation_epsilon_of`` composes it by basic composition)."""
    if isinstance(event, ValidationApproximateDP):
        return np.full_like(ORDERS, math.inf)
    if isinstance(event, ValidationMechanism):
        return np.asarray(event.rdp, dtype=np.float64)
    if isinstance(event, PureDP):
        eps = event.epsilon
        return np.minimum(np.minimum(gaussian_rdp(event.mu), ORDERS * (eps * eps / 2.0)), eps)
    return gaussian_rdp(event.mu)


def gdp_only(events: Sequence[ValidationEvent]) -> TypeGuard[Sequence[Gaussian | PureDP]]:
    r"""Whether every event is Gaussian or pure ε-DP (then the side is exactly μ-GDP)."""
    return all(isinstance(e, (Gaussian, PureDP)) for e in events)


def validation_rdp_curve(events: Sequence[ValidationEvent]) -> np.ndarray:
    r"""The summed RDP curve on the grid (zeros for no events)."""
    total = np.zeros_like(ORDERS)
    for event in events:
        total = total + event_rdp(event)
    return total


def rdp_grid_epsilon(rdp: np.ndarray, delta: float) -> tuple[float, float | None]:
    r"""(ε, α) of an RDP curve on ``TRAINING_RDP_ORDERS`` at ``delta`` (``rdp_curve_epsilon``);
    ``(inf, None)`` when the curve is infinite at every order."""
    epsilon, order = rdp_curve_epsilon(rdp, TRAINING_RDP_ORDERS, delta)
    return (math.inf, None) if not math.isfinite(epsilon) else (epsilon, float(order))


def approximate_validation_parts(
    events: Sequence[ValidationEvent],
) -> tuple[float, float, list[ValidationEvent]]:
    r"""``(Σ ε_i, Σ δ_i)`` of the ``ValidationApproximateDP`` entries, and the other entries in order."""
    approx = [e for e in events if isinstance(e, ValidationApproximateDP)]
    rest: list[ValidationEvent] = [e for e in events if not isinstance(e, ValidationApproximateDP)]
    return float(sum(e.epsilon for e in approx)), float(sum(e.delta for e in approx)), rest


def rest_mu_budget(epsilon: float, delta: float, gdp: bool) -> float:
    r"""The largest ``μ`` whose conversion at ``delta`` is at most ``epsilon``: the exact GDP one
    (``gdp_mu``) when ``gdp``, else the RDP conversion of ``α μ²/2`` on the grid, whose closed form is
    ``μ² = max_α 2(ε − c_α)/α`` with ``c_α = log(1 − 1/α) − (log δ + log α)/(α − 1)``
    (``rdp_curve_epsilon``'s rule); 0 when no ``μ > 0`` fits."""
    if epsilon < 0.0:
        return 0.0
    if gdp:
        return gdp_mu(epsilon, delta)
    slack = np.log1p(-1.0 / ORDERS) - (math.log(delta) + np.log(ORDERS)) / (ORDERS - 1.0)
    best = float(np.max(2.0 * (epsilon - slack) / ORDERS))
    return math.sqrt(best) if best > 0.0 else 0.0


def _rest_budget(budget: float, delta_b: float, entries: Sequence[ValidationEvent]) -> float | None:
    r"""``μ_G`` (GDP-only rest) or ``μ'_G`` (rest with RDP entries) that the ``(ε, δ)`` entries of ``entries``
    leave for the rest under the budget ``(μ_B, δ_B)``; None when they leave no room (module docstring)."""
    eps_b = gdp_epsilon(budget, delta_b)
    eps_a, delta_a, rest = approximate_validation_parts(entries)
    if eps_a > eps_b * (1.0 + BUDGET_RTOL) or delta_a > delta_b * (1.0 - BUDGET_RTOL):
        return None
    return rest_mu_budget(max(eps_b - eps_a, 0.0), delta_b - delta_a, gdp_only(rest))


def remaining_validation_mu(
    budget: float | None, spent: Sequence[ValidationEvent], delta_b: float | None = None
) -> float:
    r"""The μ of the largest further Gaussian release the budget allows after ``spent``.

    ``sqrt(budget² − spent²)`` clipped at 0 (``inf`` without a budget); with RDP entries the
    largest μ with spent(α) + α μ²/2 ≤ α budget²/2 at every grid order; with ``(ε, δ)`` entries the
    same against the rest's budget ``μ_G`` at the ledger's ``validation_delta`` ``delta_b`` (0 without
    one: the sole entry it is then admitted as)."""
    if budget is None or math.isinf(budget):
        return math.inf
    if any(isinstance(e, ValidationApproximateDP) for e in spent):
        if delta_b is None:
            return 0.0
        mu_g = _rest_budget(budget, delta_b, spent)
        if mu_g is None:
            return 0.0
        budget, spent = mu_g, approximate_validation_parts(spent)[2]
    if not gdp_only(spent):
        room = budget * budget - 2.0 * validation_rdp_curve(spent) / ORDERS
        return math.sqrt(max(float(np.min(room)), 0.0))
    total = compose_gdp(e.mu for e in spent)
    if math.isinf(total):
        return 0.0
    return math.sqrt(max(budget * budget - total * total, 0.0))


def check_validation_admits(
    budget: float | None,
    spent: Sequence[ValidationEvent],
    new: Sequence[ValidationEvent],
    what: str,
    delta_b: float | None = None,
) -> None:
    r"""Raise ``PrivacyBudgetExceeded`` unless ``new`` (all of it) fits the budget after ``spent``.

    Args:
        budget: The μ budget (None or ``inf``: no filter).
        spent: Everything recorded and reserved so far (all runs).
        new: The events to admit together (a step's worst case).
        what: How the error names ``new`` (e.g. ``"a step with mu=0.2"``).
        delta_b: The ledger's ``validation_delta``: the δ at which ``(ε, δ)`` entries are composed with
            the rest under the budget (None: such an entry only as the side's sole entry).
    """
    if budget is None or math.isinf(budget) or not new:
        return
    if any(isinstance(e, ValidationApproximateDP) for e in [*spent, *new]):
        if delta_b is None:
            _check_sole_approximate_admits(budget, spent, new, what)
        else:
            _check_composed_admits(budget, delta_b, spent, new, what)
        return
    if gdp_only(spent) and gdp_only(new):
        spent_mu = compose_gdp(e.mu for e in spent)
        total = compose_gdp([spent_mu, *(e.mu for e in new)])
        if total > budget * (1.0 + BUDGET_RTOL):
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: {what} would bring the total to mu={total:.6g}, "
                f"above the budget mu={budget:.6g}. Spent mu={spent_mu:.6g} (recorded and reserved, all runs); "
                f"remaining mu budget sqrt(budget^2 - spent^2) = {remaining_validation_mu(budget, spent):.6g}. "
                "Nothing was released."
            )
        return
    curve = validation_rdp_curve([*spent, *new])
    allowed = gaussian_rdp(budget)
    with np.errstate(invalid="ignore"):
        over = curve > allowed * (1.0 + BUDGET_RTOL)
    if np.any(over):
        i = int(np.argmax(np.where(over, curve / allowed, -np.inf)))
        raise PrivacyBudgetExceeded(
            f"Validation privacy budget exceeded: {what} would bring the summed RDP of the validation "
            f"side at order alpha={ORDERS[i]:g} to {curve[i]:.6g}, above alpha*budget^2/2 = {allowed[i]:.6g} "
            f"(the RDP of budget mu={budget:.6g} GDP). With releases given by an RDP curve, every order "
            f"of RDP_ORDERS must stay within it (see PrivacyLedger); remaining mu for a Gaussian "
            f"release: {remaining_validation_mu(budget, spent):.6g}. Nothing was released."
        )


def _check_sole_approximate_admits(
    budget: float, spent: Sequence[ValidationEvent], new: Sequence[ValidationEvent], what: str
) -> None:
    r"""The filter with a ``ValidationApproximateDP``: admitted only as the side's sole entry, with
    ``ε₁ ≤ ε_{μ_B}(δ₁)`` (module docstring)."""
    entries = [*spent, *new]
    first = entries[0]
    if len(entries) > 1 or not isinstance(first, ValidationApproximateDP):
        held = next(e for e in entries if isinstance(e, ValidationApproximateDP))
        raise PrivacyBudgetExceeded(
            f"Validation privacy budget exceeded: {what} would compose with the (epsilon, delta) entry "
            f"{held.description!r} (epsilon={held.epsilon:.6g}, delta={held.delta:.3g}); a ledger with a "
            f"validation budget (mu={budget:.6g}) admits an (epsilon, delta) entry only as its validation side's "
            f"sole entry ({len(spent)} entr(y/ies) recorded or reserved; see privacy.ledger.filters). "
            "Nothing was released."
        )
    allowed = gdp_epsilon(budget, first.delta)
    if first.epsilon > allowed * (1.0 + BUDGET_RTOL):
        raise PrivacyBudgetExceeded(
            f"Validation privacy budget exceeded: {what} spends (epsilon={first.epsilon:.6g}, "
            f"delta={first.delta:.3g}), above the epsilon={allowed:.6g} that the budget mu={budget:.6g} GDP "
            "states at that delta. Nothing was released."
        )


def _check_composed_admits(
    budget: float, delta_b: float, spent: Sequence[ValidationEvent], new: Sequence[ValidationEvent], what: str
) -> None:
    r"""The filter with ``ValidationApproximateDP`` entries and a ``validation_delta`` ``δ_B``: the side composed
    at ``δ_B`` must be a statement ``μ_B``-GDP makes (module docstring)."""
    entries = [*spent, *new]
    eps_b = gdp_epsilon(budget, delta_b)
    eps_a, delta_a, rest = approximate_validation_parts(entries)
    target = (
        f"the budget mu={budget:.6g} GDP states (epsilon={eps_b:.6g}, delta={delta_b:.3g}) at the ledger's "
        f"validation_delta, and the validation side composed there must stay within it (see privacy.ledger.filters)"
    )
    mu_g = _rest_budget(budget, delta_b, entries)
    if mu_g is None and not rest and eps_a <= eps_b * (1.0 + BUDGET_RTOL) and delta_a <= delta_b * (1.0 + BUDGET_RTOL):
        return  # the (ε, δ) entries alone, all of δ_B theirs
    if mu_g is None:
        no_room = ", which leaves no delta for the other releases" if rest else ""
        raise PrivacyBudgetExceeded(
            f"Validation privacy budget exceeded: {what} would bring the (epsilon, delta) entries of the "
            f"validation side to (epsilon={eps_a:.6g}, delta={delta_a:.3g}) by basic composition{no_room}; "
            f"{target}. Nothing was released."
        )
    if not rest:
        return
    left = f"the (epsilon, delta) entries (epsilon={eps_a:.6g}, delta={delta_a:.3g}) leave"
    if gdp_only(rest):
        mu_r = compose_gdp(e.mu for e in rest)
        if mu_r > mu_g * (1.0 + BUDGET_RTOL):
            raise PrivacyBudgetExceeded(
                f"Validation privacy budget exceeded: {what} would bring the Gaussian part of the validation side "
                f"to mu={mu_r:.6g}, above the mu={mu_g:.6g} that {left} for it at delta={delta_b - delta_a:.3g} "
                f"(composed: epsilon={eps_a + gdp_epsilon(mu_r, delta_b - delta_a):.6g}); {target}. "
                "Nothing was released."
            )
        return
    curve, allowed = validation_rdp_curve(rest), gaussian_rdp(mu_g)
    with np.errstate(invalid="ignore"):
        over = curve > allowed * (1.0 + BUDGET_RTOL)
    if np.any(over):
        i = int(np.argmax(np.where(over, curve / np.maximum(allowed, 1e-300), -np.inf)))
        raise PrivacyBudgetExceeded(
            f"Validation privacy budget exceeded: {what} would bring the summed RDP of the validation side's "
            f"other releases at order alpha={ORDERS[i]:g} to {curve[i]:.6g}, above alpha*mu^2/2 = {allowed[i]:.6g} "
            f"for the mu={mu_g:.6g} that {left} for them at delta={delta_b - delta_a:.3g} (every order of "
            f"RDP_ORDERS must stay within it); {target}. Nothing was released."
        )


def validation_composition(events: Sequence[ValidationEvent], delta: float) -> dict[str, Any]:
    r"""How validation ``events`` compose at ``delta`` (``validation_epsilon_of``'s parts, for the report):
    ``epsilon`` (the total), ``approximate_epsilon`` and ``approximate_delta`` (``Σ ε_i``, ``Σ δ_i`` of the
    ``(ε, δ)`` entries, by basic composition), ``rest_delta`` (``δ − Σ δ_i``, at which the other entries
    are converted; None when none is left or there are none), ``rest_epsilon``, ``rest_mu`` (their
    composed μ when they are GDP only) and ``rest_rdp_order`` (the grid order of their RDP conversion)."""
    eps_a, delta_a, rest = approximate_validation_parts(events)
    parts: dict[str, Any] = {
        "approximate_epsilon": eps_a,
        "approximate_delta": delta_a,
        "rest_delta": None,
        "rest_epsilon": 0.0,
        "rest_mu": compose_gdp(e.mu for e in rest) if gdp_only(rest) else None,
        "rest_rdp_order": None,
    }
    if len(rest) < len(events):
        if delta_a > delta * (1.0 + BUDGET_RTOL):
            return {**parts, "rest_epsilon": math.inf, "epsilon": math.inf}
        if not rest:
            return {**parts, "epsilon": eps_a}
        delta = delta - delta_a
        if delta <= 0.0:
            return {**parts, "rest_epsilon": math.inf, "epsilon": math.inf}
    parts["rest_delta"] = delta
    if gdp_only(rest):
        parts["rest_epsilon"] = gdp_epsilon(compose_gdp(e.mu for e in rest), delta)
    else:
        parts["rest_epsilon"], parts["rest_rdp_order"] = rdp_grid_epsilon(validation_rdp_curve(rest), delta)
    return {**parts, "epsilon": eps_a + parts["rest_epsilon"]}


def validation_epsilon_of(events: Sequence[ValidationEvent], delta: float) -> float:
    r"""ε at ``delta`` of validation ``events`` composed: the exact GDP conversion while they are GDP
    only, the RDP conversion otherwise, and ``ValidationApproximateDP`` entries by basic composition
    (``Σ ε_i`` plus the rest converted at the ``δ − Σ δ_i`` they leave; ``inf`` when none is left)."""
    return float(validation_composition(events, delta)["epsilon"])


# --------------------------------------------------------------------------- training
def merged_history(entries: Sequence[TrainingEvent]) -> list[DPSGDRun]:
    r"""The DP-SGD runs of ``entries``, runs with equal (σ, q) merged into one entry.

    Composition is commutative and RDP linear in the number of steps, so merging changes
    nothing but keeps the PRV accountant fast for many identical runs."""
    merged: dict[tuple[float, float], int] = {}
    for entry in entries:
        if isinstance(entry, DPSGDRun):
            key = (entry.noise_multiplier, entry.sample_rate)
            merged[key] = merged.get(key, 0) + entry.steps
    return [DPSGDRun(sigma, rate, steps) for (sigma, rate), steps in merged.items()]


def training_rdp_curve(entries: Sequence[TrainingEvent]) -> np.ndarray:
    r"""The summed RDP curve of training entries on the grid (Opacus loaded for DP-SGD runs);
    ``ApproximateDP`` entries have no curve and are left out (see ``training_epsilon_of``)."""
    total = np.zeros_like(ORDERS)
    for entry in entries:
        if isinstance(entry, TrainingMechanism):
            total += np.asarray(entry.rdp, dtype=np.float64)
    history = merged_history(entries)
    if history:
        from botorch_dp.privacy.accountants import dp_sgd_rdp

        for sigma, rate, steps in history:
            total += dp_sgd_rdp(noise_multiplier=sigma, sample_rate=rate, steps=steps, orders=ORDERS)
    return total


def approximate_parts(entries: Sequence[TrainingEvent]) -> tuple[float, float, list[TrainingEvent]]:
    r"""``(Σ ε_i, Σ δ_i)`` of the ``ApproximateDP`` entries, and the other entries in order."""
    approx = [e for e in entries if isinstance(e, ApproximateDP)]
    rest: list[TrainingEvent] = [e for e in entries if not isinstance(e, ApproximateDP)]
    return float(sum(e.epsilon for e in approx)), float(sum(e.delta for e in approx)), rest


def order_budgets(epsilon: float, delta: float) -> np.ndarray:
    r"""At each grid order α, the largest summed RDP that converts to ``ε ≤ epsilon``:
    ``epsilon − log(1 − 1/α) + (log δ + log α)/(α − 1)`` (the rule of ``rdp_curve_epsilon``)."""
    return epsilon - np.log1p(-1.0 / ORDERS) + (math.log(delta) + np.log(ORDERS)) / (ORDERS - 1.0)


def filter_order(epsilon: float, delta: float, first_curve: np.ndarray) -> float:
    r"""The one Rényi order at which the training budget filter works.

    An RDP filter is valid for adaptively chosen mechanisms at ONE order fixed in advance
    (Feldman & Zrnic 2021); accepting while *some* order has room is not covered by that
    theorem, because different outcome paths could then rely on different orders. The
    order is fixed by the budget and the FIRST training entry, which is chosen before
    anything computed from the training data exists: the grid order at which the most
    copies of that entry fit the budget, ``argmax_α budget(α)/ε_1(α)``. A sequence of
    identical runs is therefore accepted exactly as long as its grid ε fits.

    Args:
        epsilon: The training ε budget.
        delta: The training δ.
        first_curve: The RDP of the first training entry on ``TRAINING_RDP_ORDERS``.
    """
    budgets = order_budgets(epsilon, delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        copies = np.where(first_curve > 0, budgets / first_curve, np.where(budgets >= 0, np.inf, -np.inf))
    return float(ORDERS[int(np.argmax(copies))])


def accountant_for(entries: Sequence[TrainingEvent], setting: str, requested: str | None) -> tuple[str, str]:
    r"""The accountant to compose ``entries`` with, and why (the ledger's ``setting``, a
    ``requested`` one, RDP whenever an entry is not a DP-SGD run)."""
    mechanisms = [e for e in entries if isinstance(e, (TrainingMechanism, ApproximateDP))]
    if requested is not None:
        requested = check_choice(requested, "accountant", TRAINING_ACCOUNTANTS)
        if requested == "prv" and mechanisms:
            raise ValueError(
                "The PRV accountant composes only DP-SGD runs, but the training side holds "
                f"{len(mechanisms)} mechanism(s) that are no DP-SGD runs (e.g. {mechanisms[0].description!r}); "
                "use accountant='rdp' (the default falls back to it)."
            )
        return requested, f"accountant={requested!r} was asked for"
    if setting == "rdp":
        return "rdp", "training_accountant='rdp'"
    if mechanisms:
        return "rdp", (
            f"training_accountant='prv' falls back to RDP: {len(mechanisms)} training mechanism(s) given by an "
            f"RDP curve or an (epsilon, delta) (e.g. {mechanisms[0].description!r}) are not DP-SGD runs, and the PRV "
            "accountant composes only DP-SGD runs"
        )
    return "prv", "training_accountant='prv' and every training entry is a DP-SGD run"


def training_epsilon_of(
    entries: Sequence[TrainingEvent], delta: float, accountant: str, prv_eps_error: float
) -> tuple[float, float | None]:
    r"""(ε, optimal order or None) of ``entries`` composed with ``accountant``; ``ApproximateDP``
    entries by basic composition, the others converted at the ``δ`` they leave (module docstring)."""
    if not entries:
        return 0.0, None
    eps_a, delta_a, rest = approximate_parts(entries)
    if len(rest) < len(entries):
        if delta_a > delta * (1.0 + BUDGET_RTOL):
            return math.inf, None
        if not rest:
            return eps_a, None
        left = delta - delta_a
        if left <= delta * BUDGET_RTOL:
            return math.inf, None
        eps_r, order = training_epsilon_of(rest, left, accountant, prv_eps_error)
        return eps_a + eps_r, order
    if accountant == "prv":
        from botorch_dp.privacy.accountants import accountant_epsilon, make_accountant

        return accountant_epsilon(
            make_accountant("prv", merged_history(entries)), delta=delta, eps_error=prv_eps_error
        ), None
    return rdp_grid_epsilon(training_rdp_curve(entries), delta)


def describe_training(entry: TrainingEvent) -> str:
    r"""How an error message names a training entry."""
    if isinstance(entry, DPSGDRun):
        return (
            f"a run with noise_multiplier={entry.noise_multiplier:.6g}, sample_rate={entry.sample_rate:.6g}, "
            f"steps={entry.steps}"
        )
    if isinstance(entry, ApproximateDP):
        return f"the mechanism {entry.description!r} (epsilon={entry.epsilon:.6g}, delta={entry.delta:.3g})"
    return f"the mechanism {entry.description!r}"


def check_training_admits(
    budget: float | None,
    delta: float | None,
    setting: str,
    prv_eps_error: float,
    spent: Sequence[TrainingEvent],
    new: Sequence[TrainingEvent],
) -> None:
    r"""Raise ``PrivacyBudgetExceeded`` unless ``spent`` followed by ``new`` fit the training budget.

    With RDP the filter works at ``filter_order`` of the first entry of ``spent + new`` (in
    recording order); with PRV (DP-SGD runs only) it composes everything with Opacus's PRV
    accountant, exact for runs fixed in advance.
    """
    if budget is None or math.isinf(budget) or not new:
        return
    if delta is None:
        raise ValueError(f"A training budget (epsilon={budget!r}) needs delta, got None.")
    entries = [*spent, *new]
    what = describe_training(new[0]) if len(new) == 1 else f"{len(new)} training runs"
    if any(isinstance(e, ApproximateDP) for e in entries):
        _check_split_admits(budget, delta, spent, entries, what)
        return
    _check_rdp_admits(budget, delta, setting, prv_eps_error, spent, entries, what)


def _check_split_admits(
    budget: float, delta: float, spent: Sequence[TrainingEvent], entries: list[TrainingEvent], what: str
) -> None:
    r"""The filter with an ``ApproximateDP`` entry: admitted only as the first training entry, whose
    ``(ε₁, δ₁)`` must fit the budget; every later entry is filtered in RDP within ``(ε_B − ε₁, δ_B − δ₁)``
    (module docstring)."""
    first, later = entries[0], entries[1:]
    spent_eps = training_epsilon_of(spent, delta, "rdp", 0.0)[0]
    if not isinstance(first, ApproximateDP) or any(isinstance(e, ApproximateDP) for e in later):
        raise PrivacyBudgetExceeded(
            f"Training privacy budget exceeded: {what} is an (epsilon, delta) entry, which a ledger with a "
            "training budget admits only as its first training entry (the budget is split once, by that entry; "
            f"see privacy.ledger.filters). Spent so far: epsilon={spent_eps:.6g} of {budget:.6g}. Nothing was trained."
        )
    if first.epsilon > budget * (1.0 + BUDGET_RTOL) or first.delta > delta * (1.0 + BUDGET_RTOL):
        raise PrivacyBudgetExceeded(
            f"Training privacy budget exceeded: {describe_training(first)} is above the budget (epsilon={budget:.6g}, "
            f"delta={delta:.3g}). Nothing was trained."
        )
    if not later:
        return
    sub_eps, sub_delta = budget - first.epsilon, delta - first.delta
    if sub_eps < 0.0 or sub_delta <= delta * BUDGET_RTOL:
        raise PrivacyBudgetExceeded(
            f"Training privacy budget exceeded: {what} needs room for an RDP entry, but the ledger's first "
            f"training entry (epsilon={first.epsilon:.6g}, delta={first.delta:.3g}) left (epsilon="
            f"{max(sub_eps, 0.0):.6g}, delta={max(sub_delta, 0.0):.3g}) of the budget (epsilon={budget:.6g}, "
            f"delta={delta:.3g}) for the rest. Spent so far: epsilon={spent_eps:.6g}. Nothing was trained."
        )
    _check_rdp_admits(sub_eps, sub_delta, "rdp", 0.0, spent[1:], later, f"{what} (the RDP part's share)")


def _check_rdp_admits(
    budget: float,
    delta: float,
    setting: str,
    prv_eps_error: float,
    spent: Sequence[TrainingEvent],
    entries: list[TrainingEvent],
    what: str,
) -> None:
    r"""The filter without ``ApproximateDP`` entries (RDP at one order, or PRV for DP-SGD runs only)."""
    accountant, _ = accountant_for(entries, setting, None)
    if accountant == "rdp":
        order = filter_order(budget, delta, training_rdp_curve(entries[:1]))
        i = TRAINING_RDP_ORDERS.index(order)
        total = float(training_rdp_curve(entries)[i])
        allowed = float(order_budgets(budget, delta)[i])
        if total > allowed + budget * BUDGET_RTOL:
            spent_eps = training_epsilon_of(spent, delta, accountant, prv_eps_error)[0]
            raise PrivacyBudgetExceeded(
                f"Training privacy budget exceeded: {what} would bring the summed RDP (rdp, delta={delta:.3g}) "
                f"at the filter's order alpha={order:g} to {total:.6g}, above the {allowed:.6g} that converts "
                f"to the budget epsilon={budget:.6g}. Spent so far: epsilon={spent_eps:.6g} of {budget:.6g}. "
                "The filter works at one order, fixed by the budget and the first training entry, which "
                "keeps it valid for adaptively chosen runs (see PrivacyLedger). Nothing was trained."
            )
        return
    total = training_epsilon_of(entries, delta, accountant, prv_eps_error)[0]
    if total > budget * (1.0 + BUDGET_RTOL):
        spent_eps = training_epsilon_of(spent, delta, accountant, prv_eps_error)[0]
        raise PrivacyBudgetExceeded(
            f"Training privacy budget exceeded: {what} would bring the training epsilon ({accountant}, "
            f"delta={delta:.3g}) to {total:.6g}, above the budget {budget:.6g}. Spent so far: "
            f"epsilon={spent_eps:.6g} of {budget:.6g}; epsilons do not compose additively, so what is left "
            "is a run whose composition with the past stays within the budget. Nothing was trained."
        )
