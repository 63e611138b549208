#!/usr/bin/env python
r"""Does following the planner's method recommendation pay off on the PRIVATE task? (issue 32, item 3)

Two closed-form tasks where the answer is known in advance:

* ``quadratic30``: per-user loss ``½‖θ − x_i‖²`` in ``d = 30`` (``x_i ~ 1 + N(0, I)``), box
  ``[-2, 4]^30``, ``θ₀ = 0``, the exact quadratic kernel, ``n = 10,000`` private users: local
  search should win;
* ``basin2``: ``1 − exp(−‖θ − c_i‖²/(2 w²))`` in ``d = 2`` (``c_i ~ (0.7, 0.7) + 0.02 N(0, I)``,
  ``w = 0.2``), box ``[0, 1]²``, ``θ₀ = (0.15, 0.15)``, ``n = 2,000``: flat where DP-GIBO starts,
  so random search should win.

Per task: the planner's method choice (``plan.compare_methods``, the step ``plan_private_run``
takes last) on a PUBLIC proxy of 200 other users drawn from the same distribution, ``r``
paired repeats; then every candidate (resolved by the plan, so it runs as simulated) runs
PRIVATELY on the private users (``run_private`` with a fresh ledger, the same seeds for every
method), side by side in this process. The score of a release is the private users' mean loss
at it: a NON-PRIVATE diagnostic. Privacy noise comes from the seeds (a reproduction, never a
release).

Usage::

    python scripts/compare_plan_methods.py                       # 5 private seeds, 3 plan repeats
    python scripts/compare_plan_methods.py --quick --out /tmp    # 1 seed, 1 repeat (a smoke run)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, TypedDict, cast

import torch
from gpytorch.kernels import PolynomialKernel, RBFKernel, ScaleKernel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import script_meta, write_report  # noqa: E402
from botorch_dp.methods.protocol import CandidateMethod  # noqa: E402
from botorch_dp.optim.config import DPGIBOConfig  # noqa: E402
from botorch_dp.optim.options import FixedClip, batch_rule  # noqa: E402
from botorch_dp.plan import compare_methods  # noqa: E402
from botorch_dp.privacy.ledger import PrivacyLedger  # noqa: E402
from botorch_dp.utils import torch_threads  # noqa: E402

PROXY_USERS = 200


class _FastSearch(TypedDict):
    num_restarts: int
    raw_samples: int


class MethodEntry(TypedDict, total=False):
    r"""One method's row of a task: its plan (always) and, when it ran, its private runs."""

    proxy_losses: list[float]
    unavailable: str | None
    settings: str | None
    private_losses: list[float]
    private_mean: float
    private_se: float | None
    seconds: float
    epsilon: float


FAST: _FastSearch = {"num_restarts": 1, "raw_samples": 8}


def quadratic30(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = 1 + torch.randn(n, 30, generator=g, dtype=torch.float64)
    return lambda X: 0.5 * (X[:, None, :] - x[None]).pow(2).sum(-1)


def basin2(n: int, seed: int, width: float = 0.2):
    g = torch.Generator().manual_seed(seed)
    c = torch.tensor([0.7, 0.7], dtype=torch.float64) + 0.02 * torch.randn(n, 2, generator=g, dtype=torch.float64)
    return lambda X: 1 - torch.exp(-(X[:, None, :] - c[None]).pow(2).sum(-1) / (2 * width * width))


def task_config(name: str, epsilon: float) -> tuple:
    if name == "quadratic30":
        kernel = PolynomialKernel(power=2)
        kernel.offset = 1.0
        config = DPGIBOConfig(
            bounds=torch.tensor([[-2.0] * 30, [4.0] * 30], dtype=torch.float64),
            kernel=kernel,
            theta0=torch.zeros(30, dtype=torch.float64),
            search_radius=0.5,
            epsilon=epsilon,
            delta=1e-5,
            num_iterations=3,
            step_size=0.5,
            batches=batch_rule(3, maxiter=10),
            clip=FixedClip(4.0),
            **FAST,
        )
        return quadratic30, 10_000, config
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).to(torch.float64)
    kernel.base_kernel.lengthscale = 0.2
    config = DPGIBOConfig(
        bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64),
        kernel=kernel,
        theta0=torch.full((2,), 0.15, dtype=torch.float64),
        search_radius=0.05,
        epsilon=epsilon,
        delta=1e-5,
        num_iterations=6,
        step_size=0.1,
        batches=batch_rule(3, maxiter=10),
        clip=FixedClip(0.01),
        **FAST,
    )
    return basin2, 2_000, config


