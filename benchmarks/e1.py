r"""The E.1 investigation (issue 18 item 1): one change of the paper's E.1 protocol at a time.

Each variant changes one thing of the E.1 protocol of ``reports/`` (GP length-scales, d = 15,
n = 2000 split 50/50, T = 25, adaptive batches with bias tolerance 0.5, AdaGrad η = 0.3,
surrogate RBF ℓ = 1 with zero prior mean, σ = 0.05, θ₀ uniform in the box per seed) and runs,
on the same seeds, non-private GIBO (μ = ∞, no clipping) and DP-GIBO (μ = 1, clip bound B from
the pilot of ``benchmarks.paper``, recomputed for the variant). Each run is compared with
random search at its own evaluation count on the same seed and box. Variants
(``VARIANTS``):

- ``baseline``: the protocol of ``reports/`` unchanged.
- ``centred``: each user's losses are centred on the user's own mean over the evaluated
  points before the gradient estimate, ``g_i = A (y_i − ȳ_i 1)`` (a per-user constant prior
  mean instead of 0). A fixed linear map of the user's own losses: clipping and the
  sensitivity 2B/n are unchanged. Not a package option: ``centred_gradient_weights`` wraps
  ``GradientGP.gradient_weights`` while a job runs (process-wide, so not for thread pools).
- ``eta1``: AdaGrad η = 1 instead of 0.3. ``centred_eta1``: both.
- ``log``: the length-scales parameterised by their logarithms (box [ln 0.05, ln 5]);
  random search then samples uniformly in the log box. ``centred_eta1_log``: all three.
- ``theta0_centre``: θ₀ = the box centre. ``T50``: T = 50.

As an experiment of the benchmark CLI (``python -m benchmarks run e1 --set
variants=eta1``): jobs ``gibo`` (one method, variant and seed) and ``random_search`` (one
curve per search box and seed, ``rs_budget`` evaluations long, read at each run's
evaluation count); the report is ``e1.md``. ``scripts/e1_investigation.py`` keeps the
original command line (its own resumable JSON, the import of ``reports/``'s runs, and the
gradient-alignment measurement) on the same functions.

All losses are NON-PRIVATE diagnostics: the noise-free validation loss of the returned
point in the original E.1 objective.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from benchmarks import paper
from benchmarks.jobs import Job, KindRunner, RunJob
from benchmarks.paper import gp_problem, gp_theta0, pilot
from benchmarks.runs import Run, iterate_curve, mean_se
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import NO_CLIP, from_dp_gibo_result
from botorch_dp.baselines.base import uniform_points
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.problems import GPRegressionLengthscales
from botorch_dp.problems.base import PerUserProblem

__all__ = [
    "METHODS", "SELECTION_FIELDS", "VARIANTS", "LogLengthscales", "Runner", "Settings", "Variant",
    "centred_gradient_weights", "experiment_jobs", "extend_rs_curve", "gradient_alignment", "make_problem",
    "make_runner", "prepare", "quick_settings", "render", "run_seed", "rs_key", "summarise", "write_report",
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

    GradientGP.gradient_weights = centred  # type: ignore[method-assign]  # deliberate patch, undone below
    try:
        yield
    finally:
        GradientGP.gradient_weights = original  # type: ignore[method-assign]  # the patch undone




@dataclass
class Settings(paper.Settings):
    r"""``paper.Settings`` (the E.1 protocol) and the variants, methods and random-search budget to run."""

    variants: tuple[str, ...] = tuple(VARIANTS)
    methods: tuple[str, ...] = METHODS
    rs_budget: int = 1300  # evaluations of each random-search curve (T50 runs use up to ~1250)

    def __post_init__(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad or not self.variants:
            raise ValueError(f"variants must name variants of {tuple(VARIANTS)}, got {self.variants!r}")
        if not self.methods or any(m not in METHODS for m in self.methods):
            raise ValueError(f"methods must name methods of {METHODS}, got {self.methods!r}")
        if self.rs_budget < 1:
            raise ValueError(f"rs_budget must be at least 1, got {self.rs_budget}")


#: Fields that only choose which jobs run (left out of the run store's header).
SELECTION_FIELDS = ("seeds", "methods")


def quick_settings() -> Settings:
    r"""A small E.1 (d = 3, n = 100, T = 2) that keeps every code path."""
    quick = dataclasses.replace(paper.Settings.quick(), gp_dim=3, gp_n_total=100, iterations=2, seeds=(0, 1),
                                pilot_points=1, raw_samples=8)
    return Settings(**dataclasses.asdict(quick), variants=("baseline", "centred"), rs_budget=60)


def make_problem(settings: Settings, variant: Variant, seed: int) -> tuple[PerUserProblem, Tensor]:
    r"""The variant's problem for ``seed`` and its θ₀ (the log of the raw θ₀ for ``log_lengthscales``)."""
    base = gp_problem(settings, seed)
    theta0 = gp_theta0(base, seed, variant.theta0)
    if variant.log_lengthscales:
        return LogLengthscales(base), theta0.log()
    return base, theta0



