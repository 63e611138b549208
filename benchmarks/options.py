r"""Do DP-GIBO's optional mechanisms help? Plain DP-GIBO against each option, on the same budget.

The options (Kairouz et al.'s public subspaces and full-matrix AdaGrad; Menart et al.'s
adaptive noise and private choice of the returned iterate) run on the E.1 GP length-scale task
(``task="gp"``, d = ``gp_dim``) and the SVM task (``task="svm"``, friedman1 stand-in,
d = 33), at μ = ``privacy_mu``, with fixed batches of d + 1 points for ``T`` steps, so every
variant has the same evaluation budget (``"adaptive_norm"`` may stop early: at most that
budget). Variants (``VARIANTS``; each is a set of ``DPGIBOConfig`` changes):

- ``plain``: DP-GIBO as in ``benchmarks.paper`` (AdaGrad, fixed noise, last iterate).
- ``posterior_subspace``: the release projected on the top-``subspace_k`` eigenvectors of the
  GP's posterior gradient covariance (free: no extra data, no extra privacy).
- ``public_pca``: the release projected on the top-``subspace_k`` directions of gradients of an
  independent synthetic draw of the task (the pilot's seed: public), estimated by a GP on
  ``pca_points`` Sobol points (``PublicGradientPCA.from_objective``).
- ``adagrad_full``: full-matrix AdaGrad with its default preconditioner (``"noisy"``: built
  from the released gradients, no extra privacy).
- ``adaptive_norm``: the noise follows a noisy gradient norm, under a GDP filter.
- ``adaptive_norm_min``: that, returning the iterate with the smallest released noisy norm.
- a combination: the union of the variants named in ``combination`` (``--set
  combination=adagrad_full,adaptive_norm``), run as the variant ``"adagrad_full+adaptive_norm"``
  (the name is the job's key, so runs of several combinations share one store).

Every run's privacy is the same μ (the options re-split it, never add to it). Clip bounds:
the ``paper`` pilot's B on the GP task (an independent synthetic draw) and ``svm_clip`` on
the SVM task. Losses are NON-PRIVATE diagnostics of the returned point.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from benchmarks import paper
from benchmarks.jobs import Job, KindRunner, RunJob
from benchmarks.report_tables import markdown_row
from benchmarks.runs import Run, format_mean_se, guarantee_of, iterate_curve, mean_se
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import from_dp_gibo_result
from botorch_dp.optim.options import FixedClip, Projected, batch_rule
from botorch_dp.optim.subspace import FixedSubspace, PosteriorGradientCovarianceSubspace, PublicGradientPCA
from botorch_dp.privacy.seeding import PrivacyWarning

__all__ = [
    "SELECTION_FIELDS",
    "TASKS",
    "VARIANTS",
    "Runner",
    "Settings",
    "combination_name",
    "experiment_jobs",
    "make_runner",
    "prepare",
    "quick_settings",
    "variant_changes",
    "write_report",
]

TASKS = ("gp", "svm")
#: Variant -> its ``DPGIBOConfig`` changes (strategies by their registered names); the ``"projection"``
#: values name the subspace oracle that ``variant_changes`` builds.
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "posterior_subspace": {"projection": "posterior"},
    "public_pca": {"projection": "public_pca"},
    "adagrad_full": {"step_rule": "adagrad_full"},
    "adaptive_norm": {"noise": "adaptive_norm"},
    "adaptive_norm_min": {"noise": "adaptive_norm", "selection": "min_noisy_norm"},
}


@dataclasses.dataclass
class Settings(paper.Settings):
    r"""``paper.Settings`` (the tasks) and the variants, seeds and subspace sizes of this comparison."""

    tasks: tuple[str, ...] = TASKS
    variants: tuple[str, ...] = tuple(VARIANTS)
    combination: tuple[str, ...] = ()
    option_seeds: tuple[int, ...] = tuple(range(10))
    subspace_k: int = 5
    pca_points: int = 32

    def __post_init__(self) -> None:
        if not self.tasks or any(t not in TASKS for t in self.tasks):
            raise ValueError(f"tasks must name tasks of {TASKS}, got {self.tasks!r}")
        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise ValueError(f"variants must name variants of {tuple(VARIANTS)}, got {self.variants!r}")
        if any(v not in VARIANTS for v in self.combination) or len(self.combination) == 1:
            raise ValueError(
                f"combination must name two or more variants of {tuple(VARIANTS)}, got {self.combination!r}"
            )
        merged: dict[str, Any] = {}
        for v in self.combination:
            for key, value in VARIANTS[v].items():
                if merged.get(key, value) != value:
                    raise ValueError(f"combination: {v!r} sets {key} to {value!r}, another variant to {merged[key]!r}")
                merged[key] = value
        if self.subspace_k < 1 or self.pca_points < 2:
            raise ValueError(f"subspace_k must be >= 1 and pca_points >= 2, got {self.subspace_k}, {self.pca_points}")


#: Fields that only choose which jobs run (left out of the run store's header): a job's key
#: names its task, variant (a combination by its ``+``-joined name) and seed.
SELECTION_FIELDS = ("option_seeds", "variants", "combination")


def quick_settings() -> Settings:
    r"""d = 4 GP and 5-feature SVM tasks, T = 3, one seed: every variant and a combination."""
    quick = dataclasses.replace(paper.Settings.quick(), iterations=3, svm_iterations=2, pilot_points=1)
    return Settings(
        **dataclasses.asdict(quick),
        option_seeds=(0,),
        subspace_k=2,
        pca_points=6,
        combination=("posterior_subspace", "adaptive_norm"),
    )


def _problem(settings: Settings, task: str, seed: int):
    return paper.gp_problem(settings, seed) if task == "gp" else paper.svm_problem(settings, seed)


def _public_pca_basis(settings: Settings, task: str) -> list[list[float]]:
    r"""``PublicGradientPCA`` of the task's independent synthetic draw (seed ``pilot_seed``)."""
    problem = _problem(settings, task, settings.pilot_seed)
    points = torch.quasirandom.SobolEngine(problem.dim, scramble=True, seed=settings.pilot_seed).draw(
        settings.pca_points, dtype=torch.float64
    )
    points = problem.bounds[0] + (problem.bounds[1] - problem.bounds[0]) * points
    noise = getattr(problem, "fit_noise_variance", 1e-4)
    oracle = PublicGradientPCA.from_objective(
        problem.objective,
        points,
        k=min(settings.subspace_k, problem.dim),
        kernel=problem.recommended_kernel(),
        noise_variance=noise,
    )
    return oracle.basis.tolist()


