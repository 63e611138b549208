r"""The arms of the ``dpsgd`` benchmark: a registry, so that adding a method is one entry.

``ARMS`` maps an arm's name to an ``Arm``: its kind (``"default"``: one untuned run; ``"private"``:
a tuning method of the library at the total ε on the training records; ``"reference"``: the
non-private random search, run once per seed), one sentence for the report, and its function
``run(settings, dataset, seed, epsilon) -> dict`` with the keys ``ARM_KEYS``:

- ``test_accuracy``, ``test_loss``: NON-PRIVATE diagnostics of the released model;
- ``sigma``: the noise multiplier of its DP-SGD runs (text when the runs differ);
- ``trainings``: the DP-SGD trainings on the private records (``E[K]`` for a hidden-K selection,
  whose realized ``K`` is the NON-PRIVATE diagnostic ``realized_trainings``);
- ``ledger_epsilon``: the objective's training ledger converted at δ (``None`` for a reference);
- ``hyperparameters``: the released ``lr`` and ``momentum``.

Every private arm trains on the same private records (``dpsgd_task.load_split``), spends the
same total ε on them (its ledger says so), and treats the validation split as public except
the composed DP-GIBO path, which protects it too (at the same ε: that is how ``tune`` runs it).

To add an arm (``tune(method="auto", ...)``, a selection charged by its privacy profile, ...):
write ``def my_arm(settings, dataset, seed, epsilon) -> dict`` and add
``ARMS["my arm"] = Arm("private", "what it does", my_arm)``; run the benchmark with
``--set arms=...`` listing it (the stored runs of the other arms are reused).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.dpsgd_task import (
    DEFAULTS,
    Settings,
    load_split,
    make_objective,
    search_space,
    test_metrics,
    training_config,
)
from botorch_dp.methods.training_runs import NonPrivateTrainingTrials, select_training_runs, uniform_sampler
from botorch_dp.training import DPSGDConfig
from botorch_dp.tuning import TorchModelTuningObjective

__all__ = ["ARMS", "ARM_KEYS", "CENTRE_ARM", "Arm", "composed_trainings"]

ARM_KEYS = ("test_accuracy", "test_loss", "sigma", "trainings", "ledger_epsilon", "hyperparameters")
ArmFunction = Callable[[Settings, str, int, float], dict[str, Any]]
#: The arm of the untuned run ``tune(method="auto")`` simulates (the centre of ``search_space``'s default ranges).
CENTRE_ARM = "untuned centre (auto's default)"


@dataclass(frozen=True)
class Arm:
    r"""One arm: ``kind`` (``"default"``, ``"private"`` or ``"reference"``), a description, its function."""

    kind: str
    description: str
    run: ArmFunction


def _ledger_epsilon(objective: Any, delta: float) -> float:
    ledger = objective.ledger
    assert ledger is not None  # a DP-SGD objective records every training run
    return float(ledger.training.epsilon(delta))


def _untuned(point: dict[str, float]) -> ArmFunction:
    def run(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
        data, _ = load_split(settings, dataset, seed)
        dp_sgd = DPSGDConfig(
            target_epsilon=epsilon,
            target_delta=settings.target_delta,
            planned_runs=1,
            max_grad_norm=settings.max_grad_norm,
        )
        objective = make_objective(settings, data, seed, dp_sgd)
        model = objective.train(objective.space.from_natural(point), label="untuned")
        return {
            **test_metrics(model, data),
            "sigma": objective.training_report(settings.target_delta)["noise_multiplier"],
            "trainings": 1,
            "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
            "hyperparameters": dict(point),
        }

    return run


def composed_trainings(settings: Settings) -> int:
    r"""The most trainings of ``tune(method="dp_gibo", protect="validation", num_iterations=T)`` on the
    two-dimensional space (``DPGIBOConfig.max_evaluations`` of ``tune``'s defaults)."""
    from botorch_dp.optim.config import DPGIBOConfig
    from botorch_dp.tuning.tune_call import TUNE_DEFAULTS

    space = search_space(settings)
    base = {**TUNE_DEFAULTS, "kernel": space.recommended_kernel(), "num_iterations": settings.gibo_iterations}
    config = DPGIBOConfig(bounds=space.bounds, privacy_mu=1.0, target_delta=settings.target_delta, **base)
    return int(config.max_evaluations)


def dp_gibo_composed(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
    r"""``tune(method="dp_gibo", protect="validation")`` with every training composed (the documented path),
    plus one final training at the released hyperparameters: the objective's DP-SGD target plans all of
    them, so every run's σ is calibrated for ``composed_trainings + 1`` runs at ε in total."""
    from botorch_dp import tune

    data, _ = load_split(settings, dataset, seed)
    runs = composed_trainings(settings) + 1
    dp_sgd = DPSGDConfig(
        target_epsilon=epsilon,
        target_delta=settings.target_delta,
        planned_runs=runs,
        max_grad_norm=settings.max_grad_norm,
    )
    objective = make_objective(settings, data, seed, dp_sgd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the composed cost is stated in the report
        result = tune(
            objective,
            objective.space,
            epsilon=epsilon,
            delta=settings.target_delta,
            method="dp_gibo",
            protect="validation",
            num_iterations=settings.gibo_iterations,
            progress=False,
        )
    point = objective.space.from_natural(result.hyperparameters)
    model = objective.train(point, label="final")
    report = objective.training_report(settings.target_delta)
    return {
        **test_metrics(model, data),
        "sigma": report["noise_multiplier"],
        "trainings": report["num_runs"],
        "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
        "hyperparameters": dict(result.hyperparameters),
        "planned_runs": runs,
        "validation_epsilon": float(result.guarantee.epsilon),
    }


def _selection(
    distribution: str, tnb_eta: float = 1.0, accounting: str = "rdp", rounds_per_trial: float | None = None
) -> ArmFunction:
    r"""``select_training_runs`` with ``K`` from ``distribution``; a binomial ``K`` has
    ``binomial_rounds = round(rounds_per_trial * E[K])`` public rounds."""

    def run(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
        data, _ = load_split(settings, dataset, seed)
        objective = make_objective(settings, data, seed)
        result = select_training_runs(
            objective,
            epsilon=epsilon,
            delta=settings.target_delta,
            mean_trials=settings.mean_trials,
            protect="training",
            distribution=distribution,
            tnb_eta=tnb_eta,
            binomial_rounds=None if rounds_per_trial is None else round(rounds_per_trial * settings.mean_trials),
            score="error",
            accounting=accounting,
            non_private_trials=True,  # a measurement: the realized K (NON-PRIVATE)
        )
        assert isinstance(result, NonPrivateTrainingTrials)
        metrics = (
            test_metrics(result.model, data)
            if result.model is not None
            else {"test_accuracy": math.nan, "test_loss": math.nan}  # K = 0 (Poisson): nothing released
        )
        return {
            **metrics,
            "sigma": float(result.guarantee["training"].details["noise_multiplier"]),
            "trainings": settings.mean_trials,
            "realized_trainings": int(result.num_trials),
            "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
            "hyperparameters": result.hyperparameters,
        }

    return run


def proxy_then_train(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
    r"""``tune_on_proxy_then_train``: the three documented defaults (``DEFAULTS``) and ``configurations``
    random points searched on the public slice (the library's search: each trained 3 times, the 3 best
    again with fresh noise), then one DP-SGD training at the whole ε on the private records. Before
    2026-11-29 17:00 UTC this arm trained each of the random points once (no defaults)."""
    from botorch_dp.methods.cheap_tuning import tune_on_proxy_then_train

    data, proxy = load_split(settings, dataset, seed)
    objective = make_objective(settings, data, seed)
    result = tune_on_proxy_then_train(
        objective,
        None,
        proxy,
        epsilon=epsilon,
        delta=settings.target_delta,
        tuner=settings.configurations,
        seed=seed,
        defaults=list(DEFAULTS.values()),
    )
    search = result.settings["search"]
    return {
        **test_metrics(result.model, data),
        "sigma": float(result.settings["final_noise_multiplier"]),
        "trainings": 1,
        "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
        "hyperparameters": result.hyperparameters,
        "public_trainings": search["proxy_trainings"],
        "proxy_search": search,
    }


def subsample_then_train(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
    r"""``tune_on_subsample``: ``configurations`` trials on one Poisson subset of the private records
    (the library's default γ and τ, no proxy: the τ simulation on the public slice costs about four
    times the arm's own trainings), then one final training."""
    from botorch_dp.methods.cheap_tuning import tune_on_subsample

    data, _ = load_split(settings, dataset, seed)
    objective = make_objective(settings, data, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_on_subsample(
            objective, epsilon=epsilon, delta=settings.target_delta, tuner=settings.configurations, seed=seed
        )
    plan = result.settings["plan"]
    return {
        **test_metrics(result.model, data),
        "sigma": f"{plan.trial_noise_multiplier:.3g} (trials) / {plan.final_noise_multiplier:.3g} (final)",
        "trainings": settings.configurations + 1,
        "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
        "hyperparameters": result.hyperparameters,
        "split": result.split,
    }


def _auto_trainings(settings: Settings, method: str) -> float:
    r"""The private trainings of the method ``tune(method="auto")`` chose, at the arms' settings."""
    return {
        "training_selection": settings.mean_trials,
        "subsample_tuning": settings.configurations + 1,
        "proxy_then_train": 1,
        "untuned": 1,
    }[method]


def tune_auto(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
    r"""``tune(method="auto", protect="training", proxy=public slice)``: the library's choice among the
    training methods, simulated on the public slice (3 paired repeats, ``tune``'s default), then the
    chosen method's private run. The candidates run at the arms' settings (``E[K] = mean_trials``,
    ``configurations`` for the cheap methods), so the choice is among the methods the other arms
    measure; before 2026-11-29 14:00 UTC this arm ran at ``tune``'s defaults (``E[K] = 4``, 8
    configurations; ``reports/dpsgd.md``'s auto numbers)."""
    from botorch_dp import tune

    data, proxy = load_split(settings, dataset, seed)
    objective = make_objective(settings, data, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the advice is recorded below
        result = tune(
            objective,
            objective.space,
            epsilon=epsilon,
            delta=settings.target_delta,
            proxy=proxy,
            protect="training",
            progress=False,
            mean_trials=settings.mean_trials,
            plan_options=dict(num_configurations=settings.configurations),
        )
    return {
        **test_metrics(result.model, data),
        "sigma": f"that of {result.method}",
        "trainings": _auto_trainings(settings, result.method),
        "ledger_epsilon": _ledger_epsilon(objective, settings.target_delta),
        "hyperparameters": dict(result.hyperparameters),
        "chosen_method": result.method,
        "advice": result.advice,
    }


def random_search(settings: Settings, dataset: str, seed: int, epsilon: float) -> dict[str, Any]:
    r"""NON-PRIVATE: ``round(E[K])`` plain SGD trainings at uniform (log-uniform lr) points from the seed,
    the lowest plain validation error wins (``epsilon`` is ignored)."""
    data, _ = load_split(settings, dataset, seed)
    objective = TorchModelTuningObjective(data, search_space(settings), training=training_config(settings, data, seed))
    sampler = uniform_sampler(objective.space)
    generator = torch.Generator().manual_seed(seed)
    best: tuple[float, dict[str, Any], Any] | None = None
    trainings = int(round(settings.mean_trials))
    for _ in range(trainings):
        point = dict(sampler(generator))
        model = objective.train(objective.space.from_natural(point))
        error = float(objective.per_user_scores(model, "error").mean())
        if best is None or error < best[0]:
            best = (error, point, model)
    assert best is not None
    return {
        **test_metrics(best[2], data),
        "sigma": 0.0,
        "trainings": trainings,
        "ledger_epsilon": None,
        "hyperparameters": best[1],
    }


#: name → ``Arm``; ``Settings.arms`` chooses which run (see the module docstring to add one).
ARMS: dict[str, Arm] = {
    **{
        name: Arm("default", f"one untuned DP-SGD run at lr {p['lr']:g}, momentum {p['momentum']:g}", _untuned(p))
        for name, p in DEFAULTS.items()
    },
    # the untuned run tune(method="auto") simulates and may run (the centre of the space); not a default arm of a
    # full run (dpsgd_task.DEFAULT_ARMS), it measures auto's untuned choice (scripts/dpsgd_arm_redraws.py)
    CENTRE_ARM: Arm(
        "default",
        "one untuned DP-SGD run at the centre of the space (lr 0.141, momentum 0.475), tune(method='auto')'s untuned",
        _untuned({"lr": math.sqrt(0.01 * 2.0), "momentum": 0.475}),
    ),
    "dp_gibo composed": Arm(
        "private",
        "tune(method='dp_gibo', protect='validation'): every DP-GIBO training charged on its own and composed "
        "(validation users protected too), plus one final training",
        dp_gibo_composed,
    ),
    "PS-RDP geometric (anchor)": Arm(
        "private",
        "select_training_runs: Papernot–Steinke, K geometric (truncated negative binomial, η = 1), RDP accounting",
        _selection("tnb", 1.0),
    ),
    "PS-RDP poisson": Arm("private", "select_training_runs with K Poisson (P&S Thm. 6), RDP", _selection("poisson")),
    "PS-profile geometric": Arm(
        "private",
        "select_training_runs with K geometric charged at its privacy profile (accounting='profile')",
        _selection("tnb", 1.0, "profile"),
    ),
    "PS-profile binomial m=2E[K]": Arm(
        "private",
        "select_training_runs with K binomial over m = 2 E[K] public rounds (Koskela, Redberg & Wang), charged "
        "at its privacy profile (accounting='profile')",
        _selection("binomial", accounting="profile", rounds_per_trial=2.0),
    ),
    "tune auto (proxy)": Arm(
        "private",
        "tune(method='auto', protect='training', proxy=the public slice): the method chosen on the proxy, then run",
        tune_auto,
    ),
    "PS-RDP tnb eta=0.5": Arm(
        "private", "select_training_runs with K truncated negative binomial, η = 0.5, RDP", _selection("tnb", 0.5)
    ),
    "proxy then train": Arm(
        "private",
        "tune_on_proxy_then_train: the three defaults and random configurations searched on the public slice "
        "(3 trainings each, the 3 best again with fresh noise), one final training at ε",
        proxy_then_train,
    ),
    "subsample then train": Arm(
        "private",
        "tune_on_subsample: trials on one Poisson subset (the library's default γ and τ), one final training",
        subsample_then_train,
    ),
    "random search (non-private)": Arm(
        "reference", "NON-PRIVATE random search, E[K] plain SGD trainings, plain validation error", random_search
    ),
}
