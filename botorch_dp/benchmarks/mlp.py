r"""A real tuning task: the continuous hyperparameters of a torch MLP on a scikit-learn data set.

θ = (log10 learning rate, log10 weight decay, dropout, SGD momentum) of a one-hidden-layer
MLP trained with SGD on a data set that scikit-learn ships (default ``load_digits``),
split per seed into train / validation / test and standardised with the training
statistics. Each validation example is a user; its loss is its cross-entropy under the
model trained at θ (capped at ``loss_cap``; a fresh model from the seed for every θ, so
an evaluation is a deterministic function of θ).

Methods at each μ of ``Settings.mus`` (δ = ``target_delta``; ε = ``gdp_epsilon(μ, δ)``):
DP-GIBO (μ-GDP on the validation users), private random search (Papernot–Steinke,
calibrated to the same (ε, δ)) and DP-HyPO (calibrated to the same (ε, δ) on the ledger's
order grid, the grid its guarantee is reported on); once per seed the non-private
references random search, UCB-BO and GIBO (μ = ∞, no clipping). Every method of a seed
gets DP-GIBO's number of evaluations (``E[K]`` for the two private selections).

``prepare`` is the PUBLIC set-up: a pilot on ``synthetic_like`` data of the same shape
(never the validation users) sets the GP noise variance σ², DP-GIBO's clip bound B and
the score clip C of the selections. Every loss a ``Run`` records (validation loss of the
released θ, test loss and accuracy of the model trained there) is a NON-PRIVATE
diagnostic, computed only to evaluate the methods.

Randomness: the replication seed fixes the public randomness (split, initialisation,
dropout and shuffling, the random-search points and UCB-BO's Sobol start). With
``seeded_noise`` (default, as ``benchmarks.paper`` does) the privacy randomness of the
private methods (DP-GIBO's noise, the selections' ``K``, trial points and score noise)
is derived from the replication seed, so runs are reproducible; each such run raises a
``PrivacyWarning`` by design. ``seeded_noise=False`` draws it from OS entropy.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import (
    NO_CLIP,
    BaselineResult,
    dp_hypo,
    from_dp_gibo_result,
    per_trial_mu_for_epsilon,
    private_random_search,
    random_search,
    ucb_bo,
)
from botorch_dp.benchmarks.jobs import Job, KindRunner
from botorch_dp.benchmarks.report import markdown_row
from botorch_dp.benchmarks.runs import (
    Run,
    format_mean_se,
    format_mu,
    iterate_curve,
    mean_se,
    round_sig,
    step_interp,
)
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.analysis.dp_hypo import dp_hypo_per_trial_mu_for_epsilon
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.training import TrainingConfig
from botorch_dp.tuning import (
    ClassificationData,
    Hyperparameter,
    SearchSpace,
    TorchModelTuningObjective,
    load_sklearn_classification,
    synthetic_like,
)
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "EXPERIMENT",
    "METHODS",
    "Runner",
    "Settings",
    "experiment_jobs",
    "load_data",
    "make_objective",
    "make_runner",
    "prepare",
    "quick_settings",
    "search_space",
    "write_report",
]

INF = math.inf
#: The ``Run.experiment`` of every run of this module.
EXPERIMENT = "mlp"
REPORT_MD, REPORT_PNG = "mlp_tuning.md", "mlp_tuning.png"
#: Method labels: private (one per μ) and the non-private references (μ = ∞, once per seed).
DP_GIBO, PRIVATE_RS, DP_HYPO = "DP-GIBO", "private random search", "DP-HyPO"
GIBO, RANDOM, UCB = "GIBO (non-private)", "random search (non-private)", "UCB-BO (non-private)"
PRIVATE_METHODS = (DP_GIBO, PRIVATE_RS, DP_HYPO)
REFERENCE_METHODS = (GIBO, RANDOM, UCB)
METHODS = PRIVATE_METHODS + REFERENCE_METHODS
#: Stream numbers of the seeded privacy noise (child streams of the replication seed).
_NOISE_STREAM = {DP_GIBO: 1, PRIVATE_RS: 2, DP_HYPO: 3, GIBO: 4}


@dataclass
class Settings:
    r"""Every knob of the MLP tuning experiment (public values only)."""

    mode: str = "full"
    # data and model
    dataset: str = "digits"
    val_fraction: float = 0.3
    test_fraction: float = 0.2
    seeds: tuple[int, ...] = tuple(range(10))
    hidden: tuple[int, ...] = (32,)
    epochs: int = 8
    train_batch_size: int = 64
    loss_cap: float = 5.0
    tune_momentum: bool = True
    # privacy
    mus: tuple[float, ...] = (0.5, 1.0, 2.0)
    target_delta: float = 1e-5
    seeded_noise: bool = True
    # DP-GIBO (θ₀ = box centre, AdaGrad, fixed batches of d + 1)
    iterations: int = 10
    batch_size: int | None = None  # None: d + 1
    step_size: float = 0.2
    search_radius: float = 0.1
    lengthscale: float = 0.2
    outputscale: float = 1.0
    raw_samples: int = 32
    num_restarts: int = 1
    # private selections: E[K] = fraction · budget
    selection_fraction: float = 1.0
    tnb_eta: float = 1.0
    dp_hypo_ratio: float = 1.2  # the largest of (1.05, 1.1, 1.2, 1.5, 2) feasible at μ = 0.5 with E[K] = 50
    dp_hypo_candidates: int = 512
    dp_hypo_refit_every: int = 5
    # UCB-BO
    ucb_beta: float = 2.0
    ucb_num_initial: int | None = None  # None: 2(d + 1)
    ucb_refit_every: int = 5
    ucb_raw_samples: int = 32
    ucb_num_restarts: int = 1
    # pilot on public synthetic data
    pilot_seed: int = 10_000
    pilot_points: int = 4
    pilot_training_seeds: int = 3
    min_noise_variance: float = 1e-4


def quick_settings() -> Settings:
    r"""A smoke configuration that keeps every code path (iris, a tiny MLP; seconds on one core)."""
    return Settings(
        mode="quick", dataset="iris", seeds=(0, 1), hidden=(8,), epochs=2, train_batch_size=32, mus=(0.5, 2.0),
        iterations=2, raw_samples=16, num_restarts=1, dp_hypo_candidates=64, dp_hypo_refit_every=4,
        ucb_num_initial=8, ucb_refit_every=2, ucb_raw_samples=16, ucb_num_restarts=1, pilot_points=2,
        pilot_training_seeds=2,
    )


# ============================================================================ task
def search_space(settings: Settings) -> SearchSpace:
    r"""θ on the unit cube: learning rate and weight decay (log10), dropout and (optionally) momentum.

    Ranges are public and chosen without data: lr ∈ [1e-4, 0.3], weight decay ∈ [1e-6, 0.1]
    (as ``default_mlp_space``), dropout ∈ [0, 0.5], SGD momentum ∈ [0, 0.95].
    """
    hps = [
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ]
    if settings.tune_momentum:
        hps.append(Hyperparameter("momentum", 0.0, 0.95, target="optimizer"))
    return SearchSpace(hps)


def load_data(settings: Settings, seed: int) -> ClassificationData:
    r"""The seed's stratified train / validation / test split of ``settings.dataset``."""
    return load_sklearn_classification(
        settings.dataset, val_fraction=settings.val_fraction, test_fraction=settings.test_fraction, seed=seed
    )