def prepare(settings: Settings) -> dict:
    r"""Public set-up: the GP task's pilot B and the public-PCA bases (independent synthetic draws).

    The bases are made whichever variants are selected, so the context (part of the run store's
    header) does not depend on the selection fields.
    """
    context: dict[str, Any] = {}
    if "gp" in settings.tasks:
        context["gp_clip"] = paper.pilot(settings)["clip_bound"]
    context["pca_basis"] = {task: _public_pca_basis(settings, task) for task in settings.tasks}
    return context


def combination_name(names: tuple[str, ...]) -> str:
    r"""The variant name of a combination of ``VARIANTS``: ``"adagrad_full+adaptive_norm"``."""
    return "+".join(names)


def variant_changes(settings: Settings, context: dict, task: str, variant: str, dim: int) -> dict[str, Any]:
    r"""The ``DPGIBOConfig`` changes of ``variant`` (a ``+``-joined combination: of each part)."""
    names = tuple(variant.split("+"))
    if any(name not in VARIANTS for name in names):
        raise ValueError(f"variant {variant!r} is not one of {tuple(VARIANTS)} or a '+'-joined combination of them")
    changes: dict[str, Any] = {}
    for name in names:
        changes.update(VARIANTS[name])
    if changes.get("projection") == "posterior":
        changes["projection"] = Projected(PosteriorGradientCovarianceSubspace(min(settings.subspace_k, dim)))
    elif changes.get("projection") == "public_pca":
        changes["projection"] = Projected(FixedSubspace(torch.tensor(context["pca_basis"][task], dtype=torch.float64)))
    return changes


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""One DP-GIBO job per (task, seed, variant); the combination too when one is set."""
    variants = list(settings.variants) + ([combination_name(settings.combination)] if settings.combination else [])
    jobs = []
    for task in settings.tasks:
        cost = 25.0 * (settings.gp_dim / 15) ** 2 if task == "gp" else 150.0
        for seed in settings.option_seeds:
            for variant in variants:
                jobs.append(
                    Job(
                        f"{task} {variant} seed {seed}",
                        "dp_gibo",
                        dict(task=task, variant=variant, seed=seed),
                        cost=cost,
                    )
                )
    return jobs


class Runner(KindRunner):
    r"""Runs one DP-GIBO variant on one task and seed (``execute`` is the CLI's ``run_job``)."""

    KINDS = ("dp_gibo",)

    def config(self, task: str, variant: str, seed: int) -> tuple[Any, DPGIBOConfig]:
        r"""The task's problem and the variant's config (fixed batches of d + 1 for T steps)."""
        s = self.settings
        problem = _problem(s, task, seed)
        d = problem.dim
        if task == "gp":
            base = dict(
                num_iterations=s.iterations,
                clip=FixedClip(self.context["gp_clip"]),
                step_size=s.step_size,
                noise_variance=problem.fit_noise_variance,
                search_radius=s.search_radius,
                theta0=paper.gp_theta0(problem, seed, s.gp_theta0),
            )
        else:
            base = dict(
                num_iterations=s.svm_iterations,
                clip=FixedClip(s.svm_clip),
                step_size=s.svm_step_size,
                theta0=problem.sample_in_bounds(1, seed=1000 + seed)[0],
            )
        base.update(
            bounds=problem.bounds,
            kernel=problem.recommended_kernel(),
            privacy_mu=s.privacy_mu,
            step_rule="adagrad",
            batches=batch_rule(d + 1, search=paper.batch_search(s)),
            seed=seed,
            target_delta=s.target_delta,
            raw_samples=s.raw_samples,
            num_restarts=s.num_restarts,
        )
        config = DPGIBOConfig(**{**base, **variant_changes(s, self.context, task, variant, d)})
        return problem, config

    def dp_gibo(self, task: str, variant: str, seed: int) -> Run:
        r"""The DP-GIBO ``variant`` on ``task`` and ``seed``."""
        start = time.perf_counter()
        problem, config = self.config(task, variant, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # seeded noise: a comparison needs common seeds
            warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
            dp_result = DPGIBO(config).run(problem, progress=False)
        result = from_dp_gibo_result(dp_result)
        evals, losses = iterate_curve(problem, result)
        returned = float(problem.objective(result.theta.unsqueeze(0))[0])
        return Run(
            task,
            variant,
            seed,
            variant,
            evals,
            losses,
            returned,
            result.num_evaluations,
            time.perf_counter() - start,
            epsilon=guarantee_of(result).epsilon,
            extra={
                "initial_loss": losses[0],
                "dim": problem.dim,
                "steps": len(dp_result.release.iterates) - 1,
                "mu": guarantee_of(result).mu,
            },
        )


def make_runner(settings: Settings, context: dict) -> RunJob:
    r"""``Runner(settings, context).execute``."""
    return Runner(settings, context).execute


def _plot(settings: Settings, runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in settings.tasks if any(r.experiment == t for r in runs)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        names = list(dict.fromkeys(r.method for r in runs if r.experiment == task))
        stats = [mean_se([r.final_loss for r in runs if r.experiment == task and r.method == n]) for n in names]
        ax.bar(
            range(len(names)),
            [m for m, _ in stats],
            yerr=[0 if math.isnan(se) else se for _, se in stats],
            capsize=3,
            color=["gray"] + ["C0"] * (len(names) - 1),
        )
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("final validation loss (non-private diagnostic)")
        ax.set_title(f"{task}, μ = {settings.privacy_mu:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""``options.md`` (per task: each variant's loss, wins against plain per seed) and ``options.png``."""
    lines = ["# DP-GIBO options against plain DP-GIBO", "", f"Command: `{command}`", ""]
    if "wall_s" in context:
        lines += [f"Wall time {context['wall_s']:.0f} s ({context.get('execution', '')}).", ""]
    lines += [
        f"μ = {settings.privacy_mu:g} for every run; fixed batches of d + 1 points; losses are NON-PRIVATE "
        "diagnostics of the returned point. Wins: seeds where the variant's loss is strictly below plain "
        "DP-GIBO's on the same seed (same data, θ₀ and noise seed).",
        "",
    ]
    for task in settings.tasks:
        task_runs = [r for r in runs if r.experiment == task]
        if not task_runs:
            continue
        plain = {r.seed: r.final_loss for r in task_runs if r.method == "plain"}
        dim = task_runs[0].extra["dim"]
        lines += [
            f"## {task} (d = {dim})",
            "",
            "| variant | seeds | evaluations (mean) | final loss (mean ± s.e.) | median | wins vs plain | "
            "mean paired difference vs plain | wall s / run |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name in dict.fromkeys(r.method for r in task_runs):
            sel = [r for r in task_runs if r.method == name]
            losses = [r.final_loss for r in sel]
            diffs = [r.final_loss - plain[r.seed] for r in sel if r.seed in plain]
            wins = sum(d < 0 for d in diffs)
            paired = "—" if name == "plain" or not diffs else format_mean_se(diffs, 3)
            lines.append(
                markdown_row(
                    [
                        name,
                        str(len(sel)),
                        f"{statistics.fmean(r.num_evaluations for r in sel):.0f}",
                        format_mean_se(losses, 4),
                        f"{statistics.median(losses):.4g}",
                        "—" if name == "plain" else f"{wins}/{len(diffs)}",
                        paired,
                        f"{statistics.fmean(r.wall_s for r in sel):.1f}",
                    ]
                )
            )
        lines.append("")
    path = out / "options.md"
    path.write_text("\n".join(lines) + "\n")
    _plot(settings, runs, out / "options.png")
    return path
