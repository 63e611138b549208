#!/usr/bin/env python
r"""Noisy GD with the fixed and the adaptive noise schedule on the same seeds (spec §2.7.7).

Problems: the paper's E.4 Huber regression (d = 4, n = 100, T = 100, B = 1, η = 0.5) and a
normal location (d = 5, n = 50, T = 150, B = 1, η = 0.5); μ = 1. Both schedules spend the
same μ; ``adaptive_norm`` makes at most ``T`` steps (``T_max``). Prints, per problem and
schedule, the final excess loss f(θ) − f(θ*) (NON-PRIVATE evaluation, mean ± s.e. over
seeds), the mean number of steps, and how many seeds the adaptive schedule wins.

    python scripts/compare_noise_schedules.py               # 20 seeds (a few minutes, one thread)
    python scripts/compare_noise_schedules.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from typing import Literal

import torch

from botorch_dp.baselines import noisy_gradient_descent
from botorch_dp.problems import HuberRegression, NormalLocation
from botorch_dp.utils import torch_threads

SCHEDULES: tuple[Literal["fixed", "adaptive_norm"], ...] = ("fixed", "adaptive_norm")


def problems(quick: bool) -> list[tuple[str, HuberRegression | NormalLocation, int]]:
    r"""``(name, problem, T)`` of the comparison (shorter runs with ``quick``)."""
    return [
        ("huber_e4", HuberRegression(seed=0), 20 if quick else 100),
        ("normal_location_d5", NormalLocation(dim=5, num_users=50, seed=0), 30 if quick else 150),
    ]


def compare(*, seeds: int, quick: bool = False, privacy_mu: float = 1.0) -> list[dict]:
    r"""One row per problem and schedule: excess losses per seed, their mean and s.e., steps."""
    rows = []
    for name, problem, T in problems(quick):
        optimum = float(problem.objective(problem.optimum))
        excess: dict[str, list[float]] = {}
        for schedule in SCHEDULES:
            losses, steps = [], []
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # seeded noise warns: a comparison needs common seeds
                    result = noisy_gradient_descent(
                        problem,
                        problem.bounds,
                        num_iterations=T,
                        clip_bound=1.0,
                        step_size=0.5,
                        privacy_mu=privacy_mu,
                        theta0=problem.default_theta0(),
                        seed=seed,
                        noise_schedule=schedule,
                    )
                losses.append(float(problem.objective(result.theta)) - optimum)
                steps.append(result.history.iterates.shape[0] - 1)
            excess[schedule] = losses
            t = torch.tensor(losses, dtype=torch.float64)
            se = float(t.std()) / math.sqrt(seeds) if seeds > 1 else math.nan
            rows.append(
                {
                    "problem": name,
                    "schedule": schedule,
                    "T_max": T,
                    "seeds": seeds,
                    "mean_excess_loss": float(t.mean()),
                    "se": se,
                    "mean_steps": sum(steps) / seeds,
                    "excess_losses": losses,
                }
            )
        wins = sum(a < f for a, f in zip(excess["adaptive_norm"], excess["fixed"], strict=True))
        rows[-1]["adaptive_wins"] = wins
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 20; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="2 seeds and short runs (a few seconds)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 20)
    with torch_threads(args.threads):
        rows = compare(seeds=seeds, quick=args.quick)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("| problem | schedule | T_max | mean steps | excess loss (mean ± s.e.) | adaptive wins |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        wins = f"{r['adaptive_wins']}/{r['seeds']}" if "adaptive_wins" in r else ""
        print(
            f"| {r['problem']} | {r['schedule']} | {r['T_max']} | {r['mean_steps']:.1f} | "
            f"{r['mean_excess_loss']:.4f} ± {r['se']:.4f} | {wins} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
