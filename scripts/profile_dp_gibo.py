#!/usr/bin/env python
r"""Time one DP-GIBO run on the E.1 GP length-scale problem at a given ``d``, broken down by part.

The run is the one ``benchmarks.paper_runner.Runner.dp_gibo_gp`` makes with the E.1 settings
carried to dimension ``d`` (``GPRegressionLengthscales(dim=d, n_total=2000)``, 1000 users,
random θ₀, AdaGrad η = 0.3, T = 25, μ = 1, bias tolerance 0.5 with adaptive joint batches
of at most ``d + 1`` points, ``raw_samples = 32``, ``num_restarts = 1``), except that the
clip bound is fixed (``--clip``, default the paper's 3) instead of coming from the pilot;
the clip bound does not change the cost.

The breakdown (seconds, wall clock, nested parts listed under their parent):

- ``batch search`` (``ask``): ``search_batch``, of which ``optimize_acqf`` (the
  acquisition's optimisation: initial conditions and L-BFGS-B; of which ``acquisition``, the
  acquisition's evaluations, values only: its calls are the evaluations) and ``posterior trace``
  (the bias-tolerance checks);
- ``objective`` (the GP regression's validation losses, reported separately: it is the
  objective's own cost, not DP-GIBO's);
- ``tell``: of which ``gradient weights`` (``A = ∇k(θ, D)K⁻¹``) and ``mechanism`` (clip,
  mean, noise);
- ``other``: the rest of the run (checkpoints are off; configuration, bookkeeping);
- ``GP conditioning*`` (``GradientGP.condition_on``, the Cholesky update by a Schur
  complement), counted wherever it runs: in ``tell`` and inside the batch search's
  posterior traces, so it overlaps those lines and is not part of ``other``.

Usage::

    python scripts/profile_dp_gibo.py --dims 5 15 30 60 100 --seed 0
    python scripts/profile_dp_gibo.py --dims 60 --profile      # + cProfile's top functions
    python scripts/profile_dp_gibo.py --dims 5 --iterations 3  # a quick smoke run
    python scripts/profile_dp_gibo.py --task dimension --dims 100 --clip 2.4 --threads 2
        # the loss-against-dimension experiment's DP-GIBO job (its d = 100 pilot B = 2.4)

Run with ``OMP_NUM_THREADS`` / ``--threads`` set to the cores you want to measure on.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import functools
import io
import os
import pstats
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeGuard

import torch

import botorch_dp.optim.batch_search as batch_search
import botorch_dp.optim.options.batches as batches
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.batch_search import BATCH_SEARCHES, BatchSearch
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.problems.gp_regression import GPRegressionLengthscales

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is the repo's top-level benchmarks/, not installed

from benchmarks import dimension  # noqa: E402
from benchmarks.paper import Settings, gp_problem, gp_theta0  # noqa: E402

PARTS = (
    ("batch search", 0),
    ("optimize_acqf", 1),
    ("acquisition", 2),
    ("posterior trace", 1),
    ("objective", 0),
    ("tell", 0),
    ("gradient weights", 1),
    ("mechanism", 1),
    ("GP conditioning*", 0),
)


class Timer:
    r"""Accumulates wall time per part; re-entrant calls of one part are counted once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._depth: dict[str, int] = defaultdict(int)

    def wrap(self, part: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            self._depth[part] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth[part] -= 1
                if self._depth[part] == 0:
                    self.seconds[part] += time.perf_counter() - start
                    self.calls[part] += 1

        return timed


@contextlib.contextmanager
def instrumented(timer: Timer) -> Iterator[None]:
    r"""Wrap the timed functions where the loop looks them up; restore them afterwards."""
    patches = [
        (batches, "search_batch", "batch search"),
        (batch_search, "optimize_acqf", "optimize_acqf"),
        (qGradientInformation, "forward", "acquisition"),
        (batch_search, "posterior_trace", "posterior trace"),
        (DPGIBO, "tell", "tell"),
        (GradientGP, "condition_on", "GP conditioning*"),
        (GradientGP, "gradient_weights", "gradient weights"),
        (GaussianGradientMechanism, "release_sum", "mechanism"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, part in patches:
            setattr(owner, name, timer.wrap(part, getattr(owner, name)))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _is_batch_search(value: str) -> TypeGuard[BatchSearch]:
    return value in BATCH_SEARCHES


def make_run(
    dim: int,
    seed: int,
    *,
    iterations: int,
    clip: float,
    n_total: int,
    acqf_maxiter: int | None = None,
    task: str = "e1",
    acqf_speed: str | None = None,
) -> tuple[DPGIBO, GPRegressionLengthscales]:
    r"""The DP-GIBO optimizer and objective of ``Runner.dp_gibo_gp`` at dimension ``dim`` (``task="e1"``),
    or of the loss-against-dimension experiment's ``dp_gibo`` job (``task="dimension"``:
    ``dimension.gibo_config`` with ``clip`` as B; ``n_total`` unused, ``acqf_maxiter`` ``None``
    keeps the experiment's; ``acqf_speed`` ``None`` keeps the config's default)."""
    if task == "dimension":
        s = dimension.Settings(iterations=iterations)
        if acqf_maxiter is not None:
            s = dataclasses.replace(s, acqf_maxiter=acqf_maxiter)
        problem, config = dimension.gibo_config(s, dim, seed, "dp_gibo", clip)
    elif task == "e1":
        e1 = Settings(gp_dim=dim, gp_n_total=n_total)  # the paper's settings (not the dimension task's)
        problem = gp_problem(e1, seed)
        if not _is_batch_search(e1.batch_selection):
            raise ValueError(f"batch_selection must be one of {BATCH_SEARCHES}, got {e1.batch_selection!r}")
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=iterations,
            privacy_mu=e1.privacy_mu,
            clip_bound=clip,
            step_size=e1.step_size,
            step_rule="adagrad",
            bias_tolerance=e1.bias_tolerance,
            noise_variance=problem.fit_noise_variance,
            search_radius=e1.search_radius,
            theta0=gp_theta0(problem, seed, e1.gp_theta0),
            seed=seed,
            target_delta=e1.target_delta,
            raw_samples=e1.raw_samples,
            num_restarts=e1.num_restarts,
            batch_search=e1.batch_selection,
            acqf_maxiter=acqf_maxiter,
        )
    else:
        raise ValueError(f"task must be 'e1' or 'dimension', got {task!r}")
    if acqf_speed is not None:
        config = dataclasses.replace(config, acqf_speed=acqf_speed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the explicit seed's PrivacyWarning
        optimizer = DPGIBO(config)
    return optimizer, problem


def profile_run(
    dim: int,
    seed: int,
    *,
    iterations: int,
    clip: float,
    n_total: int,
    cprofile: bool,
    verbose: bool = False,
    acqf_maxiter: int | None = None,
    task: str = "e1",
    acqf_speed: str | None = None,
) -> dict:
    r"""One timed run; returns the breakdown, the total, the evaluations and a digest of the release.

    ``total`` is wall-clock time, ``cpu`` the process's CPU time (less sensitive to other
    load on a shared machine; with one thread it is close to the wall time of an idle core).
    With ``verbose``, one line per step (elapsed wall and CPU time, ``|D|``).
    """
    optimizer, problem = make_run(
        dim,
        seed,
        iterations=iterations,
        clip=clip,
        n_total=n_total,
        acqf_maxiter=acqf_maxiter,
        task=task,
        acqf_speed=acqf_speed,
    )
    timer = Timer()
    objective = timer.wrap("objective", problem)
    profiler = cProfile.Profile() if cprofile else None
    start, cpu_start = time.perf_counter(), time.process_time()

    def report(info) -> None:
        if verbose:
            print(
                f"    step {info.iteration:3d}: |D| = {optimizer.evaluation_points.shape[0]:5d}, "
                f"{time.perf_counter() - start:8.1f} s wall, {time.process_time() - cpu_start:8.1f} s CPU",
                flush=True,
            )

    with instrumented(timer), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, cpu_start = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        result = optimizer.run(objective, progress=False, callback=report)
        if profiler is not None:
            profiler.disable()
        total = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    release = result.release
    out = {
        "dim": dim,
        "seed": seed,
        "total": total,
        "cpu": cpu,
        "parts": dict(timer.seconds),
        "calls": dict(timer.calls),
        "evaluations": int(sum(release.batch_sizes)),
        "batch_sizes": list(release.batch_sizes),
        "final_theta": release.theta,
        "final_loss": float(problem.objective(release.theta)),
    }
    if profiler is not None:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(35)
        out["cprofile"] = buf.getvalue()
    return out


def format_breakdown(run: dict) -> str:
    parts, total = run["parts"], run["total"]
    lines = [
        f"d = {run['dim']}, seed {run['seed']}: {total:.1f} s wall ({run['cpu']:.1f} s CPU), "
        f"{run['evaluations']} evaluations, "
        f"batches {run['batch_sizes']}, final loss {run['final_loss']:.4f}"
    ]
    top = sum(parts.get(p, 0.0) for p, level in PARTS if level == 0 and not p.endswith("*"))
    for part, level in PARTS:
        sec = parts.get(part, 0.0)
        lines.append(
            f"  {'  ' * level}{part:<{20 - 2 * level}} {sec:8.2f} s  {100 * sec / total:5.1f}%  "
            f"({run['calls'].get(part, 0)} calls)"
        )
    lines.append(f"  {'other':<20} {total - top:8.2f} s  {100 * (total - top) / total:5.1f}%")
    lines.append(f"  DP-GIBO without the objective: {total - parts.get('objective', 0.0):.2f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--task",
        choices=("e1", "dimension"),
        default="e1",
        help="e1: the E.1 problem carried to d (default); dimension: the loss-against-dimension "
        "experiment's DP-GIBO job (400 training points, acqf_maxiter=100)",
    )
    parser.add_argument("--dims", type=int, nargs="+", default=[5, 15, 30, 60, 100])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=25, help="T (default: E.1's 25)")
    parser.add_argument("--clip", type=float, default=3.0, help="clip bound B (default: the paper's 3)")
    parser.add_argument("--n-total", type=int, default=2000, help="data points, half of them users")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions too")
    parser.add_argument("--verbose", action="store_true", help="print the elapsed time after every step")
    parser.add_argument(
        "--acqf-maxiter",
        type=int,
        default=None,
        help="cap on L-BFGS-B iterations per restart of the batch search (default: BoTorch's)",
    )
    parser.add_argument(
        "--acqf-speed",
        choices=("fast", "reference"),
        default=None,
        help="the batch search's acqf_speed (default: DPGIBOConfig's)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}")
    for dim in args.dims:
        run = profile_run(
            dim,
            args.seed,
            iterations=args.iterations,
            clip=args.clip,
            n_total=args.n_total,
            cprofile=args.profile,
            verbose=args.verbose,
            acqf_maxiter=args.acqf_maxiter,
            task=args.task,
            acqf_speed=args.acqf_speed,
        )
        print(format_breakdown(run), flush=True)
        if args.profile:
            print(run["cprofile"], flush=True)


if __name__ == "__main__":
    main()
