#!/usr/bin/env python
r"""``tune``'s two strategies for categorical hyperparameters, side by side (issue 30, item 4).

``"enumerate"`` (one DP-GIBO run per configuration, then noisy scores) against ``"sample"``
(Papernot–Steinke over a hidden random number of runs on drawn configurations), at the same
``(ε, δ)``, on a synthetic task with a closed-form loss: ``d`` continuous hyperparameters and
one categorical with ``K`` choices. Configuration ``c`` has a public offset ``o_c`` (one
choice at 0, the others drawn from ``[0.2, 1]``) and its own optimum ``x*_c`` in the unit
cube; user ``i``'s loss at ``(x, c)`` is ``o_c + ‖x − x*_c‖² + e_i`` clamped at 0, with a
per-user ``e_i ~ N(0, 0.1²)`` that is the same everywhere. The score of a returned point is its
NON-PRIVATE true mean loss (a diagnostic). Seeds are paired: both strategies see the same
task per seed. Privacy noise comes from the seed (a reproduction; never for a release).

Usage::

    python scripts/compare_tune_strategies.py                     # K = 4, 16; d = 4; 5 seeds; reports/tune_strategies.*
    python scripts/compare_tune_strategies.py --quick --out /tmp  # K = 3, 1 seed (CI)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import script_meta, write_report  # noqa: E402
from botorch_dp import tune  # noqa: E402
from botorch_dp.optim.options import FixedClip  # noqa: E402
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace  # noqa: E402
from botorch_dp.utils import torch_threads  # noqa: E402

STRATEGIES = ("enumerate", "sample")


def make_task(num_choices: int, dim: int, num_users: int, seed: int):
    r"""The task of one seed: its space, its objective (q dicts -> q x n losses) and its true loss."""
    g = torch.Generator().manual_seed(1000 + seed)
    offsets = torch.cat([torch.zeros(1), 0.2 + 0.8 * torch.rand(num_choices - 1, generator=g)]).double()
    offsets = offsets[torch.randperm(num_choices, generator=g)]
    optima = 0.2 + 0.6 * torch.rand(num_choices, dim, generator=g, dtype=torch.float64)
    noise = 0.1 * torch.randn(num_users, generator=g, dtype=torch.float64)
    names = [f"x{j}" for j in range(dim)]
    choices = tuple(f"c{k}" for k in range(num_choices))
    space = SearchSpace([*(Hyperparameter(name, 0.0, 1.0) for name in names), Categorical("choice", choices)])

    def true_loss(config) -> float:
        k = choices.index(config["choice"])
        x = torch.tensor([config[name] for name in names], dtype=torch.float64)
        return float(offsets[k] + (x - optima[k]).pow(2).sum())

    def objective(configs):
        return torch.stack([(true_loss(c) + noise).clamp(min=0.0) for c in configs])

    return space, objective, true_loss, float(offsets.min())


def run(args: argparse.Namespace) -> dict:
    rows = []
    for num_choices in args.choices:
        for seed in args.seeds:
            space, objective, true_loss, best = make_task(num_choices, args.dim, args.users, seed)
            for strategy in STRATEGIES:
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the seeded noise's PrivacyWarning (a reproduction)
                    result = tune(
                        objective,
                        space,
                        epsilon=args.epsilon,
                        delta=args.delta,
                        seed=seed,
                        progress=False,
                        strategy=strategy,
                        method="dp_gibo",  # both strategies are DP-GIBO's (no default rule)
                        mean_trials=args.mean_trials,
                        num_iterations=args.iterations,
                        clip=FixedClip(1.0),
                        raw_samples=16,
                        num_restarts=1,
                    )
                rows.append(
                    {
                        "choices": num_choices,
                        "seed": seed,
                        "strategy": strategy,
                        "true_loss": true_loss(result.hyperparameters),
                        "best_offset": best,
                        "chose_best_choice": result.hyperparameters["choice"]
                        == min(
                            space.categoricals[0].choices,
                            key=lambda c: true_loss({**result.hyperparameters, "choice": c}),
                        ),
                        "epsilon": result.guarantee.epsilon,
                        "seconds": time.perf_counter() - start,
                    }
                )
    return {"rows": rows, "summary": summarize(rows, args)}


def summarize(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    out = []
    for num_choices in args.choices:
        by = {s: {r["seed"]: r for r in rows if r["choices"] == num_choices and r["strategy"] == s} for s in STRATEGIES}
        diffs = [by["enumerate"][s]["true_loss"] - by["sample"][s]["true_loss"] for s in args.seeds]
        entry = {"choices": num_choices}
        for s in STRATEGIES:
            losses = [by[s][seed]["true_loss"] for seed in args.seeds]
            entry[s] = {
                "mean_true_loss": statistics.fmean(losses),
                "se": statistics.stdev(losses) / math.sqrt(len(losses)) if len(losses) > 1 else None,
                "seconds": statistics.fmean(by[s][seed]["seconds"] for seed in args.seeds),
            }
        entry["enumerate_wins"] = sum(d < 0 for d in diffs)
        entry["paired_difference"] = statistics.fmean(diffs)
        entry["paired_se"] = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None
        out.append(entry)
    return out


def markdown(report: dict) -> str:
    m = report["meta"]
    lines = [
        "# tune: enumerate vs sample (categorical configurations)",
        "",
        f"Command: `{m['command']}`  ",
        f"Machine: {m['machine']}, {m['cpus']} CPUs, {m['threads']} torch thread(s); "
        f"Python {m['python']}, torch {m['torch']}; {m['date']}",
        "",
        f"Synthetic task (see the script's docstring): d = {m['dim']} continuous + one categorical with K choices, "
        f"n = {m['users']} users, ε = {m['epsilon']:g}, δ = {m['delta']:g}, T = {m['iterations']} per run, "
        f"E[K_trials] = {m['mean_trials']:g} for sample; {len(m['seeds'])} paired seeds. True loss: NON-PRIVATE "
        "diagnostic (the best choice's offset is 0).",
        "",
        "| K | enumerate: true loss | sample: true loss | enumerate − sample (paired) | enumerate wins "
        "| s per call (enum / sample) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    fmt = lambda v, se: f"{v:.3f}" + ("" if se is None else f" ± {se:.3f}")  # noqa: E731
    for e in report["summary"]:
        lines.append(
            f"| {e['choices']} | {fmt(e['enumerate']['mean_true_loss'], e['enumerate']['se'])} | "
            f"{fmt(e['sample']['mean_true_loss'], e['sample']['se'])} | "
            f"{fmt(e['paired_difference'], e['paired_se'])} | {e['enumerate_wins']}/{len(m['seeds'])} | "
            f"{e['enumerate']['seconds']:.1f} / {e['sample']['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--choices", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--dim", type=int, default=4)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--epsilon", type=float, default=3.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--mean-trials", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="K = 3, one seed, 2 iterations (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    args = parser.parse_args(argv)
    if args.quick:
        args.choices, args.seeds, args.iterations = [3], [0], 2
    with torch_threads(args.threads):
        report = run(args)
    report["meta"] = {
        **script_meta("scripts/compare_tune_strategies.py", argv if argv is not None else sys.argv[1:], args.threads),
        **{k: getattr(args, k) for k in ("dim", "users", "epsilon", "delta", "iterations", "mean_trials", "seeds")},
    }
    write_report(args.out, "tune_strategies", report, markdown(report), indent=1, allow_nan=True)
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
