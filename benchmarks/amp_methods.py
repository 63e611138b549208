r"""The four methods of the AMP tuning comparison (``amp``) and its non-private reference, one function each.

Each takes the data, the settings and the job's public plan entry (with its noise seed) and
returns the row's test accuracy (NON-PRIVATE diagnostic) and what it spent.
"""

from __future__ import annotations

import math

import torch

from benchmarks.amp_task import CLIP, NON_PRIVATE_LAMBDAS, Settings
from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.baselines import private_random_search
from botorch_dp.baselines.selection import non_private_baseline_result
from botorch_dp.objectives.charged import amp_training_event
from botorch_dp.privacy.analysis.private_selection import private_selection_rdp_curve
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger, TrainingMechanism
from botorch_dp.problems.logistic_regression import AMPTuningObjective, DPSGDTuningObjective
from botorch_dp.problems.run_budgets import AMPRunBudget, dp_sgd_curve
from botorch_dp.training.dp_sgd import DPSGDConfig, TrainingConfig
from botorch_dp.training.objective_perturbation import AMPConfig, fit_amp
from botorch_dp.utils import child_seeds


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


def _amp_calibrated(data, s: Settings, entry) -> dict:
    cal = entry["calibrated"]
    config = AMPConfig(lam=cal["lam"], sigma=cal["sigma"], clip=CLIP, tau=s.tau, sigma_out=s.sigma_out, max_iter=2000)
    ledger = PrivacyLedger()  # the row's own ledger: the run is charged before it trains, recorded at its draw
    with ledger.charge_training({"amp-calibrated": amp_training_event(config, data.num_features + 1)}) as meter:
        result = fit_amp(
            data.X_train, data.y_train, config, generator=entry["noise_seed"], meter=meter, run_id="amp-calibrated"
        )
    return {
        "test_accuracy": float((result.predict(data.X_test) == data.y_test).double().mean()),
        "training_epsilon": ledger.training.epsilon(s.delta),
        "training_runs": 1,
        "validation_mu": 0.0,
        "validation_epsilon": 0.0,
        "lam": cal["lam"],
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
    objective = AMPTuningObjective(
        data, budget, lam_range=lam_range(budget, s), ledger=ledger, noise_seed=amp_seed, loss_cap=s.loss_cap
    )
    theta0 = objective.space.from_natural({"lam": budget.lam})  # start at the budget's reference λ
    config = DPGIBOConfig(
        bounds=objective.bounds,
        kernel=objective.recommended_kernel(s.gibo_lengthscale, s.gibo_outputscale),
        num_iterations=s.gibo_iterations,
        privacy_mu=mu,
        clip_bound=s.gibo_clip,
        step_size=s.gibo_step,
        step_rule="adagrad",
        batch_size=s.gibo_batch,
        search_radius=s.gibo_radius,
        noise_variance=s.gibo_noise_variance,
        theta0=theta0,
        target_delta=s.delta,
        raw_samples=s.gibo_raw_samples,
        num_restarts=s.gibo_restarts,
        seed=gibo_seed,
    )
    release = DPGIBO(config, ledger=ledger).run(objective, progress=False).release
    final = objective.train(release.theta, label="final", budget_weight=s.gibo_final_weight)
    runs = len(objective.results)
    if runs != s.gibo_runs:
        raise RuntimeError(f"DP-GIBO trained {runs} models, planned {s.gibo_runs}.")
    return {
        "test_accuracy": objective.accuracy_non_private(final),
        "training_epsilon": budget.epsilon(s.delta, s.gibo_units),
        "training_epsilon_ledger": ledger.training.epsilon(s.delta),
        "training_runs": runs,
        "validation_mu": ledger.validation.mu(),
        "validation_epsilon": ledger.validation.epsilon(s.delta),
        "lam": final.config.lam,
    }


def _selection(objective, s: Settings, per_trial_mu: float, noise_seed, fallback) -> tuple[int | None, object, dict]:
    r"""``private_random_search`` over ``objective``: (index of the winning trial or None
    when K = 0, its validation guarantee, the released hyperparameters)."""
    result = non_private_baseline_result(
        private_random_search(
            objective,
            objective.bounds,
            mean_trials=s.mean_trials,
            per_trial_mu=per_trial_mu,
            loss_clip=s.loss_cap,
            distribution="poisson",
            target_delta=s.delta,
            fallback=fallback,
            seed=noise_seed,
            non_private_trials=True,  # a measurement: K and every trial (NON-PRIVATE)
        )
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
    objective = AMPTuningObjective(
        data, budget, lam_range=lam_range(budget, s), ledger=PrivacyLedger(), noise_seed=amp_seed, loss_cap=s.loss_cap
    )
    winner, guarantee, params = _selection(objective, s, entry["ps_per_trial_mu"], select_seed, None)
    row = _selection_row(
        data,
        s,
        budget.rdp,
        "ps-amp",
        f"P&S over AMP trials: {budget.description}",
        guarantee,
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
        "test_accuracy": accuracy,
        "training_epsilon": ledger.training.epsilon(s.delta),
        "training_runs": s.mean_trials,
        "validation_mu": None,
        "validation_epsilon": guarantee.epsilon,
    }


def _ps_dpsgd(data, s: Settings, entry) -> dict:
    dp = entry["dpsgd"][entry["dataset"]]
    sgd_seed, select_seed = _children(entry["noise_seed"])
    training = TrainingConfig(
        epochs=s.epochs(entry["dataset"]), batch_size=s.batch(entry["dataset"]), seed=entry["seed"], num_threads=None
    )
    objective = DPSGDTuningObjective(
        data,
        lr_range=(s.dpsgd_lr_lower, s.dpsgd_lr_upper),
        training=training,
        dp_sgd=DPSGDConfig(dp["noise_multiplier"], CLIP),
        ledger=PrivacyLedger(),
        noise_seed=sgd_seed,
        loss_cap=s.loss_cap,
    )
    winner, guarantee, params = _selection(objective, s, entry["ps_per_trial_mu"], select_seed, None)
    planned = (
        (objective.runs[0].noise_multiplier, objective.runs[0].sample_rate, objective.runs[0].steps)
        if objective.runs
        else None
    )
    if planned is not None and planned[1:] != (dp["sample_rate"], dp["steps"]):
        raise RuntimeError(f"DP-SGD ran {planned}, planned {dp}.")
    base = dp_sgd_curve(noise_multiplier=dp["noise_multiplier"], sample_rate=dp["sample_rate"], steps=dp["steps"])
    row = _selection_row(
        data,
        s,
        base,
        "ps-dpsgd",
        f"P&S over DP-SGD trials (noise multiplier {dp['noise_multiplier']:.6g}, q = "
        f"{dp['sample_rate']:.6g}, {dp['steps']} steps), Poisson E[K] = {s.mean_trials:.6g}",
        guarantee,
        None if winner is None else lambda: objective.accuracy_non_private(objective.models[winner]),
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
        "tuned_test_accuracy": score(models[best], data.X_test, data.y_test),
        "tuned_lam": best,
        "training_epsilon": math.inf,
        "training_runs": len(NON_PRIVATE_LAMBDAS),
        "validation_mu": None,
        "validation_epsilon": None,
        "lam": 1.0,
    }


METHOD_FUNCTIONS = {
    "amp_calibrated": _amp_calibrated,
    "dp_gibo": _dp_gibo,
    "ps_amp": _ps_amp,
    "ps_dpsgd": _ps_dpsgd,
    "non_private": _non_private,
}
