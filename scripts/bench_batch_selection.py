#!/usr/bin/env python
r"""Joint vs greedy batch selection in DP-GIBO: gradient information per evaluation.

For each input dimension ``d`` and surrogate noise ``σ²`` the script builds DP-GIBO loops
(RBF kernel with length-scale 1, box ``[0, 5]^d``, ``θ₀`` uniform in the box per seed,
search radius 0.5, non-private so that no noise is drawn) and compares the two values of
``DPGIBOConfig.batch_search`` side by side on the same ``θ₀``:

- fixed batches ``b = d + 1``: posterior gradient trace ``tr Σ_D(θ)`` left after the
  first batch (lower is better; the prior trace is ``d``);
- adaptive batches (``bias_tolerance``, ``b_max = d + 1``): points asked and trace reached in the
  first two iterations (the loop takes one step on a linear public test objective
  between them, so the second batch starts from the first one's points);
- the wall time of each ``ask()``.

Usage::

    python scripts/bench_batch_selection.py            # d = 5, 15, 33; 3 seeds
    python scripts/bench_batch_selection.py --quick    # tiny smoke configuration
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
import warnings
from typing import Literal

import torch
from gpytorch.kernels import RBFKernel

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import AdaGrad, batch_rule
from botorch_dp.utils import torch_threads

BatchSearch = Literal["greedy", "joint"]
SELECTIONS: tuple[BatchSearch, ...] = ("greedy", "joint")


def make_config(d: int, noise: float, seed: int, selection: BatchSearch, args, **batches) -> DPGIBOConfig:
    kernel = RBFKernel(ard_num_dims=d)
    kernel.lengthscale = 1.0
    theta0 = 5 * torch.rand(d, generator=torch.Generator().manual_seed(1000 + seed), dtype=torch.float64)
    return DPGIBOConfig(
        bounds=torch.tensor([[0.0] * d, [5.0] * d], dtype=torch.float64),
        kernel=kernel,
        privacy_mu=math.inf,
        num_iterations=3,
        step_size=0.3,
        step_rule=AdaGrad(),
        search_radius=0.5,
        noise_variance=noise,
        theta0=theta0,
        seed=seed,
        raw_samples=args.raw_samples,
        num_restarts=args.num_restarts,
        batches=batch_rule(search=selection, **batches),
    )


def trace_after(opt: DPGIBO, X: torch.Tensor) -> float:
    D = torch.cat([opt.evaluation_points, X])
    return float(GradientGP(D, opt.kernel, opt.noise_variance).posterior_trace(opt.theta))


def timed_ask(opt: DPGIBO) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    X = opt.ask()
    return X, time.perf_counter() - start


def run_case(d: int, noise: float, seed: int, selection: BatchSearch, args) -> dict:
    out = {}
    # fixed batches of d + 1 points
    opt = DPGIBO(make_config(d, noise, seed, selection, args, size=d + 1))
    X, wall = timed_ask(opt)
    out["fixed_trace"], out["fixed_time"] = trace_after(opt, X), wall
    # adaptive batches, two iterations
    opt = DPGIBO(make_config(d, noise, seed, selection, args, bias_tolerance=args.bias_tolerance))
    direction = torch.linspace(-1.0, 1.0, d, dtype=torch.float64)
    for it in (1, 2):
        X, wall = timed_ask(opt)
        out[f"adaptive{it}_points"], out[f"adaptive{it}_trace"] = X.shape[0], trace_after(opt, X)
        out[f"adaptive{it}_time"] = wall
        # a public linear test objective (3 identical users) moves θ between iterations
        opt.tell(X, (X @ direction).unsqueeze(-1).expand(-1, 3))
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dims", type=int, nargs="+", default=[5, 15, 33])
    parser.add_argument("--noises", type=float, nargs="+", default=[1e-4, 0.0025])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--bias-tolerance", type=float, default=0.5, help="bias tolerance of the adaptive rule (tr Σ ≤ it)"
    )
    parser.add_argument("--raw-samples", type=int, default=32)
    parser.add_argument("--num-restarts", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.quick:
        args.dims, args.noises, args.seeds = [3], [1e-4], 1
    with torch_threads(args.threads), warnings.catch_warnings():  # restored when main returns (tests)
        warnings.simplefilter("ignore")
        print(
            f"# batch selection: {platform.machine()}, torch {torch.__version__}, {args.threads} thread(s), "
            f"optimize_acqf raw_samples={args.raw_samples}, num_restarts={args.num_restarts}, "
            f"bias_tolerance={args.bias_tolerance}, "
            f"{args.seeds} seed(s), medians over seeds"
        )
        print()
        print(
            "| d | σ² | selection | fixed b=d+1: trace left | time (s) | adaptive it.1: points / trace | "
            "time (s) | adaptive it.2: points / trace | time (s) |"
        )
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        rows = []
        for d in args.dims:
            for noise in args.noises:
                for selection in SELECTIONS:
                    cases = [run_case(d, noise, seed, selection, args) for seed in range(args.seeds)]
                    med = {k: statistics.median(c[k] for c in cases) for k in cases[0]}
                    rows.append({"d": d, "noise": noise, "selection": selection, **med})
                    print(
                        f"| {d} | {noise:g} | {selection} | {med['fixed_trace']:.3g} | {med['fixed_time']:.2f} | "
                        f"{med['adaptive1_points']:g} / {med['adaptive1_trace']:.3g} | {med['adaptive1_time']:.2f} | "
                        f"{med['adaptive2_points']:g} / {med['adaptive2_trace']:.3g} | {med['adaptive2_time']:.2f} |",
                        flush=True,
                    )
    return rows


if __name__ == "__main__":
    main()
