r"""Private tuning of AMP logistic regression: DP-GIBO vs Papernot–Steinke vs no tuning vs DP-SGD.

The ``amp`` experiment of ``python -m benchmarks`` (and of ``scripts/compare_amp_tuning.py``).

At each ε (δ = 1e-5) and seed, on scikit-learn's bundled ``breast_cancer`` data and a
synthetic high-dimensional logistic model, four methods release a logistic regression:

1. ``AMP, calibrated λ``: one AMP run at ``calibrate_amp(ε, δ)`` (the authors' σ and λ);
   training ε = ε, no validation data used.
2. ``DP-GIBO over log λ``: DP-GIBO (``T`` iterations of ``b = 2`` points on the unit
   cube over ``log10 λ``, starting at the reference λ) with AMP per evaluation, then a
   final AMP run at θ_T. The training budget ε is split in RDP: every evaluation run lies
   below one reference curve r and the final run below w·r, and ``(T·b + w)·r`` converts
   to ε on the ledger's order grid (``plan_amp_runs(num_runs=T·b + w)``); w = T·b gives
   the final model as much RDP as all evaluations together. The validation users pay
   μ = gdp_mu(ε, δ) (reported separately).
3. ``P&S over log λ (AMP)``: Papernot–Steinke private selection with ``K ~ Poisson(m)``
   AMP trials at uniform random ``log10 λ``; each trial is held below a reference curve
   whose P&S bound (Thm. 6, on the same grid) is ε (``plan_amp_selection``); the
   validation scores are the Gaussian score mechanism of ``private_random_search`` with
   a per-trial μ₀ whose P&S bound is ε on the validation users. The winning trial's own
   model is released.
4. ``honest DP-SGD (P&S over lr)``: the same selection over Opacus DP-SGD runs of a
   2-logit linear model at uniform random ``log10 lr``; one noise multiplier for all
   trials, calibrated so that the P&S bound over its ``compute_rdp`` curve is ε.

Both sides use ε: training ε on the training split (add/remove one record, RDP) and a
validation guarantee at the same ε on the validation users (replace one user). Test
accuracy is a NON-PRIVATE diagnostic. ``m = 15.4066`` (``P[K > 10] = 0.9``).

Scaled down from the paper (Redberg, Koskela & Wang, §5) to fit 2 cores: DP-SGD (Adam, clip √2) runs 5
epochs instead of 60 on the synthetic data (expected batch 256: 200 steps per run); on
breast_cancer (284 training records) the expected batch is 64 (q = 0.2, where the
paper's 256 would be q = 0.5) and 30 epochs (150 steps). With so few steps Adam needs a
larger rate: the learning rate is log-uniform in [1e-4, 1], the authors' code's
[1e-5, 1e-1] one decade up, after a check on seed 0 put the best rate at the upper end of
their range (a choice in DP-SGD's favour, made on the reported data).

Randomness: the settings' seeds seed PUBLIC randomness only (splits, synthetic data, DP-SGD
initialisation). The privacy noise (AMP, DP-GIBO, the scores, K and the trial points,
DP-SGD) comes from OS entropy unless ``Runner`` gets a noise seed (``--noise-seed`` of the
script: reproductions only; a ``PrivacyWarning``, and the seed is never written out). The
benchmark CLI never sets one.

Examples::

    python -m benchmarks run amp --quick --out /tmp/amp_quick
    python -m benchmarks run amp --workers 2 --out reports   # full: writes reports/amp_tuning.*
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks.amp_methods import METHOD_FUNCTIONS, lam_range
from benchmarks.amp_task import BETA, CLIP, LABELS, METHODS, REPORT_MD, REPORT_PNG, RUNS_JSON, Settings
from benchmarks.jobs import Job, RunJob
from benchmarks.runs import Run
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.objective_perturbation import calibrate_amp
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems.run_budgets import AMPRunBudget, dp_sgd_noise_for_selection, plan_amp_runs, plan_amp_selection
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig, planned_dp_run
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "AMPRunBudget",
    "LABELS",
    "METHODS",
    "SELECTION_FIELDS",
    "Runner",
    "Settings",
    "experiment_jobs",
    "lam_range",
    "make_runner",
    "plain_settings",
    "plan",
    "prepare",
    "quick_settings",
    "settings_from_plain",
    "write_report",
]


# ============================================================================ planning (public)
def plan(settings: Settings) -> dict:
    r"""Every method's public privacy parameters per ε (and DP-SGD's per data set).

    Nothing here looks at data: the budgets depend on ε, δ, the AMP constants, the
    numbers of runs and the training-set sizes (public).
    """
    s = settings
    out: dict = {"mean_trials": s.mean_trials, "per_epsilon": {}}
    amp = dict(clip=CLIP, beta=BETA, tau=s.tau, sigma_out=s.sigma_out)
    for eps in s.epsilons:
        sigma, lam = calibrate_amp(eps, s.delta, **amp)
        entry: dict[str, Any] = {
            "calibrated": {"sigma": sigma, "lam": lam},
            "gibo_budget": dataclasses.asdict(plan_amp_runs(eps, s.delta, num_runs=s.gibo_units, **amp)),
            "ps_budget": dataclasses.asdict(
                plan_amp_selection(eps, s.delta, mean_trials=s.mean_trials, distribution="poisson", **amp)
            ),
            "gibo_mu": gdp_mu(eps, s.delta),
            "ps_per_trial_mu": per_trial_mu_for_epsilon(
                target_epsilon=eps, target_delta=s.delta, mean_trials=s.mean_trials, distribution="poisson"
            ),
            "dpsgd": {},
        }
        for name in s.datasets:
            num_train = s.data(name, s.seeds[0]).sizes()["train"]  # the same for every seed
            training = TrainingConfig(epochs=s.epochs(name), batch_size=s.batch(name))
            _, rate, steps = planned_dp_run(num_train, training, DPSGDConfig(1.0, CLIP))
            noise = dp_sgd_noise_for_selection(
                eps, s.delta, sample_rate=rate, steps=steps, mean_trials=s.mean_trials, distribution="poisson"
            )
            entry["dpsgd"][name] = {"noise_multiplier": noise, "sample_rate": rate, "steps": steps}
        out["per_epsilon"][repr(float(eps))] = entry
    return out


class Runner:
    r"""Runs one method on one (data set, ε, seed): ``execute`` is the ``run_job`` of ``jobs.run_jobs``.

    Args:
        settings: The comparison's settings.
        plan: ``plan(settings)`` (public).
        noise_seed: Seed of all privacy noise (reproductions only; ``None``: OS entropy).
            It lives only in this object (and the worker processes it is sent to); it is
            never part of a job's arguments, a run store or a report.
    """

    def __init__(self, settings: Settings, plan: dict, noise_seed: int | None = None) -> None:
        self.settings = settings
        self.plan = plan
        self.noise_seed = noise_seed

    def execute(self, kind: str, kwargs: dict) -> Run:
        r"""``kind`` (a method of ``METHODS`` or ``"non_private"``) on ``kwargs``' data set, ε and seed."""
        settings = self.settings
        dataset, eps, seed = kwargs["dataset"], float(kwargs["epsilon"]), int(kwargs["seed"])
        entry = dict(self.plan["per_epsilon"][repr(eps)], dataset=dataset, epsilon=eps, seed=seed)
        entry["noise_seed"] = (
            None
            if self.noise_seed is None
            else child_seeds(
                [
                    int(self.noise_seed),
                    (METHODS + ("non_private",)).index(kind),
                    settings.datasets.index(dataset),
                    settings.epsilons.index(eps),
                    seed,
                ],
                1,
            )[0]
        )
        data = settings.data(dataset, seed)
        start = time.perf_counter()
        with torch_threads(1), warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # warned once by whoever set a noise seed
            warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
            out = METHOD_FUNCTIONS[kind](data, settings, entry)
        wall = time.perf_counter() - start
        return Run(
            experiment=dataset,
            method=kind,
            seed=seed,
            setting=eps,
            evals=[],
            losses=[],
            final_loss=1.0 - out["test_accuracy"],
            num_evaluations=out["training_runs"],
            wall_s=wall,
            epsilon=out["training_epsilon"],
            extra=out,
        )


