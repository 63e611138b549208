#!/usr/bin/env python
r"""Why DP-GIBO and GIBO lose on the paper's E.1 task (issue 18 item 1): one protocol change at a time.

Each variant changes one thing of the E.1 protocol of ``reports/`` (GP length-scales, d = 15,
n = 2000 split 50/50, T = 25, adaptive batches with bias tolerance 0.5, AdaGrad η = 0.3,
surrogate RBF ℓ = 1 with zero prior mean, σ = 0.05, θ₀ uniform in the box per seed) and runs,
on the same seeds: non-private GIBO (μ = ∞, no clipping) and DP-GIBO (μ = 1, clip bound B from
the pilot of ``benchmarks.paper``, recomputed for the variant); each is compared with random
search at its own evaluation count on the same seed and box (one random-search curve per seed,
``reports/``'s where long enough, extended by evaluating only the missing points). Variants:

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
- ``T50``: T = 50.

All losses are NON-PRIVATE diagnostics: the noise-free validation loss of the returned
point, in the original E.1 objective. Runs are appended to ``<out>.json`` (resumable: a
(variant, method, seed) already there is skipped), random-search curves to ``<out>_rs.json``;
``<out>.md`` is the summary table (mean ± s.e., median, wins per seed against random search).

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

import torch
from torch import Tensor

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import NO_CLIP, from_dp_gibo_result
from botorch_dp.baselines.base import uniform_points
from botorch_dp.benchmarks.paper import Settings, gp_problem, gp_theta0, pilot
from botorch_dp.benchmarks.runs import iterate_curve, mean_se
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.problems import GPRegressionLengthscales
from botorch_dp.problems.base import PerUserProblem

__all__ = [
    "VARIANTS", "LogLengthscales", "Variant", "centred_gradient_weights", "gradient_alignment", "main", "run_seed",
    "summarise",
]

METHODS = ("GIBO (non-private)", "DP-GIBO (μ=1)")


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


def run_seed(settings: Settings, variant_name: str, seed: int, clip: float | None, methods: tuple[str, ...] = METHODS,
             done: set[str] = frozenset()) -> list[dict]:
    r"""The variant's runs of ``methods`` on ``seed``.

    Args:
        settings: E.1 settings (``Settings()`` or ``quick_settings()``).
        variant_name: A key of ``VARIANTS``.
        seed: The replication seed (problem data, θ₀, noise and search generators).
        clip: DP-GIBO's clip bound B.
        methods: The methods to run (a subset of ``METHODS``).
        done: Methods already recorded for this seed; skipped.

    Returns:
        One record per run (final loss and curve are NON-PRIVATE diagnostics).
    """
    v = VARIANTS[variant_name]
    problem, theta0 = make_problem(settings, v, seed)
    records = []
    for method in methods:
        if method in done:
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
    return records


def gradient_alignment(settings: Settings, seed: int, log_lengthscales: bool = False, batch_seed: int = 0) -> dict:
    r"""How well one batch's gradient estimate points along the true gradient at θ₀ (NON-PRIVATE).

    ``d + 1`` uniform points in the search box (half-width ``search_radius``) around θ₀, the
    surrogate's weights ``A`` at θ₀, and the mean losses ``y`` there; the estimate ``A y``
    (zero prior mean, as DP-GIBO) and ``A (y − ȳ 1)`` (centred) are compared with a central
    finite-difference gradient of f at θ₀ (step 1e-4) by their cosine.

    Args:
        settings: E.1 settings.
        seed: The replication seed (problem and θ₀).
        log_lengthscales: Measure in the log parameterisation.
        batch_seed: Seed of the batch's points.

    Returns:
        The two cosines, the norms and the largest ``|∂f/∂θ_k|``.
    """
    variant = Variant(log_lengthscales=log_lengthscales)
    problem, theta0 = make_problem(settings, variant, seed)
    d = problem.dim
    lo = torch.maximum(theta0 - settings.search_radius, problem.bounds[0])
    hi = torch.minimum(theta0 + settings.search_radius, problem.bounds[1])
    gen = torch.Generator().manual_seed(batch_seed)
    X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
    y = problem.objective(X)
    with torch.no_grad():
        A = GradientGP(X, problem.recommended_kernel(), problem.fit_noise_variance).gradient_weights(theta0)
    h = 1e-4
    E = torch.eye(d, dtype=torch.float64) * h
    truth = (problem.objective(theta0 + E) - problem.objective(theta0 - E)) / (2 * h)

    def cos(g: Tensor) -> float:
        return float(g @ truth / (g.norm() * truth.norm()).clamp_min(1e-300))

    zero, centred = A @ y, A @ (y - y.mean())
    return dict(seed=seed, log=log_lengthscales, cos_zero_mean=cos(zero), cos_centred=cos(centred),
                norm_true=float(truth.norm()), norm_zero_mean=float(zero.norm()), norm_centred=float(centred.norm()),
                mean_loss=float(y.mean()))


def rs_key(settings: Settings, variant_name: str, seed: int) -> str:
    r"""Key of a random-search curve: the search space (raw or log box), the mode and the seed."""
    space = "log" if VARIANTS[variant_name].log_lengthscales else "raw"
    return f"{space}/{settings.mode}/{seed}"


REPORTS = {"baseline": Path("reports/runs.json"), "theta0_centre": Path("reports/centre_theta0/runs.json")}


def stored_rs_curves() -> dict[str, list[float]]:
    r"""The random-search curves of ``reports/`` (E.1 comparison, raw box, full mode), by ``rs_key``.

    Random search does not depend on θ₀, so the two reports hold prefixes of the same curve
    per seed; the longer one is kept.
    """
    curves: dict[str, list[float]] = {}
    for path in REPORTS.values():
        if path.exists():
            for r in json.loads(path.read_text())["runs"]:
                if r["experiment"] == "comparison" and r["method"] == "random search (non-private)":
                    key = f"raw/full/{r['seed']}"
                    if len(r["losses"]) > len(curves.get(key, [])):
                        curves[key] = r["losses"]
    return curves


def imported_runs() -> list[dict]:
    r"""The E.1 GIBO and DP-GIBO (μ = 1, pilot B) runs of ``reports/`` (variant ``baseline``) and
    ``reports/centre_theta0/`` (variant ``theta0_centre``), as records of this script."""
    out = []
    for name, path in REPORTS.items():
        if not path.exists():
            continue
        for r in json.loads(path.read_text())["runs"]:
            if r["experiment"] != "comparison":
                continue
            if r["method"] == "GIBO (non-private)":
                method = "GIBO (non-private)"
            elif r["method"].startswith("DP-GIBO") and r["setting"] == "pilot B":
                method = "DP-GIBO (μ=1)"
            else:
                continue
            out.append(dict(variant=name, method=method, seed=r["seed"], final_loss=r["final_loss"],
                            initial_loss=r["losses"][0], num_evaluations=int(r["num_evaluations"]),
                            wall_s=r["wall_s"], source=str(path)))
    return out


def extend_rs_curve(settings: Settings, variant_name: str, seed: int, curve: list[float], budget: int) -> list[float]:
    r"""The random-search curve of ``seed`` (best loss after 1, 2, ... evaluations) up to ``budget``.

    ``random_search(seed=s)`` draws its points from one generator, so its first ``m`` points
    do not depend on the total; only the points after ``len(curve)`` are evaluated.
    """
    if budget <= len(curve):
        return curve
    problem, _ = make_problem(settings, VARIANTS[variant_name], seed)
    X = uniform_points(problem.bounds, budget, torch.Generator().manual_seed(int(seed)))[len(curve):]
    values = torch.cat([problem.objective(chunk) for chunk in X.split(32)])
    best = torch.cummin(values, 0).values
    if curve:
        best = best.clamp_max(curve[-1])
    return curve + best.tolist()


def summarise(records: list[dict], variant_names: list[str], rs_curves: dict[str, list[float]],
              settings: Settings) -> list[dict]:
    r"""Per variant and method: mean ± s.e., median, and wins per seed against random search.

    Random search is read at each run's own evaluation count on the same seed and search box
    (``rs_curves``); a win is a strictly lower final loss. Runs whose budget exceeds the
    stored curve are left out of the win count (``rs_missing``).
    """
    rows = []
    for name in variant_names:
        for method in METHODS[:2]:
            runs = [r for r in records if r["variant"] == name and r["method"] == method]
            if not runs:
                continue
            losses = [r["final_loss"] for r in runs]
            m, se = mean_se(losses)
            rs, wins, missing = [], 0, 0
            for r in runs:
                curve = rs_curves.get(rs_key(settings, name, r["seed"]), [])
                if r["num_evaluations"] > len(curve):
                    missing += 1
                    continue
                rs.append(curve[r["num_evaluations"] - 1])
                wins += r["final_loss"] < rs[-1]
            rs_m, rs_se = mean_se(rs) if rs else (math.nan, math.nan)
            rows.append(dict(variant=name, method=method, seeds=len(runs), mean=m, se=se,
                             median=statistics.median(losses),
                             evaluations=statistics.fmean(r["num_evaluations"] for r in runs),
                             rs_mean=rs_m, rs_se=rs_se, rs_median=statistics.median(rs) if rs else math.nan,
                             wins_vs_rs=f"{wins}/{len(rs)}", rs_missing=missing,
                             per_seed={r["seed"]: r["final_loss"] for r in runs}))
    return rows


def _pm(m: float, se: float) -> str:
    return f"{m:.3f}" if math.isnan(se) else f"{m:.3f} ± {se:.3f}"


def render(rows: list[dict], command: str) -> str:
    r"""The summary table as markdown."""
    lines = ["# E.1 investigation: runs (generated by scripts/e1_investigation.py)", "",
             f"Command: `{command}`", "",
             "Final validation loss (NON-PRIVATE diagnostic) of the returned point (the last iterate), mean ± s.e. "
             "over seeds; random search (RS) is read at each run's own evaluation count on the same seed and "
             "box; wins = seeds where the method is strictly lower than RS.", "",
             "| variant | change | method | seeds | evaluations (mean) | final loss | median | RS at same budgets | "
             "RS median | wins vs RS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        missing = f" ({r['rs_missing']} without RS)" if r["rs_missing"] else ""
        lines.append(f"| {r['variant']} | {VARIANTS[r['variant']].note} | {r['method']} | {r['seeds']} | "
                     f"{r['evaluations']:.0f} | {_pm(r['mean'], r['se'])} | {r['median']:.4f} | "
                     f"{_pm(r['rs_mean'], r['rs_se'])} | {r['rs_median']:.4f} | {r['wins_vs_rs']}{missing} |")
    lines += ["", "Per seed (final loss):", "", "| variant | method | " + " | ".join(
        f"seed {s}" for s in sorted({s for r in rows for s in r["per_seed"]})) + " |"]
    seeds = sorted({s for r in rows for s in r["per_seed"]})
    lines.append("|---|---|" + "---|" * len(seeds))
    for r in rows:
        cells = [f"{r['per_seed'][s]:.4f}" if s in r["per_seed"] else "" for s in seeds]
        lines.append(f"| {r['variant']} | {r['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def variant_clip(store: dict, settings: Settings, name: str, quick: bool, needed: bool) -> float | None:
    r"""DP-GIBO's clip bound B for the variant: the pilot of ``benchmarks.paper`` on the variant's
    problem (with its centring), stored under ``store["pilots"]``; ``None`` when not ``needed``."""
    key = f"{name}/{'quick' if quick else 'full'}"
    if key not in store["pilots"]:
        if not needed:
            return None
        v = VARIANTS[name]
        pilot_problem, _ = make_problem(settings, v, settings.pilot_seed)
        with centred_gradient_weights(v.centre_losses):
            store["pilots"][key] = pilot(settings, pilot_problem)
    return store["pilots"][key]["clip_bound"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="*", default=[], choices=sorted(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0..9 (0 1 with --quick)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--quick", action="store_true", help="d = 3, n = 100, T = 2: a smoke run")
    parser.add_argument("--out", default="reports/e1_investigation_runs",
                        help="stem of the outputs: <out>.json (runs, resumable) and <out>.md (table)")
    parser.add_argument("--render", action="store_true", help="only rewrite <out>.md from <out>.json")
    parser.add_argument("--import-reports", action="store_true",
                        help="add reports/'s E.1 GIBO and DP-GIBO runs as variants baseline and theta0_centre "
                             "(those not already in <out>.json)")
    parser.add_argument("--alignment", action="store_true",
                        help="only print the cosine of one batch's gradient estimate with the true gradient at θ₀, "
                             "zero prior mean vs centred, raw and log length-scales (JSON: <out>_alignment.json)")
    args = parser.parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    seeds = tuple(args.seeds) if args.seeds is not None else settings.seeds
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
    store = json.loads(json_path.read_text()) if json_path.exists() else {"runs": [], "pilots": {}}
    command = "python scripts/e1_investigation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.alignment:
        rows = [gradient_alignment(settings, seed, log) for log in (False, True) for seed in seeds]
        for r in rows:
            print(f"{'log' if r['log'] else 'raw'} seed {r['seed']:2d}  cos(zero mean) {r['cos_zero_mean']:+.3f}  "
                  f"cos(centred) {r['cos_centred']:+.3f}  |∇f| {r['norm_true']:.3f}  mean loss {r['mean_loss']:.3f}")
        for log in (False, True):
            sel = [r for r in rows if r["log"] == log]
            for key in ("cos_zero_mean", "cos_centred"):
                m, se = mean_se([r[key] for r in sel])
                print(f"{'log' if log else 'raw'} {key}: {m:.3f} ± {se:.3f}")
        Path(f"{out}_alignment.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
        return 0
    if args.import_reports and not args.quick:
        have = {(r["variant"], r["method"], r["seed"]) for r in store["runs"]}
        store["runs"].extend(r for r in imported_runs() if (r["variant"], r["method"], r["seed"]) not in have)
        json_path.write_text(json.dumps(store, indent=1))
    if not args.render:
        clips: dict[str, float | None] = {}
        for seed in seeds:  # seeds outer: whatever finishes is paired across the variants
            for name in args.variants:
                done = {r["method"] for r in store["runs"] if r["variant"] == name and r["seed"] == seed}
                if set(args.methods) <= done:
                    continue
                if name not in clips:
                    clips[name] = variant_clip(store, settings, name, args.quick, "DP-GIBO (μ=1)" in args.methods)
                    json_path.write_text(json.dumps(store, indent=1))
                new = run_seed(settings, name, seed, clips[name], tuple(args.methods), done)
                store["runs"].extend(new)
                json_path.write_text(json.dumps(store, indent=1))
                for r in new:
                    print(f"{name:18s} seed {seed:2d} {r['method']:20s} loss {r['final_loss']:.4f} "
                          f"evals {r['num_evaluations']} ({r['wall_s']:.1f} s)", flush=True)
    rs_path = Path(f"{out}_rs.json")
    rs_curves = stored_rs_curves() if not args.quick else {}
    for key, curve in (json.loads(rs_path.read_text()) if rs_path.exists() else {}).items():
        if len(curve) > len(rs_curves.get(key, [])):
            rs_curves[key] = curve
    runs = [r for r in store["runs"] if r["method"] in METHODS]
    if not args.render:  # random search at every run's budget (only the missing points are evaluated)
        for r in runs:
            key = rs_key(settings, r["variant"], r["seed"])
            if r["num_evaluations"] > len(rs_curves.get(key, [])):
                rs_curves[key] = extend_rs_curve(settings, r["variant"], r["seed"], rs_curves.get(key, []),
                                                 r["num_evaluations"])
                rs_path.write_text(json.dumps(rs_curves))
    names = [n for n in VARIANTS if any(r["variant"] == n for r in runs)]
    rows = summarise(runs, names, rs_curves, settings)
    md_path.write_text(render(rows, command))
    for r in rows:
        print(f"{r['variant']:18s} {r['method']:20s} n={r['seeds']:2d} evals {r['evaluations']:5.0f} "
              f"loss {r['mean']:.4f} ± {r['se']:.4f} median {r['median']:.4f} | RS {r['rs_mean']:.4f} "
              f"median {r['rs_median']:.4f} | wins vs RS {r['wins_vs_rs']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
