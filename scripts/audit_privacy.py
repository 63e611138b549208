#!/usr/bin/env python
r"""Empirical privacy audit of every release in botorch-dp, on the path a user takes.

Each row of ``botorch_dp.audit`` (see ``registered_rows``) drives the library as a user
does (``DPGIBO`` ask/tell or ``run`` with the option under audit set on ``DPGIBOConfig``,
the private baselines, ``fit_amp``) on worst-case neighbouring datasets built into the
objective, runs it many times on each, and prints the μ the library claimed for those runs
(from their ledger or guarantee) next to an empirical μ and its one-sided 95%
Clopper–Pearson lower bound (thresholds chosen on held-out runs). A lower bound above the
claim means the release spends more than it claims. AMP claims a privacy profile δ(ε), and
the selection over training runs (``training_selection_score``) one (ε, δ) pair, not a μ:
their rows compare the audit's rates with the trade-off curve the claim implies, in μ units at
the audit's false-positive rate, and also give ε at δ (claimed, and a 95% lower bound).

    python scripts/audit_privacy.py --quick --json    # about 2.5 minutes; --jobs 2: about 1.5
    python scripts/audit_privacy.py                   # thousands of runs per row (long)
    python scripts/audit_privacy.py --quick --rows gradient_release amp_release
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from botorch_dp.audit import audit_all
from botorch_dp.utils import torch_threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run counts (about 2.5 minutes)")
    parser.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    parser.add_argument("--seed", type=int, default=0, help="seed of the audit (audits are reproducible)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="only these rows (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="rows run in this many processes (default 1)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    options = {"names": args.rows} if args.rows else {}
    if args.jobs > 1:
        options["jobs"] = args.jobs
    with torch_threads(args.threads):
        results = audit_all(quick=args.quick, seed=args.seed, **options)
    keys = ("mechanism", "claimed_mu", "empirical_mu", "empirical_mu_lower", "num_runs")
    epsilon_keys = ("delta", "claimed_epsilon", "empirical_epsilon_lower")  # audits at a δ (AMP, selection)
    rows = [
        {k: v for k, v in r.to_dict().items() if k in keys or (k in epsilon_keys and v is not None)} for r in results
    ]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(
            f"{'mechanism':<30} {'claimed μ':>10} {'empirical μ':>12} {'95% lower':>10} {'runs/dataset':>13} "
            f"{'seconds':>8}"
        )
        for r, result in zip(rows, results, strict=True):
            seconds = "" if result.seconds is None else f"{result.seconds:.1f}"
            print(
                f"{r['mechanism']:<30} {r['claimed_mu']:>10.3f} {r['empirical_mu']:>12.3f} "
                f"{r['empirical_mu_lower']:>10.3f} {r['num_runs']:>13d} {seconds:>8}"
            )
        for r in rows:
            if "delta" in r:
                print(
                    f"{r['mechanism']}: epsilon at delta = {r['delta']:g}: claimed {r['claimed_epsilon']:.3f}, "
                    f"95% lower bound {r['empirical_epsilon_lower']:.3f}"
                )
        print(f"({time.perf_counter() - start:.0f} s)")
    leaks = [r["mechanism"] for r in rows if r["empirical_mu_lower"] > r["claimed_mu"]]
    if leaks:
        print(f"LEAK: the lower bound exceeds the claim for {', '.join(leaks)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