def settings_from_plain(plain: dict) -> Settings:
    r"""``Settings`` from ``plain_settings``' dict (lists become tuples)."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()}
    for key in ("dpsgd_epochs", "dpsgd_batches"):
        values[key] = tuple(tuple(x) for x in plain[key])
    return Settings(**values)


def plain_settings(settings: Settings) -> dict:
    r"""``settings`` as a JSON-ready dict."""
    return {
        k: (list(map(list, v)) if k in ("dpsgd_epochs", "dpsgd_batches") else list(v) if isinstance(v, tuple) else v)
        for k, v in dataclasses.asdict(settings).items()
    }


# ============================================================================ the benchmark CLI's contract
#: Fields that only choose which jobs run (left out of the run store's header).
SELECTION_FIELDS = ("seeds", "methods")


def quick_settings() -> Settings:
    r"""``Settings.quick()``: one ε, one seed, small synthetic data."""
    return Settings.quick()


def prepare(settings: Settings) -> dict:
    r"""``plan(settings)``: every method's public privacy parameters (no data is looked at)."""
    return plan(settings)


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""One job per (data set, ε, seed, method); ``kind`` is the method."""
    jobs = []
    for dataset in settings.datasets:
        for eps in settings.epsilons:
            for seed in settings.seeds:
                for method in settings.methods:
                    jobs.append(
                        Job(
                            label=f"{dataset} ε={eps:g} seed={seed} {method}",
                            kind=method,
                            kwargs={"dataset": dataset, "epsilon": eps, "seed": seed},
                            cost=(10.0 if method == "ps_dpsgd" else 3.0) * (5.0 if dataset == "synthetic" else 1.0),
                        )
                    )
    return jobs


def make_runner(settings: Settings, context: dict) -> RunJob:
    r"""``Runner(settings, plan).execute`` with privacy noise from OS entropy (the CLI sets no noise seed)."""
    return Runner(settings, {k: v for k, v in context.items() if k in ("mean_trials", "per_epsilon")}).execute


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""``amp_tuning.md``, ``amp_tuning.png`` and ``amp_tuning_runs.json`` in ``out``."""
    from benchmarks.amp_report import make_plot, report_text

    plan_ = {k: v for k, v in context.items() if k in ("mean_trials", "per_epsilon")}
    wall = float(context.get("wall_s", math.nan))
    text = report_text(settings, plan_, runs, command, wall)
    (out / REPORT_MD).write_text(text)
    (out / RUNS_JSON).write_text(
        json.dumps(
            {
                "command": command,
                "wall_s": wall,
                "settings": plain_settings(settings),
                "plan": plan_,
                "runs": [dataclasses.asdict(r) for r in runs],
            },
            indent=1,
        )
    )
    make_plot(settings, runs, out / REPORT_PNG)
    return out / REPORT_MD
