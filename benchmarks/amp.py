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

import torch

from benchmarks.amp_task import (  # noqa: F401 - re-exported
    BETA,
    CLIP,
    LABELS,
    METHODS,
    NON_PRIVATE_LAMBDAS,
    REPORT_MD,
    REPORT_PNG,
    RUNS_JSON,
    Settings,
)
from benchmarks.jobs import Job, RunJob
from benchmarks.runs import Run
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import private_random_search
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.objective_perturbation import calibrate_amp
from botorch_dp.privacy.analysis.private_selection import (
    per_trial_mu_for_epsilon,
    private_selection_rdp_curve,
)
from botorch_dp.privacy.ledger import (
    TRAINING_RDP_ORDERS,
    PrivacyLedger,
    TrainingMechanism,
)
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems.logistic_regression import (
    AMPTuningObjective,
    DPSGDTuningObjective,
)
from botorch_dp.problems.run_budgets import (
    AMPRunBudget,
    dp_sgd_curve,
    dp_sgd_noise_for_selection,
    plan_amp_runs,
    plan_amp_selection,
)
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig, planned_dp_run
from botorch_dp.training.objective_perturbation import AMPConfig, fit_amp
from botorch_dp.tuning.charged import amp_training_event
from botorch_dp.utils import child_seeds, torch_threads

