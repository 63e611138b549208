#!/usr/bin/env python
r"""Why DP-GIBO and GIBO lose on the paper's E.1 task (issue 18 item 1): one protocol change at a time.

Each variant changes one thing of the E.1 protocol of ``reports/`` (GP length-scales, d = 15,
n = 2000 split 50/50, T = 25, adaptive batches with bias tolerance 0.5, AdaGrad η = 0.3,
surrogate RBF ℓ = 1 with zero prior mean, σ = 0.05, θ₀ uniform in the box per seed) and runs,
on the same seeds: non-private GIBO (μ = ∞, no clipping), DP-GIBO (μ = 1, clip bound B from
the pilot of ``benchmarks.paper``, recomputed for the variant) and random search with DP-GIBO's
evaluation count on the same seed. Variants:

- ``baseline``: the protocol of ``reports/`` unchanged (checks the reuse of its numbers).
- ``centred``: each user's losses are centred on the user's own mean over the evaluated
  points before the gradient estimate, ``g_i = A (y_i − ȳ_i 1)``, i.e. a GP with a per-user
  constant prior mean instead of 0. It is a fixed linear map of the user's own losses, so
  clipping and the sensitivity 2B/n are unchanged (same μ). Not a package option yet: the
  script wraps ``GradientGP.gradient_weights`` (``A ← A − A 1 1ᵀ/N``) while it runs.
- ``eta1``: AdaGrad η = 1 instead of 0.3 (the reach of a coordinate grows ~3×).
- ``centred_eta1``: both.
- ``log``: the same length-scales parameterised by their logarithms (box [ln 0.05, ln 5]),
  θ₀ the log of the same start; random search then samples uniformly in the log box.
- ``centred_eta1_log``: all three.
- ``theta0_centre``: θ₀ = the box centre (GIBO's reference code starts at the centre).
- ``T50``: T = 50 (more evaluations; random search gets the same count).

All losses are NON-PRIVATE diagnostics: the noise-free validation loss of the returned
point, in the original E.1 objective. Runs are appended to ``<out>.json`` (resumable: a
(variant, method, seed) already there is skipped); ``<out>.md`` is the summary table
(mean ± s.e., median, wins per seed against random search).

    OMP_NUM_THREADS=1 python scripts/e1_investigation.py --variants centred eta1   # ~9 min per variant
    python scripts/e1_investigation.py --quick --out /tmp/e1                       # a few seconds
    python scripts/e1_investigation.py --render                                    # table from the JSON
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import NO_CLIP, from_dp_gibo_result, random_search
from botorch_dp.benchmarks.paper import Settings, gp_problem, gp_theta0, pilot
from botorch_dp.benchmarks.runs import iterate_curve, mean_se
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.problems import GPRegressionLengthscales
from botorch_dp.problems.base import PerUserProblem

__all__ = ["VARIANTS", "LogLengthscales", "Variant", "centred_gradient_weights", "main", "run_seed", "summarise"]

METHODS = ("GIBO (non-private)", "DP-GIBO (μ=1)", "random search")


@dataclass(frozen=True)
class Variant:
    r"""One change of the E.1 protocol (defaults: the protocol of ``reports/``)."""

    step_size: float = 0.3
    iterations: int = 25
    theta0: str = "random"
    centre_losses: bool = False
    log_lengthscales: bool = False
    note: str = ""


VARIANTS: dict[str, Variant] = {
    "baseline": Variant(note="E.1 as in reports/ (AdaGrad η = 0.3, T = 25, zero prior mean, θ₀ uniform)"),
    "centred": Variant(centre_losses=True, note="per-user centred losses (per-user constant prior mean)"),
    "eta1": Variant(step_size=1.0, note="AdaGrad η = 1"),
    "centred_eta1": Variant(centre_losses=True, step_size=1.0, note="centred losses and η = 1"),
    "log": Variant(log_lengthscales=True, note="log length-scales, box [ln 0.05, ln 5]"),
    "centred_eta1_log": Variant(centre_losses=True, step_size=1.0, log_lengthscales=True,
                                note="centred losses, η = 1, log length-scales"),
    "theta0_centre": Variant(theta0="centre", note="θ₀ = box centre"),
    "T50": Variant(iterations=50, note="T = 50"),
}


class LogLengthscales(PerUserProblem):
    r"""The E.1 problem with θ = log ℓ: ``ℓ_i(θ) = base.ℓ_i(exp θ)`` on the log of its box."""

    name = "gp_regression_log"

    def __init__(self, base: GPRegressionLengthscales) -> None:
        r"""Wrap ``base`` (its data, users and seed).

        Args:
            base: The E.1 problem in raw length-scales.
        """
        super().__init__(bounds=base.bounds.log(), num_users=base.num_users, seed=base.seed)
        self.base = base
        self.fit_noise_variance = base.fit_noise_variance
        self.true_lengthscales = base.true_lengthscales.log()

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""Per-user losses at the length-scales ``exp X`` (``q x d`` → ``q x n``)."""
        return self.base.evaluate_true(X.exp())