def run_seed(settings: Settings, variant_name: str, seed: int, clip: float | None,
             methods: tuple[str, ...] = METHODS, done: Collection[str] = frozenset()) -> list[dict]:
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
        if clip is None and not math.isinf(mu):
            raise ValueError(f"clip: {method} needs a clip bound, got None")
        config = DPGIBOConfig(
            bounds=problem.bounds, kernel=problem.recommended_kernel(), num_iterations=v.iterations,
            privacy_mu=mu, clip_bound=NO_CLIP if clip is None or math.isinf(mu) else clip, step_size=v.step_size,
            step_rule="adagrad", bias_tolerance=settings.bias_tolerance,
            noise_variance=paper.fit_noise_variance(problem),
            search_radius=settings.search_radius, theta0=theta0, seed=seed, target_delta=settings.target_delta,
            raw_samples=settings.raw_samples, num_restarts=settings.num_restarts,
            batch_search=paper.batch_search(settings),
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
        A = GradientGP(X, problem.recommended_kernel(), paper.fit_noise_variance(problem)).gradient_weights(theta0)
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
    lines = ["# E.1 investigation: runs (benchmarks.e1)", "",
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



def variant_pilot(settings: Settings, name: str) -> dict:
    r"""The pilot of ``benchmarks.paper`` on the variant's problem (with its centring): DP-GIBO's B."""
    v = VARIANTS[name]
    pilot_problem, _ = make_problem(settings, v, settings.pilot_seed)
    with centred_gradient_weights(v.centre_losses):
        return pilot(settings, pilot_problem)


def prepare(settings: Settings) -> dict:
    r"""DP-GIBO's clip bound per variant (``{"clips": {variant: B}}``; public: a synthetic pilot draw)."""
    return {"clips": {name: variant_pilot(settings, name)["clip_bound"] for name in settings.variants}}


def _space(name: str) -> str:
    return "log" if VARIANTS[name].log_lengthscales else "raw"


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""A ``gibo`` job per (seed, variant, method) and a ``random_search`` job per (seed, search box)."""
    cost = 25.0 * (settings.gp_dim / 15) ** 2
    jobs = []
    for seed in settings.seeds:  # seeds outer: whatever finishes is paired across the variants
        for name in settings.variants:
            for method in settings.methods:
                clip = None if method.startswith("GIBO") else context["clips"][name]
                jobs.append(Job(f"{name} {method} seed {seed}", "gibo",
                                dict(variant=name, method=method, seed=seed, clip=clip),
                                cost=cost * VARIANTS[name].iterations / 25))
        for space in dict.fromkeys(_space(name) for name in settings.variants):
            jobs.append(Job(f"random search {space} seed {seed}", "random_search",
                            dict(variant=next(n for n in settings.variants if _space(n) == space), seed=seed,
                                 budget=settings.rs_budget), cost=0.2 * cost * settings.rs_budget / 240))
    return jobs


class Runner(KindRunner):
    r"""Runs one job of the E.1 investigation (``execute`` is the CLI's ``run_job``)."""

    KINDS = ("gibo", "random_search")

    def gibo(self, variant: str, method: str, seed: int, clip: float | None) -> Run:
        r"""One method of ``METHODS`` on one variant and seed."""
        start = time.perf_counter()
        (r,) = run_seed(self.settings, variant, seed, clip, (method,))
        extra = {k: r[k] for k in ("initial_loss", "clip", "final_theta")}
        return Run("e1", r["method"], r["seed"], r["variant"], r["evals"], r["losses"], r["final_loss"],
                   r["num_evaluations"], time.perf_counter() - start, extra=extra)

    def random_search(self, variant: str, seed: int, budget: int) -> Run:
        r"""The random-search curve of the variant's search box and ``seed``, ``budget`` evaluations long."""
        start = time.perf_counter()
        curve = extend_rs_curve(self.settings, variant, seed, [], budget)
        return Run("e1", "random search (non-private)", seed, _space(variant), list(range(1, len(curve) + 1)), curve,
                   curve[-1], len(curve), time.perf_counter() - start)


def make_runner(settings: Settings, context: dict) -> RunJob:
    r"""``Runner(settings, context).execute``."""
    return Runner(settings, context).execute


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""``out/e1.md``: the table of ``render`` (random search read at each run's budget)."""
    curves = {f"{r.setting}/{settings.mode}/{r.seed}": r.losses for r in runs if r.method.startswith("random")}
    records = [dict(variant=r.setting, method=r.method, seed=r.seed, final_loss=r.final_loss,
                    num_evaluations=int(r.num_evaluations)) for r in runs if r.method in METHODS]
    names = [n for n in VARIANTS if any(r["variant"] == n for r in records)]
    text = render(summarise(records, names, curves, settings), command)
    wall = context.get("wall_s")
    if wall is not None:
        text += f"\nWall time {wall:.0f} s ({context.get('execution', '')}); DP-GIBO clip bounds B per variant " \
                f"(pilot on an independent synthetic draw): {context.get('clips')}.\n"
    path = out / "e1.md"
    path.write_text(text)
    return path
