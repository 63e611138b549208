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

``--task cheap`` is a task whose objective costs little next to DP-GIBO's own time (issue 43,
item 9): ridge regression with one penalty λ_g per feature group (``GroupRidge``: ``d`` groups of
two features, 200 training rows, 150 users), θ the unit cube over ``log10 λ``, with ``tune``'s
DP-GIBO settings (the space's scaled RBF, length-scale 0.2; AdaGrad η = 0.2, clip 2, T = 20,
batches of ``d + 1``, μ = 1) and the default batch search (``DPGIBOConfig``'s ``num_restarts``,
``raw_samples``, ``acqf_speed``).

Arms (``--arms``): ``default`` (the run as configured), ``adam`` (a plain reference design
optimizer in place of the batch search: ``adam_batch``, 100 Adam steps on the reduction of the
posterior-gradient trace, ``qGradientInformation``, over the ``d + 1`` new points from a uniform
random start in the local box), ``fast_search`` (the preset's ``acqf_maxiter=100``) and
``reference`` (``acqf_speed="reference"``). With two or more arms and ``--out``, the arms of a
seed run one after the other in this process (their order reversed from seed to seed, so the
load of a shared machine hits all) and ``OUT.json`` / ``OUT.md`` get every run, the command,
machine, threads, date and load, and per ``d`` and arm the median own time (wall time less the
objective's), the paired own-time ratio to the first arm and the paired final-loss difference.

Usage::

    python scripts/profile_dp_gibo.py --dims 5 15 30 60 100 --seed 0
    python scripts/profile_dp_gibo.py --dims 60 --profile      # + cProfile's top functions
    python scripts/profile_dp_gibo.py --dims 5 --iterations 3  # a quick smoke run
    python scripts/profile_dp_gibo.py --task dimension --dims 100 --clip 2.4 --threads 2
        # the loss-against-dimension experiment's DP-GIBO job (its d = 100 pilot B = 2.4)
    python scripts/profile_dp_gibo.py --task cheap --dims 20 50 --seeds 0 1 2 3 4 5 6 7 8 9 \
        --arms default adam --threads 1 --out reports/design_optimizer_speed

Run with ``OMP_NUM_THREADS`` / ``--threads`` set to the cores you want to measure on.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import datetime
import functools
import io
import json
import math
import os
import platform
import pstats
import statistics
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeGuard

import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from torch import Tensor

import botorch_dp.optim.options.batches as batches
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.acquisition import qGradientInformation
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.objectives.per_user_problem import PerUserProblem
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule, from_spec
from botorch_dp.optim.options.batches import BATCH_SEARCHES, BatchSearch
from botorch_dp.optim.presets import PRESETS
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from botorch_dp.utils import torch_threads

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
        (batches, "optimize_acqf", "optimize_acqf"),
        (qGradientInformation, "forward", "acquisition"),
        (batches, "posterior_trace", "posterior trace"),
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


class GroupRidge(PerUserProblem):
    r"""The cheap task: ridge regression with one penalty per feature group (``--task cheap``).

    ``dim`` groups of ``group_size`` features (standard normal), ``n_train`` training rows and
    ``num_users`` validation users; ``y = Xw* + ε`` with ``w*`` nonzero on a fifth of the groups
    (at least one), standardised. θ ∈ [0, 1]^d sets ``log10 λ_g = −2 + 6θ_g``; the loss of user
    ``i`` is the squared error of the ridge fit at ``λ`` on ``(x_i, y_i)``. One batched
    ``p x p`` solve per point (``p = group_size · d``): cheap next to DP-GIBO's own time.
    """

    name = "group_ridge"

    def __init__(self, dim: int, seed: int = 0, *, group_size: int = 2, n_train: int = 100, num_users: int = 150):
        super().__init__(torch.stack([torch.zeros(dim), torch.ones(dim)]).double(), num_users, seed)
        gen = torch.Generator().manual_seed(self._data_seed)
        p, self.group_size = dim * group_size, group_size
        X = torch.randn(n_train + num_users, p, generator=gen, dtype=torch.float64)
        relevant = torch.randperm(dim, generator=gen)[: max(1, dim // 5)]
        w = torch.zeros(dim, group_size, dtype=torch.float64)
        w[relevant] = torch.randn(len(relevant), group_size, generator=gen, dtype=torch.float64)
        y = X @ w.reshape(-1) + torch.randn(X.shape[0], generator=gen, dtype=torch.float64)
        y = (y - y.mean()) / y.std()
        self.train_X, self.train_y = X[:n_train], y[:n_train]
        self.val_X, self.val_y = X[n_train:], y[n_train:]
        self._gram, self._moment = self.train_X.T @ self.train_X, self.train_X.T @ self.train_y

    def evaluate_true(self, X: Tensor) -> Tensor:
        lam = torch.pow(10.0, -2.0 + 6.0 * X).repeat_interleave(self.group_size, dim=-1)  # q x p
        A = self._gram + torch.diag_embed(lam)
        w = torch.linalg.solve(A, self._moment.expand(X.shape[0], -1))  # q x p
        return (w @ self.val_X.T - self.val_y).square()  # q x n

    def recommended_kernel(self) -> ScaleKernel:
        r"""``SearchSpace.recommended_kernel``'s: a scaled isotropic RBF, length-scale 0.2, fixed."""
        kernel = ScaleKernel(RBFKernel(ard_num_dims=self.dim)).to(torch.float64)
        kernel.base_kernel.lengthscale = torch.full((1, self.dim), 0.2, dtype=torch.float64)
        kernel.outputscale = 1.0
        return kernel.requires_grad_(False)


#: The reference design optimizer's Adam steps and learning rate (units of the local box's width).
ADAM_STEPS, ADAM_LR = 100, 0.05


def adam_batch(
    gp: GradientGP,
    theta: Tensor,
    bounds: Tensor,
    generator: torch.Generator,
    *,
    batch_size: int,
    bias_tolerance: float | None = None,
    basis: Tensor | None = None,
    steps: int = ADAM_STEPS,
    lr: float = ADAM_LR,
    **ignored: Any,
) -> Tensor:
    r"""The plain reference design optimizer (``--arms adam``): in place of ``search_batch``.

    Maximises ``qGradientInformation`` (the reduction of ``tr Σ_D(θ)`` by the new points, its
    gradient in closed form where the kernel allows, as the default search's) over a
    ``batch_size x d`` batch by ``steps`` Adam steps from a uniform random start in the local
    box ``bounds`` (drawn from the search generator), in the box's unit coordinates, clamped to
    the box after each step. Fixed batches only.
    """
    if bias_tolerance is not None:
        raise ValueError("the adam reference arm takes fixed batches (no bias_tolerance)")
    lo, width = bounds[0], bounds[1] - bounds[0]
    acqf = qGradientInformation(gp, theta, basis=basis)
    with torch_threads(1):
        u = torch.rand(batch_size, theta.shape[-1], generator=generator, dtype=theta.dtype).requires_grad_(True)
        adam = torch.optim.Adam([u], lr=lr)
        for _ in range(steps):
            adam.zero_grad()
            (-acqf((lo + width * u).unsqueeze(0)).sum()).backward()
            adam.step()
            with torch.no_grad():
                u.clamp_(0.0, 1.0)
    return (lo + width * u).detach()


#: ``--arms``: the run as configured, the reference design optimizer, the ``fast_search`` preset and
#: the search before issue 33.
ARMS = ("default", "adam", "fast_search", "reference")


@contextlib.contextmanager
def arm_patch(arm: str) -> Iterator[None]:
    r"""For ``arm="adam"``, ``adam_batch`` in place of the batch search where the loop looks it up."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    saved = batches.search_batch
    if arm == "adam":
        batches.search_batch = adam_batch
    try:
        yield
    finally:
        batches.search_batch = saved


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
    batch_search: str | None = None,
) -> tuple[DPGIBO, PerUserProblem]:
    r"""The DP-GIBO optimizer and objective of ``Runner.dp_gibo_gp`` at dimension ``dim`` (``task="e1"``),
    or of the loss-against-dimension experiment's ``dp_gibo`` job (``task="dimension"``:
    ``dimension.gibo_config`` with ``clip`` as B; ``n_total`` unused, ``acqf_maxiter`` ``None``
    keeps the experiment's; ``acqf_speed`` ``None`` keeps the config's default), or the cheap
    ``GroupRidge`` task (``task="cheap"``, ``n_total`` unused; see the module). ``batch_search``
    (``"joint"``, ``"greedy"``) ``None`` keeps the task's."""
    problem: PerUserProblem
    if task == "cheap":
        problem = GroupRidge(dim, seed)
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=iterations,
            privacy_mu=1.0,
            target_delta=1e-5,
            clip=FixedClip(clip),
            step_size=0.2,
            step_rule=AdaGrad(),
            noise_variance=1e-4,
            theta0=problem.default_theta0(),
            seed=seed,
            batches=batch_rule(maxiter=acqf_maxiter),
        )
    elif task == "dimension":
        s = dimension.Settings(iterations=iterations)
        if acqf_maxiter is not None:
            s = dataclasses.replace(s, acqf_maxiter=acqf_maxiter)
        problem, config = dimension.gibo_config(s, dim, seed, "dp_gibo", clip)
    elif task == "e1":
        e1 = Settings(gp_dim=dim, gp_n_total=n_total)  # the paper's settings (not the dimension task's)
        problem = gp = gp_problem(e1, seed)
        if not _is_batch_search(e1.batch_selection):
            raise ValueError(f"batch_selection must be one of {tuple(BATCH_SEARCHES)}, got {e1.batch_selection!r}")
        config = DPGIBOConfig(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            num_iterations=iterations,
            privacy_mu=e1.privacy_mu,
            clip=FixedClip(clip),
            step_size=e1.step_size,
            step_rule=AdaGrad(),
            batches=batch_rule(bias_tolerance=e1.bias_tolerance, search=e1.batch_selection, maxiter=acqf_maxiter),
            noise_variance=gp.fit_noise_variance,
            search_radius=e1.search_radius,
            theta0=gp_theta0(gp, seed, e1.gp_theta0),
            seed=seed,
            target_delta=e1.target_delta,
            raw_samples=e1.raw_samples,
            num_restarts=e1.num_restarts,
        )
    else:
        raise ValueError(f"task must be 'e1', 'dimension' or 'cheap', got {task!r}")
    if acqf_speed is not None:
        batches = from_spec("batches", {**config.batches.spec(), "speed": acqf_speed})  # the rule checks it
        config = dataclasses.replace(config, batches=batches)
    if batch_search is not None:
        if not _is_batch_search(batch_search):
            raise ValueError(f"batch_search must be one of {tuple(BATCH_SEARCHES)}, got {batch_search!r}")
        config = dataclasses.replace(
            config, batches=from_spec("batches", {**config.batches.spec(), "search": batch_search})
        )
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
    arm: str = "default",
    batch_search: str | None = None,
) -> dict:
    r"""One timed run; returns the breakdown, the total, the evaluations and a digest of the release.

    ``total`` is wall-clock time, ``cpu`` the process's CPU time (less sensitive to other
    load on a shared machine; with one thread it is close to the wall time of an idle core).
    With ``verbose``, one line per step (elapsed wall and CPU time, ``|D|``). ``arm``: one of
    ``ARMS`` (``fast_search`` sets the preset's ``acqf_maxiter``, ``reference`` the
    ``acqf_speed``, over the arguments).
    """
    if arm == "fast_search":
        acqf_maxiter = PRESETS["fast_search"].settings["batches"].maxiter
    elif arm == "reference":
        acqf_speed = "reference"
    optimizer, problem = make_run(
        dim,
        seed,
        iterations=iterations,
        clip=clip,
        n_total=n_total,
        acqf_maxiter=acqf_maxiter,
        task=task,
        acqf_speed=acqf_speed,
        batch_search=batch_search,
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

    with arm_patch(arm), instrumented(timer), warnings.catch_warnings():
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
        "arm": arm,
        "task": task,
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
        f"d = {run['dim']}, seed {run['seed']}, {run.get('arm', 'default')}: {total:.1f} s wall "
        f"({run['cpu']:.1f} s CPU), "
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


def machine() -> str:
    r"""The CPU model, logical CPUs, Python and torch versions."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, torch {torch.__version__}"


def run_row(run: dict) -> dict:
    r"""The numbers of one run that a comparison keeps: own time = wall time less the objective's."""
    objective = run["parts"].get("objective", 0.0)
    keep = ("dim", "seed", "arm", "task", "total", "cpu", "evaluations", "final_loss", "load")
    return {
        **{k: run[k] for k in keep if k in run},
        "objective": objective,
        "own": run["total"] - objective,
        "batch_search": run["parts"].get("batch search", 0.0),
        "acquisition_evaluations": run["calls"].get("acquisition", 0),
    }


def _mean_se(values: list[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan"))


def summarize(data: dict) -> str:
    r"""The comparison's Markdown: per ``d`` and arm against the first arm, paired by seed."""
    runs, arms = data["runs"], data["arms"]
    base = arms[0]
    loads = [r["load"] for r in runs] or [float("nan")]
    lines = [
        f"# Side by side: {', '.join(f'`{a}`' for a in arms)} (`scripts/profile_dp_gibo.py`)",
        "",
        f"- command: `{data['command']}`",
        f"- machine: {data['machine']}; torch threads {data['threads']}; started {data['date']}",
        f"- load average (1 min) at the start {data['load_start']:.1f}, over the runs {min(loads):.1f} to "
        f"{max(loads):.1f} (median {statistics.median(loads):.1f})",
        f"- task `{data['task']}`, T = {data['iterations']}, clip {data['clip']}, acqf_speed "
        f"{data.get('acqf_speed') or 'the default'}, batch_search {data.get('batch_search') or 'the default'}; "
        "the arms of a seed run one after the other in this process, their order reversed from seed to seed",
        "",
        "Own time = the run's wall time less the objective's (seconds, medians over seeds); the ratio is "
        "paired by seed (same data, θ₀ and privacy noise). Final losses are NON-PRIVATE diagnostics; "
        "arm − base < 0 is better for the arm.",
        "",
        f"| d | arm (vs `{base}`) | seeds | own (s) base / arm | own arm / base (paired median) | objective (s) | "
        "acqf evaluations base / arm | final loss base / arm (mean ± s.e.) | arm − base (mean ± s.e.) | "
        "arm better |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_seed = []
    for dim in sorted({r["dim"] for r in runs}):
        by_seed: dict[int, dict[str, dict]] = {}
        for r in runs:
            if r["dim"] == dim:
                by_seed.setdefault(r["seed"], {})[r["arm"]] = r
        for arm in arms[1:]:
            pairs = [p for _, p in sorted(by_seed.items()) if base in p and arm in p]
            if not pairs:
                continue
            ref, new = [p[base] for p in pairs], [p[arm] for p in pairs]
            ratio = statistics.median(p[arm]["own"] / p[base]["own"] for p in pairs)
            diff = [p[arm]["final_loss"] - p[base]["final_loss"] for p in pairs]
            (dm, dse), (lb, lbse), (la, lase) = (
                _mean_se(diff),
                _mean_se([r["final_loss"] for r in ref]),
                _mean_se([r["final_loss"] for r in new]),
            )
            med = {k: [statistics.median(r[k] for r in rows) for rows in (ref, new)] for k in ("own", "objective")}
            evals = [statistics.median(r["acquisition_evaluations"] for r in rows) for rows in (ref, new)]
            lines.append(
                f"| {dim} | {arm} | {len(pairs)} | {med['own'][0]:.2f} / {med['own'][1]:.2f} | {ratio:.2f} | "
                f"{med['objective'][0]:.2f} / {med['objective'][1]:.2f} | {evals[0]:.0f} / {evals[1]:.0f} | "
                f"{lb:.4f} ± {lbse:.4f} / {la:.4f} ± {lase:.4f} | {dm:+.4f} ± {dse:.4f} | "
                f"{sum(x < 0 for x in diff)}/{len(pairs)} |"
            )
            per_seed.append(
                f"- d = {dim}, {arm}: "
                + "; ".join(
                    f"{p[base]['seed']}: {p[base]['final_loss']:.4f} / {p[arm]['final_loss']:.4f} "
                    f"({p[base]['own']:.2f} / {p[arm]['own']:.2f} s)"
                    for p in pairs
                )
            )
    lines += ["", f"Per seed, final loss {base} / arm (own time):", "", *per_seed, ""]
    return "\n".join(lines)


def compare(args: argparse.Namespace, command: str) -> dict:
    r"""Every arm on every (d, seed), the arms of a seed back to back; ``OUT.json`` / ``OUT.md`` after each run."""
    data: dict[str, Any] = {
        "command": command,
        "machine": machine(),
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": os.getloadavg()[0],
        "task": args.task,
        "iterations": args.iterations,
        "clip": args.clip,
        "arms": list(args.arms),
        "acqf_speed": args.acqf_speed,
        "batch_search": args.batch_search,
        "adam": {"steps": ADAM_STEPS, "lr": ADAM_LR},
        "warm_maxiter": batches.WARM_MAXITER,
        "runs": [],
    }
    out = Path(args.out) if args.out else None
    for dim in args.dims:
        for i, seed in enumerate(args.seeds):
            for arm in args.arms if i % 2 == 0 else args.arms[::-1]:
                load = os.getloadavg()[0]
                run = profile_run(
                    dim,
                    seed,
                    iterations=args.iterations,
                    clip=args.clip,
                    n_total=args.n_total,
                    cprofile=False,
                    acqf_maxiter=args.acqf_maxiter,
                    task=args.task,
                    acqf_speed=args.acqf_speed,
                    arm=arm,
                    batch_search=args.batch_search,
                )
                row = {**run_row(run), "load": load}
                data["runs"].append(row)
                print(
                    f"d = {dim}, seed {seed}, {arm}: own {row['own']:.2f} s, objective {row['objective']:.2f} s, "
                    f"final loss {row['final_loss']:.5f} (load {load:.1f})",
                    flush=True,
                )
                if out is not None:
                    out.with_suffix(".json").write_text(json.dumps(data, indent=1))
                    out.with_suffix(".md").write_text(summarize(data))
    return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--task",
        choices=("e1", "dimension", "cheap"),
        default="e1",
        help="e1: the E.1 problem carried to d (default); dimension: the loss-against-dimension "
        "experiment's DP-GIBO job (400 training points, acqf_maxiter=100); cheap: GroupRidge",
    )
    parser.add_argument("--dims", type=int, nargs="+", default=[5, 15, 30, 60, 100])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="several seeds (default: --seed)")
    parser.add_argument("--iterations", type=int, default=None, help="T (default: E.1's 25; 20 with --task cheap)")
    parser.add_argument(
        "--clip", type=float, default=None, help="clip bound B (default: the paper's 3; 2 with --task cheap)"
    )
    parser.add_argument(
        "--arms", nargs="+", choices=ARMS, default=["default"], help="arms run side by side, the first the base"
    )
    parser.add_argument("--out", default=None, help="write OUT.json and OUT.md (the side-by-side comparison)")
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
    parser.add_argument(
        "--batch-search", choices=tuple(BATCH_SEARCHES), default=None, help="joint or greedy (default: the task's)"
    )
    args = parser.parse_args(argv)
    cheap = args.task == "cheap"
    args.iterations = args.iterations if args.iterations is not None else (20 if cheap else 25)
    args.clip = args.clip if args.clip is not None else (2.0 if cheap else 3.0)
    args.seeds = args.seeds if args.seeds is not None else [args.seed]
    if len(set(args.arms)) != len(args.arms):
        parser.error(f"--arms must differ, got {args.arms}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}")
    if len(args.arms) > 1 or args.out:
        command = "python " + " ".join(["scripts/profile_dp_gibo.py", *(sys.argv[1:] if argv is None else argv)])
        data = compare(args, command)
        print(summarize(data), flush=True)
        return
    for dim in args.dims:
        for seed in args.seeds:
            run = profile_run(
                dim,
                seed,
                iterations=args.iterations,
                clip=args.clip,
                n_total=args.n_total,
                cprofile=args.profile,
                verbose=args.verbose,
                acqf_maxiter=args.acqf_maxiter,
                task=args.task,
                acqf_speed=args.acqf_speed,
                arm=args.arms[0],
                batch_search=args.batch_search,
            )
            print(format_breakdown(run), flush=True)
            if args.profile:
                print(run["cprofile"], flush=True)


if __name__ == "__main__":
    main()