def _se(values: list[float]) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def run_task(name: str, args: argparse.Namespace) -> dict[str, Any]:
    make, n, config = task_config(name, args.epsilon)
    proxy, private = make(PROXY_USERS, 1), make(n, 2)  # other users from the same distribution
    start = time.perf_counter()
    comparison = compare_methods(
        proxy,
        config,
        num_users=n,
        num_proxy_users=PROXY_USERS,
        evaluations=config.max_evaluations,
        seeds=list(range(100, 100 + args.plan_repeats)),
        progress=False,
    )
    plan_seconds = time.perf_counter() - start
    methods: dict[str, MethodEntry] = {}
    for score in comparison.scores:
        entry: MethodEntry = {
            "proxy_losses": list(score.proxy_losses),
            "unavailable": score.unavailable,
            "settings": None if score.method is None else score.method.describe(),
        }
        if score.method is not None:
            losses: list[float] = []
            seconds: list[float] = []
            for seed in args.seeds:
                start = time.perf_counter()
                # compare_methods's candidates (continuous spaces) all run privately themselves
                run = cast(CandidateMethod, score.method).run_private(private, ledger=PrivacyLedger(), seed=seed)
                seconds.append(time.perf_counter() - start)
                losses.append(float(private(run.theta.reshape(1, -1)).mean()))  # NON-PRIVATE diagnostic
            entry.update(
                {
                    "private_losses": losses,
                    "private_mean": statistics.fmean(losses),
                    "private_se": _se(losses),
                    "seconds": statistics.fmean(seconds),
                    "epsilon": run.epsilon,
                }
            )
        methods[score.name] = entry
    recommended = comparison.scores[comparison.best].name
    ran = {k: v for k, v in methods.items() if "private_mean" in v}
    best_private = min(ran, key=lambda k: ran[k]["private_mean"])
    diffs = [a - b for a, b in zip(ran[recommended]["private_losses"], ran["dp_gibo"]["private_losses"], strict=True)]
    return {
        "task": name,
        "num_users": n,
        "dim": config.bounds.shape[1],
        "recommended": recommended,
        "best_on_private_task": best_private,
        "plan_seconds": plan_seconds,
        "methods": methods,
        "recommended_minus_dp_gibo": statistics.fmean(diffs),
        "recommended_minus_dp_gibo_se": _se(diffs),
        "recommended_wins_over_dp_gibo": sum(d < 0 for d in diffs),
        "table": comparison.table(),
    }


def markdown(report: dict[str, Any]) -> str:
    m = report["meta"]
    fmt = lambda v, se: f"{v:.4g}" + ("" if se is None else f" ± {se:.2g}")  # noqa: E731
    lines = [
        "# The planner's method choice, checked on the private task",
        "",
        f"Command: `{m['command']}`  ",
        f"Machine: {m['machine']}, {m['cpus']} CPUs, {m['threads']} torch thread(s); "
        f"Python {m['python']}, torch {m['torch']}; {m['date']}",
        "",
        f"ε = {m['epsilon']:g}, δ = 1e-5; the plan: {PROXY_USERS} public proxy users, "
        f"{m['plan_repeats']} paired repeats; "
        f"then each method privately on the private users with {len(m['seeds'])} paired seeds. Private loss: the "
        "private users' mean loss at the release (NON-PRIVATE diagnostic). See the script's docstring for the tasks.",
        "",
        "| task | d | n | recommended | best on the private task | DP-GIBO | private random search | DP-HyPO | "
        "recommended − DP-GIBO (paired) | wins |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for t in report["tasks"]:
        cells = []
        for k in ("dp_gibo", "private_random_search", "dp_hypo"):
            e = t["methods"].get(k, {})
            cells.append(fmt(e["private_mean"], e["private_se"]) if "private_mean" in e else "not run")
        lines.append(
            f"| {t['task']} | {t['dim']} | {t['num_users']} | {t['recommended']} | {t['best_on_private_task']} | "
            + " | ".join(cells)
            + f" | {fmt(t['recommended_minus_dp_gibo'], t['recommended_minus_dp_gibo_se'])} | "
            f"{t['recommended_wins_over_dp_gibo']}/{len(m['seeds'])} |"
        )
    lines.append("")
    for t in report["tasks"]:
        lines += [f"Plan on the proxy, {t['task']} ({t['plan_seconds']:.0f} s):", "", "```", t["table"], "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["quadratic30", "basin2"], choices=["quadratic30", "basin2"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--plan-repeats", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="one seed, one plan repeat (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.plan_repeats = [0], 1
    with torch_threads(args.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise (a reproduction) and the proxy's n
        report: dict[str, Any] = {"tasks": [run_task(name, args) for name in args.tasks]}
    report["meta"] = {
        **script_meta("scripts/compare_plan_methods.py", argv if argv is not None else sys.argv[1:], args.threads),
        "epsilon": args.epsilon,
        "seeds": args.seeds,
        "plan_repeats": args.plan_repeats,
    }
    write_report(args.out, "plan-method", report, markdown(report), indent=1, allow_nan=True)
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
