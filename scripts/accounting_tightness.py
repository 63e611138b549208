#!/usr/bin/env python
r"""Issue 41's two accounting findings, measured: writes ``reports/accounting-tightness.json`` and ``.md``.

(a) The cheap-tuning plan at ε = 8 (q = 0.2, 25 steps, τ = 0.2; ``tests/methods/test_cheap_plan.py``
SETTINGS[2]) states its final run's ε = 7.1491, dp-accounting's RDP accountant 7.1543 on the same orders.
Table: the run's RDP at the orders around the optimum by the library (Opacus's series), by 30-digit mpmath
quadrature of the definition (both directions), and by dp-accounting; then ε from each, on all orders
and on the integer ones only.

(b) The privacy-profile bound of private selection (``selection_epsilon_pld``) against Papernot–Steinke's
RDP bound on μ-GDP trials (the regimes where it was looser: binomial ``K`` with ``n = 2E[K]``, Poisson ``K``),
with the exact ε of one selection of Gaussian trials (largest of ``K`` draws of ``N(0, 1)`` against
``N(μ, 1)``, both directions, by quadrature): a lower check every valid bound must clear.

Usage::

    python scripts/accounting_tightness.py
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.optimize import brentq  # noqa: E402
from scipy.stats import norm  # noqa: E402

from benchmarks.provenance import script_meta, write_report  # noqa: E402
from botorch_dp.methods.cheap_plan import plan_subsample_tuning  # noqa: E402
from botorch_dp.privacy.accountants import dp_sgd_rdp  # noqa: E402
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon  # noqa: E402
from botorch_dp.privacy.analysis.private_selection_trials import tnb_gamma_for_mean  # noqa: E402
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon  # noqa: E402
from botorch_dp.privacy.analysis.selection_profile import gaussian_trial_profile, selection_epsilon_pld  # noqa: E402
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS  # noqa: E402

DELTA = 1e-5
PLAN = dict(
    epsilon=8.0, delta=DELTA, sample_rate=0.2, steps=25, num_trials=4, subsample_fraction=0.25, tuning_share=0.2
)
SHOWN_ORDERS = (2.0, 3.0, 3.2, 3.3, 3.4, 4.0)
#: (μ, distribution, E[K], n of the binomial)
GAUSSIAN_CASES = [
    (mu, dist, mean, int(2 * mean) if dist == "binomial" else None)
    for mu in (0.3, 1.0)
    for dist in ("binomial", "poisson", "truncated_negative_binomial")
    for mean in (5.0, 10.0)
]

#: The profile ε of the same cases at commit fe3b9d6 (before the bins were refined), measured on that commit
#: with the same GDP profile grid (4,001 points on [0, 40], ``gdp_delta``): (μ, distribution, E[K]) -> ε.
BEFORE = {
    (0.3, "binomial", 5.0): 2.1347,
    (0.3, "binomial", 10.0): 2.9987,
    (0.3, "poisson", 5.0): 1.8315,
    (0.3, "poisson", 10.0): 2.4126,
    (0.3, "truncated_negative_binomial", 5.0): 1.6113,
    (0.3, "truncated_negative_binomial", 10.0): 1.8054,
    (1.0, "binomial", 5.0): 7.2623,
    (1.0, "binomial", 10.0): 9.9862,
    (1.0, "poisson", 5.0): 6.5661,
    (1.0, "poisson", 10.0): 8.4540,
    (1.0, "truncated_negative_binomial", 5.0): 5.9161,
    (1.0, "truncated_negative_binomial", 10.0): 6.5422,
}


def exact_step_rdp(sigma: float, q: float, order: float) -> float:
    r"""One subsampled Gaussian step's RDP from the definition (30-digit mpmath quadrature, both directions)."""
    import mpmath as mp

    with mp.workdps(30):
        s, rate, a = mp.mpf(sigma), mp.mpf(q), mp.mpf(order)

        def divergence(power):
            def integrand(z):
                return mp.npdf(z, 0, s) * ((1 - rate) + rate * mp.exp((2 * z - 1) / (2 * s**2))) ** power

            return mp.log(mp.quad(integrand, [-mp.inf, -10 * s, 0, 0.5, 1, 10 * s + a, mp.inf])) / (a - 1)

        return float(max(divergence(a), divergence(1 - a)))


def dp_accounting_epsilon(sigma: float, q: float, steps: int, orders) -> tuple[float, float]:
    import dp_accounting

    accountant = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in orders])
    accountant.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    eps, order = accountant.get_epsilon_and_optimal_order(DELTA)
    return float(eps), float(order)