def make_objective(settings: Settings, data: ClassificationData, training_seed: int) -> TorchModelTuningObjective:
    r"""θ ↦ per-user capped cross-entropies of an SGD-trained MLP (training from ``training_seed``)."""
    training = TrainingConfig(
        epochs=settings.epochs, batch_size=settings.train_batch_size, hidden_sizes=tuple(settings.hidden),
        seed=training_seed, num_threads=1,
    )
    return TorchModelTuningObjective(
        data, search_space(settings), optimizer=torch.optim.SGD, training=training, loss_cap=settings.loss_cap
    )


class _MeanLoss:
    r"""``objective(θ)``: the mean validation loss (NON-PRIVATE), for ``runs.iterate_curve``."""

    def __init__(self, objective: TorchModelTuningObjective) -> None:
        self._objective = objective

    def objective(self, X: torch.Tensor) -> torch.Tensor:
        return self._objective(X).mean(-1)


# ============================================================================ pilot (public)
def prepare(settings: Settings) -> dict:
    r"""The public pilot: σ², clip bound B and score clip C from ``synthetic_like`` data.

    Only public facts of the real data are used (split sizes, number of features and
    classes, through ``synthetic_like``); the validation users are never evaluated.
    On the synthetic data (seed ``pilot_seed``), at ``pilot_points`` uniform θ:

    - σ²: the pooled variance of a per-user loss between ``pilot_training_seeds``
      trainings that differ only in their seed (the observation noise of the GP,
      ``f(θ) + v``: one fixed seed is one draw of ``v``), floored at ``min_noise_variance``;
    - B: the 90% quantile of the per-user gradient estimates ``‖A y_i‖`` that DP-GIBO
      forms from d + 1 uniform points in the search box around θ (2 digits);
    - C: the 95% quantile of the per-user losses seen (2 digits, at most ``loss_cap``).

    Returns:
        ``noise_variance``, ``clip_bound``, ``loss_clip`` and the statistics the report quotes.
    """
    s = settings
    shape = load_data(s, s.seeds[0])  # only its split sizes, features and classes are read
    public = synthetic_like(shape, seed=s.pilot_seed)
    space = search_space(s)
    d = space.dim
    gen = torch.Generator().manual_seed(s.pilot_seed)
    thetas = torch.rand(s.pilot_points, d, generator=gen, dtype=torch.float64)
    with torch_threads(1):
        per_seed = torch.stack([
            make_objective(s, public, s.pilot_seed + k)(thetas) for k in range(s.pilot_training_seeds)
        ])  # seeds x points x n
        noise_variance = max(float(per_seed.var(dim=0, unbiased=True).mean()), s.min_noise_variance)
        kernel = space.recommended_kernel(s.lengthscale, s.outputscale)
        objective = make_objective(s, public, s.pilot_seed)
        norms, losses = [], [per_seed.flatten()]
        for theta in thetas:
            lo, hi = (theta - s.search_radius).clamp(0.0, 1.0), (theta + s.search_radius).clamp(0.0, 1.0)
            X = lo + (hi - lo) * torch.rand(d + 1, d, generator=gen, dtype=torch.float64)
            Y = objective(X)  # (d + 1) x n
            with torch.no_grad():
                A = GradientGP(X, kernel, noise_variance).gradient_weights(theta)
            norms.append((A @ Y).T.norm(dim=-1))
            losses.append(Y.flatten())
    norms_t, losses_t = torch.cat(norms), torch.cat(losses)
    return {
        "noise_variance": noise_variance,
        "clip_bound": round_sig(float(torch.quantile(norms_t, 0.9))),
        "loss_clip": min(round_sig(float(torch.quantile(losses_t, 0.95))), s.loss_cap),
        "grad_norm_median": float(norms_t.median()),
        "grad_norm_q90": float(torch.quantile(norms_t, 0.9)),
        "loss_q50": float(losses_t.median()),
        "loss_q95": float(torch.quantile(losses_t, 0.95)),
        "pilot_trainings": s.pilot_points * (s.pilot_training_seeds + d + 1),
        "sizes": shape.sizes(),
        "num_features": shape.num_features,
        "num_classes": shape.num_classes,
    }