@contextlib.contextmanager
def centred_gradient_weights(enabled: bool = True) -> Iterator[None]:
    r"""While active, ``GradientGP.gradient_weights`` returns ``A (I − 1 1ᵀ/N)``.

    ``A y`` then estimates the gradient from ``y`` centred on its mean over the ``N``
    evaluated points (a constant prior mean equal to that mean). Applied to one user's
    losses it uses only that user's losses, so per-user clipping bounds the sensitivity as
    before.

    Args:
        enabled: ``False`` makes the context a no-op.
    """
    if not enabled:
        yield
        return
    original = GradientGP.gradient_weights

    def centred(self, theta, jacobian=None):
        A = original(self, theta, jacobian)
        return A - A.mean(dim=-1, keepdim=True)

    GradientGP.gradient_weights = centred
    try:
        yield
    finally:
        GradientGP.gradient_weights = original


def quick_settings() -> Settings:
    r"""A small E.1 (d = 3, n = 100, T = 2) that keeps every code path."""
    return dataclasses.replace(Settings.quick(), gp_dim=3, gp_n_total=100, iterations=2, seeds=(0, 1), pilot_points=1,
                               raw_samples=8)


def make_problem(settings: Settings, variant: Variant, seed: int) -> tuple[PerUserProblem, Tensor]:
    r"""The variant's problem for ``seed`` and its θ₀ (the log of the raw θ₀ for ``log_lengthscales``)."""
    base = gp_problem(settings, seed)
    theta0 = gp_theta0(base, seed, variant.theta0)
    if variant.log_lengthscales:
        return LogLengthscales(base), theta0.log()
    return base, theta0


def run_seed(settings: Settings, variant_name: str, seed: int, clip: float, methods: tuple[str, ...] = METHODS,
             done: set[str] = frozenset(), rs_budget: int | None = None) -> list[dict]:
    r"""The variant's runs of ``methods`` on ``seed`` (random search gets DP-GIBO's evaluation count).

    Args:
        settings: E.1 settings (``Settings()`` or ``quick_settings()``).
        variant_name: A key of ``VARIANTS``.
        seed: The replication seed (problem data, θ₀, noise and search generators).
        clip: DP-GIBO's clip bound B.
        methods: The methods to run (a subset of ``METHODS``; random search needs DP-GIBO's
            evaluation count: from this call's DP-GIBO run, else ``rs_budget``).
        done: Methods already recorded for this seed; skipped.
        rs_budget: Random search's evaluations when DP-GIBO does not run in this call.

    Returns:
        One record per run (final loss and curve are NON-PRIVATE diagnostics).
    """
    v = VARIANTS[variant_name]
    problem, theta0 = make_problem(settings, v, seed)
    records = []
    for method in methods:
        if method in done or method == "random search":
            continue
        mu = math.inf if method.startswith("GIBO") else settings.privacy_mu
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=v.iterations,
            privacy_mu=mu, clip_bound=NO_CLIP if math.isinf(mu) else clip, step_size=v.step_size,
            step_rule="adagrad", bias_tolerance=settings.bias_tolerance, noise_variance=problem.fit_noise_variance,
            search_radius=settings.search_radius, theta0=theta0, seed=seed, target_delta=settings.target_delta,
            raw_samples=settings.raw_samples, num_restarts=settings.num_restarts,
            batch_selection=settings.batch_selection,
        )
        start = time.perf_counter()
        with warnings.catch_warnings(), centred_gradient_weights(v.centre_losses):
            warnings.simplefilter("ignore")  # seeded noise warns: a comparison needs common seeds
            dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        evals, losses = iterate_curve(problem, result)
        records.append(dict(variant=variant_name, method=method, seed=seed, final_loss=losses[-1],
                            initial_loss=losses[0], num_evaluations=int(result.num_evaluations),
                            clip=None if math.isinf(mu) else clip, wall_s=time.perf_counter() - start,
                            evals=evals, losses=losses, final_theta=result.theta.tolist()))
    if "random search" in methods and "random search" not in done:
        budgets = [r["num_evaluations"] for r in records if r["method"].startswith("DP-GIBO")]
        budget = budgets[0] if budgets else rs_budget
        if budget is None:
            raise ValueError("random search needs DP-GIBO's run of the same seed (its evaluation count).")
        start = time.perf_counter()
        result = random_search(problem, problem.bounds, num_evaluations=budget, seed=seed)
        final = float(problem.objective(result.theta))
        records.append(dict(variant=variant_name, method="random search", seed=seed, final_loss=final,
                            num_evaluations=budget, wall_s=time.perf_counter() - start,
                            final_theta=result.theta.tolist()))
    return records