__all__ = [
    "LABELS", "METHODS", "SELECTION_FIELDS", "Runner", "Settings", "experiment_jobs", "lam_range", "make_runner",
    "plain_settings", "plan", "prepare", "quick_settings", "settings_from_plain", "write_report",
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
            "ps_budget": dataclasses.asdict(plan_amp_selection(eps, s.delta, mean_trials=s.mean_trials,
                                                               distribution="poisson", **amp)),
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
            noise = dp_sgd_noise_for_selection(eps, s.delta, sample_rate=rate, steps=steps,
                                               mean_trials=s.mean_trials, distribution="poisson")
            entry["dpsgd"][name] = {"noise_multiplier": noise, "sample_rate": rate, "steps": steps}
        out["per_epsilon"][repr(float(eps))] = entry
    return out


def lam_range(budget: AMPRunBudget, settings: Settings) -> tuple[float, float]:
    r"""The public λ box of a tuning method: ``[max(lo·λ_ref, 1.25·λ_min), hi·λ_ref]``."""
    return max(settings.lam_lower * budget.lam, 1.25 * budget.min_lam()), settings.lam_upper * budget.lam


# ============================================================================ methods
def _children(seed: int | None) -> tuple[int | None, int | None]:
    r"""Two independent noise streams of a job's noise seed (both ``None``: OS entropy)."""
    if seed is None:
        return None, None
    first, second = child_seeds(seed, 2)
    return first, second


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
        entry["noise_seed"] = None if self.noise_seed is None else child_seeds(
            [int(self.noise_seed), (METHODS + ("non_private",)).index(kind), settings.datasets.index(dataset),
             settings.epsilons.index(eps), seed], 1)[0]
        data = settings.data(dataset, seed)
        start = time.perf_counter()
        with torch_threads(1), warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # warned once by whoever set a noise seed
            warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
            out = METHOD_FUNCTIONS[kind](data, settings, entry)
        wall = time.perf_counter() - start
        return Run(
            experiment=dataset, method=kind, seed=seed, setting=eps, evals=[], losses=[],
            final_loss=1.0 - out["test_accuracy"], num_evaluations=out["training_runs"], wall_s=wall,
            epsilon=out["training_epsilon"], extra=out,
        )


def _amp_calibrated(data, s: Settings, entry) -> dict:
    cal = entry["calibrated"]
    config = AMPConfig(lam=cal["lam"], sigma=cal["sigma"], clip=CLIP, tau=s.tau, sigma_out=s.sigma_out,
                       max_iter=2000)
    ledger = PrivacyLedger()  # the row's own ledger: the run is charged before it trains, recorded at its draw
    with ledger.charge_training({"amp-calibrated": amp_training_event(config, data.num_features + 1)}) as meter:
        result = fit_amp(data.X_train, data.y_train, config, generator=entry["noise_seed"], meter=meter,
                         run_id="amp-calibrated")
    return {
        "test_accuracy": float((result.predict(data.X_test) == data.y_test).double().mean()),
        "training_epsilon": ledger.training_epsilon(s.delta), "training_runs": 1,
        "validation_mu": 0.0, "validation_epsilon": 0.0, "lam": cal["lam"],
    }


def _dp_gibo(data, s: Settings, entry) -> dict:
    budget = AMPRunBudget(**entry["gibo_budget"])
    mu = entry["gibo_mu"]
    # Validation: the ledger's GDP filter holds DP-GIBO to μ. Training: the runs are fixed
    # in advance (T·b evaluations below the reference curve r, the final model below w·r,
    # at whatever λ DP-GIBO picks), so their adaptive composition is at most (T·b + w)·r at
    # every order, and its grid conversion (the plan: ε) is the guarantee. The ledger also sums the runs'
    # exact curves (reported beside it; a conversion of adaptively chosen curves).
    ledger = PrivacyLedger(validation_mu_budget=mu, training_delta=s.delta)
    amp_seed, gibo_seed = _children(entry["noise_seed"])
    objective = AMPTuningObjective(data, budget, lam_range=lam_range(budget, s), ledger=ledger,
                                   noise_seed=amp_seed, loss_cap=s.loss_cap)
    theta0 = objective.space.from_natural({"lam": budget.lam})  # start at the budget's reference λ
    config = DPGIBOConfig(
        bounds=objective.bounds, kernel=objective.recommended_kernel(s.gibo_lengthscale, s.gibo_outputscale),
        num_iterations=s.gibo_iterations, privacy_mu=mu, clip_bound=s.gibo_clip, step_size=s.gibo_step,
        step_rule="adagrad", batch_size=s.gibo_batch, search_radius=s.gibo_radius,
        noise_variance=s.gibo_noise_variance, theta0=theta0, target_delta=s.delta,
        raw_samples=s.gibo_raw_samples, num_restarts=s.gibo_restarts, seed=gibo_seed,
    )
    release = DPGIBO(config, ledger=ledger).run(objective, progress=False).release
    final = objective.train(release.theta, label="final", budget_weight=s.gibo_final_weight)
    runs = len(objective.results)
    if runs != s.gibo_runs:
        raise RuntimeError(f"DP-GIBO trained {runs} models, planned {s.gibo_runs}.")
    return {
        "test_accuracy": objective.accuracy_non_private(final),
        "training_epsilon": budget.epsilon(s.delta, s.gibo_units),
        "training_epsilon_ledger": ledger.training_epsilon(s.delta),
        "training_runs": runs,
        "validation_mu": ledger.validation_mu(), "validation_epsilon": ledger.validation_epsilon(s.delta),
        "lam": final.config.lam,
    }


def _selection(objective, s: Settings, per_trial_mu: float, noise_seed, fallback) -> tuple[int | None, object, dict]:
    r"""``private_random_search`` over ``objective``: (index of the winning trial or None
    when K = 0, its validation guarantee, the released hyperparameters)."""
    result = private_random_search(
        objective, objective.bounds, mean_trials=s.mean_trials, per_trial_mu=per_trial_mu, loss_clip=s.loss_cap,
        distribution="poisson", target_delta=s.delta, fallback=fallback, seed=noise_seed,
    )
    if result.num_evaluations == 0:
        return None, result.guarantee, {}
    points = result.history.points  # NON-PUBLIC: only used to find the winner's own model
    winner = max(j for j in range(points.shape[0]) if torch.equal(points[j], result.theta))
    return winner, result.guarantee, objective.space.to_natural(result.theta)


def _ps_amp(data, s: Settings, entry) -> dict:
    budget = AMPRunBudget(**entry["ps_budget"])
    amp_seed, select_seed = _children(entry["noise_seed"])
    # The trials go to a scratch ledger: K must stay hidden, and what the training data pay
    # is the P&S bound over the reference curve, recorded below as one mechanism.
    objective = AMPTuningObjective(data, budget, lam_range=lam_range(budget, s), ledger=PrivacyLedger(),
                                   noise_seed=amp_seed, loss_cap=s.loss_cap)
    winner, guarantee, params = _selection(objective, s, entry["ps_per_trial_mu"], select_seed, None)
    row = _selection_row(
        data, s, budget.rdp, "ps-amp", f"P&S over AMP trials: {budget.description}", guarantee,
        None if winner is None else lambda: objective.accuracy_non_private(objective.results[winner]),
    )
    return {**row, "lam": params.get("lam")}


def _selection_row(data, s: Settings, base_rdp, run_id: str, description: str, guarantee, winner_accuracy) -> dict:
    r"""What a Papernot–Steinke selection spent and reached: the P&S curve over ``base_rdp``
    recorded in a fresh ledger (the trials themselves went to a scratch ledger, K stays
    hidden), and the winner's test accuracy (``winner_accuracy`` None: K = 0, probability
    e^-m, and the data-independent θ = 0, class 0, is released)."""
    curve = private_selection_rdp_curve(base_rdp, mean_trials=s.mean_trials, distribution="poisson")
    ledger = PrivacyLedger()
    mechanism = TrainingMechanism(description, tuple(curve(a) for a in TRAINING_RDP_ORDERS))
    with ledger.charge_training({run_id: mechanism}) as meter:
        meter.record(run_id)  # the selection was made above (a report of what it spent)
    accuracy = float((data.y_test == 0).double().mean()) if winner_accuracy is None else winner_accuracy()
    return {
        "test_accuracy": accuracy, "training_epsilon": ledger.training_epsilon(s.delta),
        "training_runs": s.mean_trials, "validation_mu": None, "validation_epsilon": guarantee.epsilon,
    }


def _ps_dpsgd(data, s: Settings, entry) -> dict:
    dp = entry["dpsgd"][entry["dataset"]]
    sgd_seed, select_seed = _children(entry["noise_seed"])
    training = TrainingConfig(epochs=s.epochs(entry["dataset"]), batch_size=s.batch(entry["dataset"]),
                              seed=entry["seed"], num_threads=None)
    objective = DPSGDTuningObjective(
        data, lr_range=(s.dpsgd_lr_lower, s.dpsgd_lr_upper), training=training,
        dp_sgd=DPSGDConfig(dp["noise_multiplier"], CLIP), ledger=PrivacyLedger(), noise_seed=sgd_seed,
        loss_cap=s.loss_cap,
    )
    winner, guarantee, params = _selection(objective, s, entry["ps_per_trial_mu"], select_seed, None)
    planned = (objective.runs[0].noise_multiplier, objective.runs[0].sample_rate, objective.runs[0].steps) \
        if objective.runs else None
    if planned is not None and planned[1:] != (dp["sample_rate"], dp["steps"]):
        raise RuntimeError(f"DP-SGD ran {planned}, planned {dp}.")
    base = dp_sgd_curve(noise_multiplier=dp["noise_multiplier"], sample_rate=dp["sample_rate"], steps=dp["steps"])
    row = _selection_row(
        data, s, base, "ps-dpsgd",
        f"P&S over DP-SGD trials (noise multiplier {dp['noise_multiplier']:.6g}, q = "
        f"{dp['sample_rate']:.6g}, {dp['steps']} steps), Poisson E[K] = {s.mean_trials:.6g}",
        guarantee, None if winner is None else lambda: objective.accuracy_non_private(objective.models[winner]),
    )
    return {**row, "lr": params.get("lr")}


def _non_private(data, s: Settings, entry) -> dict:
    r"""NON-PRIVATE references: logistic regression at λ = 1 (sum objective, bias not
    regularised: scikit-learn's C = 1) and at the λ of a log grid that is best on the
    validation accuracy (the ceiling the private methods chase)."""
    from sklearn.linear_model import LogisticRegression

    def fit(lam: float):
        return LogisticRegression(C=1.0 / lam, max_iter=5000).fit(data.X_train.numpy(), data.y_train.numpy())

    score = lambda model, X, y: float(model.score(X.numpy(), y.numpy()))
    models = {lam: fit(lam) for lam in NON_PRIVATE_LAMBDAS}
    best = max(NON_PRIVATE_LAMBDAS, key=lambda lam: (score(models[lam], data.X_val, data.y_val), lam))
    return {
        "test_accuracy": score(models[1.0], data.X_test, data.y_test),
        "tuned_test_accuracy": score(models[best], data.X_test, data.y_test), "tuned_lam": best,
        "training_epsilon": math.inf, "training_runs": len(NON_PRIVATE_LAMBDAS), "validation_mu": None,
        "validation_epsilon": None, "lam": 1.0,
    }




METHOD_FUNCTIONS = {"amp_calibrated": _amp_calibrated, "dp_gibo": _dp_gibo, "ps_amp": _ps_amp,
                    "ps_dpsgd": _ps_dpsgd, "non_private": _non_private}


def settings_from_plain(plain: dict) -> Settings:
    r"""``Settings`` from ``plain_settings``' dict (lists become tuples)."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()}
    for key in ("dpsgd_epochs", "dpsgd_batches"):
        values[key] = tuple(tuple(x) for x in plain[key])
    return Settings(**values)


def plain_settings(settings: Settings) -> dict:
    r"""``settings`` as a JSON-ready dict."""
    return {k: (list(map(list, v)) if k in ("dpsgd_epochs", "dpsgd_batches")
                else list(v) if isinstance(v, tuple) else v)
            for k, v in dataclasses.asdict(settings).items()}


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
                    jobs.append(Job(
                        label=f"{dataset} ε={eps:g} seed={seed} {method}", kind=method,
                        kwargs={"dataset": dataset, "epsilon": eps, "seed": seed},
                        cost=(10.0 if method == "ps_dpsgd" else 3.0) * (5.0 if dataset == "synthetic" else 1.0),
                    ))
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
    (out / RUNS_JSON).write_text(json.dumps(
        {"command": command, "wall_s": wall, "settings": plain_settings(settings), "plan": plan_,
         "runs": [dataclasses.asdict(r) for r in runs]}, indent=1))
    make_plot(settings, runs, out / REPORT_PNG)
    return out / REPORT_MD