# ============================================================================ runner
class Runner(KindRunner):
    r"""Runs one job of one method and returns a ``Run``; picklable (settings and context only).

    Every job rebuilds its seed's data and objective, so a job depends on its arguments only.
    """

    KINDS = ("gibo", "random", "ucb", "private_rs", "dp_hypo")

    def execute(self, kind: str, kwargs: dict) -> Run:
        r"""Run ``self.<kind>(**kwargs)`` on one torch thread."""
        with torch_threads(1):
            return super().execute(kind, kwargs)

    # ------------------------------------------------------------------ helpers
    def _objective(self, seed: int) -> TorchModelTuningObjective:
        return make_objective(self.settings, load_data(self.settings, seed), seed)

    def _noise_seed(self, method: str, seed: int, mu: float) -> int | None:
        if not self.settings.seeded_noise:
            return None
        mu_key = 0 if math.isinf(mu) else int(round(mu * 1000))
        return child_seeds([seed, _NOISE_STREAM[method], mu_key], 1)[0]

    def _run(self, method: str, seed: int, setting: Any, objective: TorchModelTuningObjective,
             result: BaselineResult, start: float, evals: list[int], losses: list[float],
             num_evaluations: float, extra: dict) -> Run:
        diag = objective.evaluate_non_private(result.theta)  # NON-PRIVATE diagnostic
        wall = time.perf_counter() - start
        space = objective.space
        return Run(
            EXPERIMENT, method, seed, setting, evals, losses + [diag["validation_loss"]] if not losses else losses,
            diag["validation_loss"], num_evaluations, wall,
            epsilon=None if result.guarantee is None else result.guarantee.epsilon,
            extra={"test_loss": diag["test_loss"], "test_accuracy": diag["test_accuracy"],
                   "validation_accuracy": diag["validation_accuracy"],
                   "hyperparameters": space.to_natural(result.theta), "trainings": objective.num_trainings,
                   **extra},
        )

    # ------------------------------------------------------------------ methods
    def gibo(self, method: str, seed: int, mu: float, setting: Any) -> Run:
        r"""DP-GIBO at ``mu`` (clip bound from the pilot), or non-private GIBO at ``mu = inf`` (no clipping)."""
        s, c = self.settings, self.context
        start = time.perf_counter()
        objective = self._objective(seed)
        space = objective.space
        config = DPGIBOConfig(
            bounds=space.bounds, kernel=space.recommended_kernel(s.lengthscale, s.outputscale),
            num_iterations=s.iterations, privacy_mu=mu, clip_bound=NO_CLIP if math.isinf(mu) else c["clip_bound"],
            step_size=s.step_size, step_rule="adagrad", batch_size=s.batch_size or space.dim + 1,
            search_radius=s.search_radius, noise_variance=c["noise_variance"], theta0=space.bounds.mean(0),
            target_delta=s.target_delta, raw_samples=s.raw_samples, num_restarts=s.num_restarts,
            seed=self._noise_seed(DP_GIBO if math.isfinite(mu) else GIBO, seed, mu),
        )
        dp_result = DPGIBO(config).run(objective, progress=False)
        result = from_dp_gibo_result(dp_result)
        evals, losses = iterate_curve(_MeanLoss(objective), result)  # NON-PRIVATE curve
        return self._run(method, seed, setting, objective, result, start, evals, losses, result.num_evaluations,
                         {"batch_sizes": dp_result.release.batch_sizes, "initial_loss": losses[0],
                          "noise_std": dp_result.release.guarantee.noise_std})

    def random(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private random search with ``budget`` uniform points (from the replication seed)."""
        start = time.perf_counter()
        objective = self._objective(seed)
        result = random_search(objective, objective.bounds, num_evaluations=budget, seed=seed)
        evals, losses = self._incumbent_curve(result)
        return self._run(method, seed, setting, objective, result, start, evals, losses, result.num_evaluations, {})

    def ucb(self, method: str, seed: int, budget: int, setting: Any) -> Run:
        r"""Non-private UCB-BO with ``budget`` evaluations."""
        s = self.settings
        start = time.perf_counter()
        objective = self._objective(seed)
        result = ucb_bo(
            objective, objective.bounds, num_evaluations=budget, num_initial=s.ucb_num_initial, beta=s.ucb_beta,
            refit_every=s.ucb_refit_every, raw_samples=s.ucb_raw_samples, num_restarts=s.ucb_num_restarts, seed=seed,
        )
        evals, losses = self._incumbent_curve(result)
        return self._run(method, seed, setting, objective, result, start, evals, losses, result.num_evaluations, {})

    def private_rs(self, method: str, seed: int, budget: int, mu: float, setting: Any) -> Run:
        r"""Private random search with ``E[K] = max(2, fraction · budget)`` at the (ε, δ) of ``mu``."""
        s, c = self.settings, self.context
        mean_trials = max(2.0, s.selection_fraction * budget)
        start = time.perf_counter()
        objective = self._objective(seed)
        mu0 = per_trial_mu_for_epsilon(target_epsilon=gdp_epsilon(mu, s.target_delta), target_delta=s.target_delta,
                                       mean_trials=mean_trials, tnb_eta=s.tnb_eta)
        result = private_random_search(
            objective, objective.bounds, mean_trials=mean_trials, per_trial_mu=mu0, loss_clip=c["loss_clip"],
            tnb_eta=s.tnb_eta, target_delta=s.target_delta, seed=self._noise_seed(PRIVATE_RS, seed, mu),
        )
        return self._run(method, seed, setting, objective, result, start, [int(round(mean_trials))], [], mean_trials,
                         {"per_trial_mu": mu0, "realized_trials_NON_PRIVATE": result.num_evaluations,
                          "noise_std": result.guarantee.details["noise_std"]})

    def dp_hypo(self, method: str, seed: int, budget: int, mu: float, setting: Any) -> Run:
        r"""DP-HyPO with ``E[K] = max(2, fraction · budget)`` at the (ε, δ) of ``mu``."""
        s, c = self.settings, self.context
        mean_trials = max(2.0, s.selection_fraction * budget)
        start = time.perf_counter()
        objective = self._objective(seed)
        mu0 = dp_hypo_per_trial_mu_for_epsilon(
            target_epsilon=gdp_epsilon(mu, s.target_delta), target_delta=s.target_delta, mean_trials=mean_trials,
            ratio_upper=s.dp_hypo_ratio, tnb_eta=s.tnb_eta)
        result = dp_hypo(
            objective, objective.bounds, mean_trials=mean_trials, per_trial_mu=mu0, loss_clip=c["loss_clip"],
            ratio_bound=s.dp_hypo_ratio, tnb_eta=s.tnb_eta, target_delta=s.target_delta,
            num_candidates=s.dp_hypo_candidates, refit_every=s.dp_hypo_refit_every,
            seed=self._noise_seed(DP_HYPO, seed, mu),
        )
        return self._run(method, seed, setting, objective, result, start, [int(round(mean_trials))], [], mean_trials,
                         {"per_trial_mu": mu0, "realized_trials_NON_PRIVATE": result.num_evaluations,
                          "noise_std": result.guarantee.details["noise_std"]})

    @staticmethod
    def _incumbent_curve(result: BaselineResult) -> tuple[list[int], list[float]]:
        r"""Best observed mean loss after each evaluation (the objective is deterministic: the
        incumbent's validation loss; NON-PRIVATE)."""
        best = torch.cummin(result.history.mean_losses, 0).values
        return [int(e) for e in result.history.evaluations], best.tolist()


def make_runner(settings: Settings, context: dict):
    r"""``Runner(settings, context).execute``: the picklable ``run_job`` of ``jobs.run_jobs``."""
    return Runner(settings, context).execute


# ============================================================================ jobs
def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""Per seed: DP-GIBO at every μ and GIBO; then, with the first DP-GIBO run's number of
    evaluations as budget, random search, UCB-BO and, at every μ, private random search and
    DP-HyPO (each μ's selections take that μ's DP-GIBO budget)."""
    s = settings
    jobs: list[Job] = []
    d = search_space(s).dim
    evals = s.iterations * (s.batch_size or d + 1)
    train_s = 0.15 * s.epochs / 10 * (1.0 if s.mode == "full" else 0.05)  # seconds per training here
    for seed in s.seeds:
        dp_jobs = {}
        for mu in s.mus:
            dp_jobs[mu] = len(jobs)
            jobs.append(Job(f"DP-GIBO μ={mu:g} seed {seed}", "gibo",
                            dict(method=DP_GIBO, seed=seed, mu=mu, setting=mu), cost=train_s * (evals + 15) + 5))
        source = dp_jobs[s.mus[0]]
        jobs.append(Job(f"GIBO seed {seed}", "gibo", dict(method=GIBO, seed=seed, mu=INF, setting=INF),
                        cost=train_s * (evals + 15) + 5))
        jobs.append(Job(f"random search seed {seed}", "random", dict(method=RANDOM, seed=seed, setting=INF),
                        budget_from=source, cost=train_s * evals))
        jobs.append(Job(f"UCB-BO seed {seed}", "ucb", dict(method=UCB, seed=seed, setting=INF),
                        budget_from=source, cost=train_s * evals + 10))
        for mu in s.mus:
            jobs.append(Job(f"private RS μ={mu:g} seed {seed}", "private_rs",
                            dict(method=PRIVATE_RS, seed=seed, mu=mu, setting=mu),
                            budget_from=dp_jobs[mu], cost=train_s * evals))
            jobs.append(Job(f"DP-HyPO μ={mu:g} seed {seed}", "dp_hypo",
                            dict(method=DP_HYPO, seed=seed, mu=mu, setting=mu),
                            budget_from=dp_jobs[mu], cost=train_s * evals + 10))
    return jobs


# ============================================================================ report
def _groups(settings: Settings, runs: list[Run]) -> list[tuple[float, str, list[Run]]]:
    r"""``(μ, method, runs)`` in table order: private methods per μ, then the references (μ = ∞)."""
    out = []
    for mu in settings.mus:
        for method in PRIVATE_METHODS:
            group = [r for r in runs if r.method == method and r.setting == mu]
            if group:
                out.append((mu, method, group))
    for method in REFERENCE_METHODS:
        group = [r for r in runs if r.method == method]
        if group:
            out.append((INF, method, group))
    return out


def _paired(a: list[Run], b: list[Run], key) -> tuple[float, float, int, int, int]:
    r"""``key(b) − key(a)`` over common seeds: mean, s.e., wins of ``a`` (> 0), ties (= 0), pairs."""
    by_seed = {r.seed: r for r in b}
    diffs = [key(by_seed[r.seed]) - key(r) for r in a if r.seed in by_seed]
    if not diffs:
        return math.nan, math.nan, 0, 0, 0
    m, se = mean_se(diffs)
    return m, se, sum(x > 0 for x in diffs), sum(x == 0 for x in diffs), len(diffs)


def _pairs(settings: Settings, runs: list[Run]) -> list[tuple[float, str, list[Run], list[Run]]]:
    r"""``(μ, other method, DP-GIBO runs, other runs)`` of the paired comparisons that have runs."""
    out = []
    for mu in settings.mus:
        gibo = [r for r in runs if r.method == DP_GIBO and r.setting == mu]
        for other in (PRIVATE_RS, DP_HYPO, GIBO):
            rest = [r for r in runs if r.method == other and (r.setting == mu or other == GIBO)]
            if gibo and rest:
                out.append((mu, other, gibo, rest))
    return out


def _sign_test(wins: int, losses: int) -> float:
    r"""Two-sided exact sign test of ``wins`` against ``losses`` (``nan`` without any)."""
    if wins + losses == 0:
        return math.nan
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, 0.5).pvalue)


def _verdict(m: float, se: float) -> str:
    r"""``"DP-GIBO better"`` / ``"DP-GIBO worse"`` when the mean is over 2 s.e. from 0."""
    if math.isnan(m) or math.isnan(se):
        return "—"
    if m - 2 * se > 0:
        return "DP-GIBO better"
    if m + 2 * se < 0:
        return "DP-GIBO worse"
    return "no clear difference"


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def report_text(settings: Settings, context: dict, runs: list[Run], command: str) -> str:
    r"""The Markdown report (tables, paired comparisons, settings)."""
    s, c = settings, context
    space = search_space(s)
    sizes = c["sizes"]
    job_wall = sum(r.wall_s for r in runs)
    seeds = sorted({r.seed for r in runs})
    lines = [
        "# Private tuning of a torch MLP on a scikit-learn data set",
        "",
        f"Command: `{command}`",
        "",
        f"Total wall time: {c.get('wall_s', 0.0):.0f} s (pilot {c.get('prepare_wall_s', 0.0):.0f} s; "
        f"{len(runs)} jobs {job_wall:.0f} s of run time, some possibly taken from the run store; "
        f"{c.get('execution', 'serial')}). "
        f"Seeds: {', '.join(map(str, seeds))}; δ = {s.target_delta:g}.",
        "",
        "Every loss and accuracy below is a NON-PRIVATE diagnostic: the validation loss of the released θ",
        "(mean capped cross-entropy over the validation users, noise-free) and the test loss / accuracy of",
        "the model trained at the released θ, computed only to evaluate the methods. Mean ± standard error",
        "over seeds; each seed is its own split, initialisation and privacy noise.",
        "",
        markdown_row(["μ", "ε at δ", "method", "validation loss (released θ)", "test loss", "test accuracy",
                      "evaluations", "wall s / run"]),
        "|" + "|".join(["---"] * 8) + "|",
    ]
    for mu, method, group in _groups(s, runs):
        eps = [r.epsilon for r in group if r.epsilon is not None]
        lines.append(markdown_row([
            format_mu(mu), _fmt(max(eps), ".4g") if eps else "∞", method,
            format_mean_se([r.final_loss for r in group], 3),
            format_mean_se([r.extra["test_loss"] for r in group], 3),
            format_mean_se([r.extra["test_accuracy"] for r in group], 3),
            f"{statistics.fmean(r.num_evaluations for r in group):g}"
            + (" (E[K])" if method in (PRIVATE_RS, DP_HYPO) else ""),
            f"{statistics.fmean(r.wall_s for r in group):.1f}",
        ]))
    realized = []
    for mu in s.mus:
        for method in (PRIVATE_RS, DP_HYPO):
            ks = sorted(r.extra["realized_trials_NON_PRIVATE"] for r in runs if r.method == method and r.setting == mu)
            if ks:
                realized.append(f"{method} at μ = {mu:g}: {', '.join(map(str, ks))}")
    if realized:
        lines += ["", "The selections draw their number of trials K from a truncated negative binomial (η = "
                  f"{s.tnb_eta:g}{', i.e. geometric' if s.tnb_eta == 1 else ''}) with E[K] = "
                  f"{s.selection_fraction:g} × the budget; the realised K per seed (sorted; "
                  "NON-PRIVATE diagnostic, hidden by the method) were: " + "; ".join(realized) + "."]
    lines += ["", "## Paired by seed: DP-GIBO against the private baselines at the same (ε, δ)", "",
              "Δ validation loss = other − DP-GIBO and Δ test accuracy = DP-GIBO − other (positive: DP-GIBO",
              "better), mean ± s.e. over seeds; *wins*: seeds where DP-GIBO is strictly better (ties counted",
              "apart); *verdict*: a mean more than two standard errors from 0, else no clear difference. The last",
              "rows compare DP-GIBO with non-private GIBO (the cost of privacy and clipping).", "",
              markdown_row(["μ", "DP-GIBO vs", "Δ validation loss", "wins / ties / seeds", "sign test p",
                            "verdict (validation)", "Δ test accuracy", "wins / ties / seeds", "sign test p",
                            "verdict (test)"]),
              "|" + "|".join(["---"] * 10) + "|"]
    for mu, other, gibo, rest in _pairs(s, runs):
        cells = [format_mu(mu), other]
        for key in (lambda r: r.final_loss, lambda r: -r.extra["test_accuracy"]):
            m, se, wins, ties, n = _paired(gibo, rest, key)
            cells += [f"{m:+.4f} ± {_fmt(se, '.2g')}", f"{wins} / {ties} / {n}", _fmt(_sign_test(wins, n - ties - wins), ".2g"),
                      _verdict(m, se)]
        lines.append(markdown_row(cells))
    lines += ["", "*sign test p*: two-sided exact binomial test of the wins against the losses (ties left out), a",
              "check that does not assume normal differences (the selections' losses are heavy-tailed)."]
    initial = [r.extra["initial_loss"] for r in runs if r.method == GIBO]
    d = space.dim
    lines += [
        "",
        "## Set-up (public)",
        "",
        f"- Data: scikit-learn `load_{s.dataset}` ({c['num_features']} features, {c['num_classes']} classes), "
        f"stratified split per seed into train {sizes['train']} / validation {sizes['validation']} (the users) / "
        f"test {sizes['test']}, standardised with the training statistics.",
        f"- Model: MLP {c['num_features']} → {' → '.join(map(str, s.hidden))} (ReLU, dropout) → {c['num_classes']}, "
        f"SGD, {s.epochs} epochs, batch {s.train_batch_size}, one torch thread; initialisation, dropout and "
        "shuffling from the seed (an evaluation is a deterministic function of θ). Per-user loss: the "
        f"validation example's cross-entropy capped at {s.loss_cap:g}.",
        f"- Search space (unit cube, d = {d}): " + "; ".join(
            f"{h.name} ∈ [{h.lower:g}, {h.upper:g}]" + (" (log10)" if h.log_scale else "")
            for h in space.hyperparameters) + ".",
        f"- Pilot (`prepare`, public synthetic data of the same shape from `synthetic_like`, seed {s.pilot_seed}, "
        f"{c['pilot_trainings']} trainings, never the validation users): σ² = {c['noise_variance']:.3g} (pooled "
        f"per-user loss variance over {s.pilot_training_seeds} training seeds at {s.pilot_points} uniform θ); "
        f"B = {c['clip_bound']:g} (90% quantile of ‖A y_i‖ over d + 1 points in the search box; median "
        f"{c['grad_norm_median']:.3g}); score clip C = {c['loss_clip']:g} (95% quantile of the per-user losses; "
        f"median {c['loss_q50']:.3g}).",
        f"- DP-GIBO: θ₀ = box centre, T = {s.iterations}, fixed batches of {s.batch_size or d + 1} "
        f"(so {s.iterations * (s.batch_size or d + 1)} evaluations), AdaGrad η = {s.step_size:g}, search radius "
        f"{s.search_radius:g}, RBF length-scale {s.lengthscale:g}, output scale {s.outputscale:g}, σ² and B from "
        f"the pilot; raw samples {s.raw_samples}, restarts {s.num_restarts}. GIBO: the same with μ = ∞ and no "
        "clipping.",
        f"- Private random search: K ~ truncated negative binomial (η = {s.tnb_eta:g}), E[K] = "
        f"{s.selection_fraction:g} × DP-GIBO's evaluations, per-trial μ₀ from `per_trial_mu_for_epsilon` so that "
        f"ε = gdp_epsilon(μ, δ); scores clipped at C. DP-HyPO: the same K and C, density ratio in "
        f"[1/{s.dp_hypo_ratio:g}, {s.dp_hypo_ratio:g}], {s.dp_hypo_candidates} Sobol candidates, GP refit every "
        f"{s.dp_hypo_refit_every} trials, μ₀ by root finding so that its ε on the ledger's order grid is the same "
        "target.",
        f"- UCB-BO: β = {s.ucb_beta:g}, {s.ucb_num_initial or 2 * (d + 1)} Sobol points, refit every "
        f"{s.ucb_refit_every}; random search: uniform points. Both non-private, with DP-GIBO's evaluations.",
        "- Privacy noise: " + ("derived from the replication seed (reproducible benchmark runs; "
                               "PrivacyWarning by design)." if s.seeded_noise else "OS entropy."),
    ]
    if initial:
        lines.append(f"- Validation loss at θ₀ (box centre, the start of DP-GIBO and GIBO): "
                     f"{format_mean_se(initial, 3)}.")
    lines += [
        "",
        "## Left out",
        "",
        "- DP-SGD training: every model is trained without DP, so only the validation users are protected",
        "  (the guarantee in the table); the training split has no guarantee. DP-SGD would add training noise",
        "  and a second guarantee (`TorchModelTuningObjective(dp_sgd=...)`) at several times the cost.",
        "- A sweep of the selections' E[K] (paper.py's private random search fractions) and of DP-HyPO's",
        "  ratio bound: one E[K] (the shared evaluation budget) and one public ratio, for the time limit.",
        "- Adaptive batches (bias tolerance) and DP-GIBO presets: fixed batches of d + 1 keep every μ at the",
        "  same budget.",
        "- Other data sets (breast_cancer, wine): `dataset=` runs them; not run here.",
        "",
    ]
    return "\n".join(lines)


def make_plot(settings: Settings, runs: list[Run], path: Path) -> None:
    r"""Validation loss of the released θ and test accuracy against μ (references as lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (("validation loss of released θ (non-private diagnostic)", lambda r: r.final_loss),
               ("test accuracy at released θ (non-private diagnostic)", lambda r: r.extra["test_accuracy"]))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    colors = dict(zip(METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, (label, key) in zip(axes, metrics):
        for j, method in enumerate(PRIVATE_METHODS):
            xs, ms, ses = [], [], []
            for mu in settings.mus:
                vals = [key(r) for r in runs if r.method == method and r.setting == mu]
                if vals:
                    m, se = mean_se(vals)
                    xs.append(mu * (1 + 0.04 * (j - 1))), ms.append(m), ses.append(0.0 if math.isnan(se) else se)
            if xs:
                ax.errorbar(xs, ms, yerr=ses, marker="o", capsize=3, label=method, color=colors[method])
        for method, ls in zip(REFERENCE_METHODS, ("--", ":", "-.")):
            vals = [key(r) for r in runs if r.method == method]
            if vals:
                ax.axhline(statistics.fmean(vals), ls=ls, lw=1.2, color=colors[method], label=f"{method}, μ = ∞")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(list(settings.mus))
        ax.set_xticklabels([f"{mu:g}" for mu in settings.mus])
        ax.set_xlabel(f"μ (validation users; ε = gdp_epsilon(μ, {settings.target_delta:g}))")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    _plot_curves(settings, runs, axes[2], colors)
    fig.suptitle(f"MLP on {settings.dataset}: mean ± s.e. over {len({r.seed for r in runs})} seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_curves(settings: Settings, runs: list[Run], ax, colors: dict) -> None:
    r"""Mean validation loss of each method's current choice against evaluations (NON-PRIVATE)."""
    budget = max((int(r.num_evaluations) for r in runs), default=1)
    grid = list(range(budget + 1))
    curves = [(f"{DP_GIBO} μ = {mu:g}", DP_GIBO, mu) for mu in settings.mus] + [(m, m, INF) for m in (GIBO, RANDOM, UCB)]
    for j, (label, method, mu) in enumerate(curves):
        group = [r for r in runs if r.method == method and (r.setting == mu or method != DP_GIBO)]
        if not group:
            continue
        values = torch.tensor([step_interp(r.evals, r.losses, grid) for r in group], dtype=torch.float64)
        mean = values.nanmean(0)
        style = dict(color=colors[method], alpha=0.45 + 0.55 * (j + 1) / len(settings.mus)) if method == DP_GIBO else dict(
            color=colors[method], ls="--")
        ax.plot(grid, mean.tolist(), label=label, **style)
    ax.set_yscale("log")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("validation loss of current choice (non-private diagnostic)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""Write ``mlp_tuning.md`` and ``mlp_tuning.png`` into ``out``; returns the Markdown path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_MD
    path.write_text(report_text(settings, context, runs, command))
    make_plot(settings, runs, out / REPORT_PNG)
    return path