def plan_gap() -> dict[str, Any]:
    plan = plan_subsample_tuning(**PLAN)
    sigma, q, steps = plan.final_noise_multiplier, plan.sample_rate, plan.steps
    orders = np.asarray(TRAINING_RDP_ORDERS)
    ours = dp_sgd_rdp(noise_multiplier=sigma, sample_rate=q, steps=steps, orders=orders)
    rows = []
    for a in SHOWN_ORDERS:
        i = int(np.argmin(np.abs(orders - a)))
        theirs_eps, _ = dp_accounting_epsilon(sigma, q, steps, [a])
        theirs = theirs_eps - math.log1p(-1 / a) + math.log(DELTA * a) / (a - 1)  # its RDP, read back
        rows.append(
            {
                "order": a,
                "library": float(ours[i]),
                "mpmath": steps * exact_step_rdp(sigma, q, a),
                "dp_accounting": theirs,
            }
        )
    integer = orders == np.round(orders)
    return {
        "noise_multiplier": sigma,
        "plan_final_epsilon": plan.final_epsilon,
        "library_epsilon": rdp_curve_epsilon(ours, orders, DELTA),
        "library_epsilon_integer_orders": rdp_curve_epsilon(ours[integer], orders[integer], DELTA),
        "dp_accounting_epsilon": dp_accounting_epsilon(sigma, q, steps, orders),
        "dp_accounting_epsilon_integer_orders": dp_accounting_epsilon(sigma, q, steps, orders[integer]),
        "rdp": rows,
    }


def gaussian_selection_epsilon(mu: float, distribution: str, mean: float, m: int | None) -> float:
    r"""Exact ε at δ of the largest of K draws of N(0, 1) against N(μ, 1), both directions (quadrature)."""
    y = np.linspace(-12.0, 12.0 + mu, 100001)
    if distribution == "binomial":
        assert m is not None
        p = mean / m
        fprime = lambda z: m * p * (1.0 - p + p * z) ** (m - 1)  # noqa: E731
    elif distribution == "poisson":
        fprime = lambda z: mean * np.exp(mean * (z - 1.0))  # noqa: E731
    else:
        g = tnb_gamma_for_mean(eta=1.0, mean_trials=mean)
        fprime = lambda z: g / (1.0 - (1.0 - g) * z) ** 2  # noqa: E731
    a, b = norm.pdf(y) * fprime(norm.cdf(y)), norm.pdf(y - mu) * fprime(norm.cdf(y - mu))
    dy = y[1] - y[0]

    def excess(eps: float) -> float:
        e = math.exp(eps)
        return max(np.sum(np.maximum(a - e * b, 0.0)), np.sum(np.maximum(b - e * a, 0.0))) * dy - DELTA

    return float(brentq(excess, 0.0, 30.0, xtol=1e-4))


def gaussian_rows() -> list[dict[str, Any]]:
    rows = []
    for mu, dist, mean, m in GAUSSIAN_CASES:
        profile = gaussian_trial_profile(mu, points=4001)
        kw: dict[str, Any] = {"binomial_rounds": m} if dist == "binomial" else {}
        rows.append(
            {
                "mu": mu,
                "distribution": dist,
                "mean_trials": mean,
                "max_trials": m,
                "rdp_epsilon": private_selection_epsilon(
                    per_trial_mu=mu, mean_trials=mean, target_delta=DELTA, distribution=dist, **kw
                ),
                "pld_epsilon": selection_epsilon_pld(
                    profile, distribution=dist, expected_trials=mean, delta=DELTA, max_trials=m
                ),
                "gaussian_exact_epsilon": gaussian_selection_epsilon(mu, dist, mean, m),
            }
        )
    return rows