def summarise(records: list[dict], variant_names: list[str]) -> list[dict]:
    r"""Per variant and method: mean ± s.e., median, and wins per seed against random search.

    A win is a strictly lower final loss than random search's on the same seed and variant.
    """
    rows = []
    for name in variant_names:
        rs = {r["seed"]: r["final_loss"] for r in records if r["variant"] == name and r["method"] == "random search"}
        for method in METHODS:
            runs = [r for r in records if r["variant"] == name and r["method"] == method]
            if not runs:
                continue
            losses = [r["final_loss"] for r in runs]
            m, se = mean_se(losses)
            paired = [r for r in runs if r["seed"] in rs]
            wins = sum(r["final_loss"] < rs[r["seed"]] for r in paired)
            rows.append(dict(variant=name, method=method, seeds=len(runs), mean=m, se=se,
                             median=statistics.median(losses),
                             evaluations=statistics.fmean(r["num_evaluations"] for r in runs),
                             wins_vs_rs=None if method == "random search" else f"{wins}/{len(paired)}"))
    return rows


def render(rows: list[dict], command: str) -> str:
    r"""The summary table as markdown."""
    lines = ["# E.1 investigation: runs (generated by scripts/e1_investigation.py)", "",
             f"Command: `{command}`", "",
             "Final validation loss (NON-PRIVATE diagnostic) of the returned point; wins = seeds where the "
             "method is strictly lower than random search with DP-GIBO's evaluation count on the same seed "
             "and variant.", "",
             "| variant | change | method | seeds | evaluations | mean ± s.e. | median | wins vs RS |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        se = "" if math.isnan(r["se"]) else f" ± {r['se']:.3f}"
        lines.append(f"| {r['variant']} | {VARIANTS[r['variant']].note} | {r['method']} | {r['seeds']} | "
                     f"{r['evaluations']:.0f} | {r['mean']:.3f}{se} | {r['median']:.4f} | {r['wins_vs_rs'] or '—'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=["baseline"], choices=sorted(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0..9 (0 1 with --quick)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--quick", action="store_true", help="d = 3, n = 100, T = 2: a smoke run")
    parser.add_argument("--out", default="reports/e1_investigation_runs",
                        help="stem of the outputs: <out>.json (runs, resumable) and <out>.md (table)")
    parser.add_argument("--render", action="store_true", help="only rewrite <out>.md from <out>.json")
    args = parser.parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    seeds = tuple(args.seeds) if args.seeds is not None else settings.seeds
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
    store = json.loads(json_path.read_text()) if json_path.exists() else {"runs": [], "pilots": {}}
    command = "python scripts/e1_investigation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if not args.render:
        for name in args.variants:
            v = VARIANTS[name]
            key = f"{name}/{'quick' if args.quick else 'full'}"
            if key not in store["pilots"]:
                pilot_problem, _ = make_problem(settings, v, settings.pilot_seed)
                with centred_gradient_weights(v.centre_losses):
                    store["pilots"][key] = pilot(settings, pilot_problem)
            clip = store["pilots"][key]["clip_bound"]
            for seed in seeds:
                done = {r["method"] for r in store["runs"] if r["variant"] == name and r["seed"] == seed}
                if set(args.methods) <= done:
                    continue
                budget = next((r["num_evaluations"] for r in store["runs"] if r["variant"] == name
                               and r["seed"] == seed and r["method"].startswith("DP-GIBO")), None)
                new = run_seed(settings, name, seed, clip, tuple(args.methods), done, rs_budget=budget)
                store["runs"].extend(new)
                json_path.write_text(json.dumps(store, indent=1))
                for r in new:
                    print(f"{name:18s} seed {seed:2d} {r['method']:20s} loss {r['final_loss']:.4f} "
                          f"evals {r['num_evaluations']} ({r['wall_s']:.1f} s)", flush=True)
    names = [n for n in VARIANTS if any(r["variant"] == n for r in store["runs"])]
    rows = summarise(store["runs"], names)
    md_path.write_text(render(rows, command))
    for r in rows:
        print(f"{r['variant']:18s} {r['method']:20s} n={r['seeds']:2d} evals {r['evaluations']:5.0f} "
              f"loss {r['mean']:.4f} ± {r['se']:.4f} median {r['median']:.4f} wins vs RS {r['wins_vs_rs'] or '—'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
