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

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import paper
from benchmarks.e1_protocol import (
    METHODS,
    VARIANTS,
    LogLengthscales,
    Variant,
    centred_gradient_weights,
    extend_rs_curve,
    gradient_alignment,
    make_problem,
    rs_key,
    run_seed,
)
from benchmarks.e1_summary import render, summarise
from benchmarks.jobs import Job, KindRunner, RunJob
from benchmarks.paper import pilot
from benchmarks.runs import Run

__all__ = [
    "METHODS",
    "SELECTION_FIELDS",
    "VARIANTS",
    "LogLengthscales",
    "Runner",
    "Settings",
    "Variant",
    "centred_gradient_weights",
    "experiment_jobs",
    "extend_rs_curve",
    "gradient_alignment",
    "make_problem",
    "make_runner",
    "prepare",
    "quick_settings",
    "render",
    "run_seed",
    "rs_key",
    "summarise",
    "write_report",
]


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
    quick = dataclasses.replace(
        paper.Settings.quick(), gp_dim=3, gp_n_total=100, iterations=2, seeds=(0, 1), pilot_points=1, raw_samples=8
    )
    return Settings(**dataclasses.asdict(quick), variants=("baseline", "centred"), rs_budget=60)


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
                jobs.append(
                    Job(
                        f"{name} {method} seed {seed}",
                        "gibo",
                        dict(variant=name, method=method, seed=seed, clip=clip),
                        cost=cost * VARIANTS[name].iterations / 25,
                    )
                )
        for space in dict.fromkeys(_space(name) for name in settings.variants):
            jobs.append(
                Job(
                    f"random search {space} seed {seed}",
                    "random_search",
                    dict(
                        variant=next(n for n in settings.variants if _space(n) == space),
                        seed=seed,
                        budget=settings.rs_budget,
                    ),
                    cost=0.2 * cost * settings.rs_budget / 240,
                )
            )
    return jobs


class Runner(KindRunner):
    r"""Runs one job of the E.1 investigation (``execute`` is the CLI's ``run_job``)."""

    KINDS = ("gibo", "random_search")

    def gibo(self, variant: str, method: str, seed: int, clip: float | None) -> Run:
        r"""One method of ``METHODS`` on one variant and seed."""
        start = time.perf_counter()
        (r,) = run_seed(self.settings, variant, seed, clip, (method,))
        extra = {k: r[k] for k in ("initial_loss", "clip", "final_theta")}
        return Run(
            "e1",
            r["method"],
            r["seed"],
            r["variant"],
            r["evals"],
            r["losses"],
            r["final_loss"],
            r["num_evaluations"],
            time.perf_counter() - start,
            extra=extra,
        )

    def random_search(self, variant: str, seed: int, budget: int) -> Run:
        r"""The random-search curve of the variant's search box and ``seed``, ``budget`` evaluations long."""
        start = time.perf_counter()
        curve = extend_rs_curve(self.settings, variant, seed, [], budget)
        return Run(
            "e1",
            "random search (non-private)",
            seed,
            _space(variant),
            list(range(1, len(curve) + 1)),
            curve,
            curve[-1],
            len(curve),
            time.perf_counter() - start,
        )


def make_runner(settings: Settings, context: dict) -> RunJob:
    r"""``Runner(settings, context).execute``."""
    return Runner(settings, context).execute


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""``out/e1.md``: the table of ``render`` (random search read at each run's budget)."""
    curves = {f"{r.setting}/{settings.mode}/{r.seed}": r.losses for r in runs if r.method.startswith("random")}
    records = [
        dict(
            variant=r.setting,
            method=r.method,
            seed=r.seed,
            final_loss=r.final_loss,
            num_evaluations=int(r.num_evaluations),
        )
        for r in runs
        if r.method in METHODS
    ]
    names = [n for n in VARIANTS if any(r["variant"] == n for r in records)]
    text = render(summarise(records, names, curves, settings), command)
    wall = context.get("wall_s")
    if wall is not None:
        text += (
            f"\nWall time {wall:.0f} s ({context.get('execution', '')}); DP-GIBO clip bounds B per variant "
            f"(pilot on an independent synthetic draw): {context.get('clips')}.\n"
        )
    path = out / "e1.md"
    path.write_text(text)
    return path