def markdown(report: dict[str, Any]) -> str:
    meta, gap = report["meta"], report["plan_gap"]
    lines = [
        "# Accounting tightness (issue 41, third pass)",
        "",
        f"Command: `{meta['command']}`; machine {meta['machine']} ({meta['cpus']} CPUs); Python {meta['python']}; "
        f"{meta['date']}; wall time {meta['wall_s']:.0f} s.",
        "",
        "## (a) The cheap-tuning plan's 7.149 against dp-accounting's 7.154",
        "",
        f"ε = 8, δ = 1e-5, q = 0.2, 25 steps, τ = 0.2 (the final run's share 8·sqrt(0.8) = 7.155); its σ_f = "
        f"{gap['noise_multiplier']:.6f}. RDP of the final run (25 steps) at the orders around the optimum:",
        "",
        "| order | library (Opacus series) | definition (mpmath, 30 digits) | dp-accounting |",
        "|---|---|---|---|",
    ]
    for r in gap["rdp"]:
        lines.append(f"| {r['order']:g} | {r['library']:.12f} | {r['mpmath']:.12f} | {r['dp_accounting']:.12f} |")
    lines += [
        "",
        "| ε at δ = 1e-5 | all 159 orders (optimum) | integer orders only (optimum) |",
        "|---|---|---|",
        f"| library | {gap['library_epsilon'][0]:.6f} ({gap['library_epsilon'][1]:g}) | "
        f"{gap['library_epsilon_integer_orders'][0]:.6f} ({gap['library_epsilon_integer_orders'][1]:g}) |",
        f"| dp-accounting | {gap['dp_accounting_epsilon'][0]:.6f} ({gap['dp_accounting_epsilon'][1]:g}) | "
        f"{gap['dp_accounting_epsilon_integer_orders'][0]:.6f} ({gap['dp_accounting_epsilon_integer_orders'][1]:g}) |",
        "",
        "The library's curve is the definition's to about 1e-12 at integer and fractional orders; dp-accounting's is "
        "exact at integer orders (the two ε agree there) and above the definition at fractional ones (its series "
        "for fractional orders adds the absolute values of the generalised binomial terms, and below order 1.8 "
        "does not converge and drops the order). The conversion is the same (Canonne–Kamath–Steinke). The "
        "library's 7.149 is right and not an under-statement; dp-accounting's 7.154 is a valid but looser bound. "
        "Test: `tests/methods/test_cheap_plan.py::"
        "test_the_plans_final_epsilon_is_exact_and_dp_accountings_larger_one_comes_from_its_fractional_orders`.",
        "",
        "## (b) The privacy-profile bound of private selection on μ-GDP trials",
        "",
        "ε at δ = 1e-5 of releasing the best of K trials. RDP: Papernot–Steinke (binomial: their pgf bound); "
        "profile: `selection_epsilon_pld` over the trial's exact GDP profile (4,001 points on [0, 40]); "
        "Gaussian exact: the largest of K draws of N(0, 1) against N(μ, 1), by quadrature — one pair of trials "
        "with that profile, so a lower check (a valid bound is at least it), not the worst case. Profile ε "
        "before: the same bound at commit fe3b9d6 (log-spaced bins only), measured there on the same cases.",
        "",
        "| μ | K | E[K] | RDP ε | profile ε | profile/RDP | profile ε before | before/RDP | Gaussian exact ε |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["gaussian"]:
        k = r["distribution"] + (f" n={r['max_trials']}" if r["max_trials"] else "")
        before = BEFORE[(r["mu"], r["distribution"], r["mean_trials"])]
        lines.append(
            f"| {r['mu']:g} | {k} | {r['mean_trials']:g} | {r['rdp_epsilon']:.4f} | {r['pld_epsilon']:.4f} | "
            f"{r['pld_epsilon'] / r['rdp_epsilon']:.3f} | {before:.4f} | {before / r['rdp_epsilon']:.3f} | "
            f"{r['gaussian_exact_epsilon']:.4f} |"
        )
    lines += [
        "",
        "What changed: the bound's step 2 cuts the trial's upper tail v into bins and loses "
        "log(ψ(v_k)/ψ(v_{k+1})) of ε on each; with 1,200 log-spaced ends a bin near v = 1 is 0.027 wide, which "
        "for Poisson K costs 0.027·E[K] (0.27 at E[K] = 10). Bins now also have evenly spaced ends with at most "
        "2e-3 fall of log ψ across each (2,000 to 40,000 of them), and step 3's minimum over ε₁ is taken at "
        "max(σ, ε*(w)) from a precomputed minimiser (which made the bound about five times faster). Any bins "
        "and any ε₁ ≥ max(σ, 0) give a valid bound (module docstring), so the change cannot under-charge; the "
        "brute-force enumeration tests (every ranking of small discrete trials) and the Gaussian quadrature "
        'tests pass unchanged, and `accounting="auto"` still charges the smaller of the two bounds.',
        "",
        "Koskela, Redberg & Wang (ICML 2024): the stored copies (the PMLR PDF, a text dump of the paper) again "
        "gave only the abstract and the opening of the introduction, so their theorem could not be compared "
        "formula by formula; the abstract's claim that their profile accounting improves over RDP in all "
        "regimes of interest now holds for this bound on every case above but one (μ = 1, binomial n = 20: "
        "0.04% above RDP).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    logging.getLogger().setLevel(logging.ERROR)  # dp-accounting's "failed to converge" at orders < 1.8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report: dict[str, Any] = {"delta": DELTA, "plan_gap": plan_gap(), "gaussian": gaussian_rows()}
    report["meta"] = {
        **script_meta("scripts/accounting_tightness.py", argv if argv is not None else sys.argv[1:], 1),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_report(args.out, "accounting-tightness", report, markdown(report), indent=1)
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
