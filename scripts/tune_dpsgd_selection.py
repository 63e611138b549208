r"""Tune a DP-SGD-trained MLP with its training data protected: private selection over whole runs.

The task of issue 41: scikit-learn digits, a 64-64-10 MLP trained with Opacus DP-SGD (Poisson
rate q = 0.0625, clip 1, 15 epochs), a total (ε, δ) = (3, 1e-5) on the TRAINING records. Arms,
each at that same total ε on the training records:

* ``untuned``: one DP-SGD run at lr 0.1, momentum 0.9, its noise multiplier calibrated by
  Opacus for one run at (3, 1e-5);
* ``selection``: ``select_training_runs`` (Papernot & Steinke, K ~ geometric with E[K] = 10,
  hidden), lr in [0.01, 1] (log) and momentum in [0, 0.95] drawn uniformly, every trial at the
  noise multiplier that makes the whole selection (3, 1e-5); the validation users are public
  (``protect="training"``, score: plain validation error);
* ``selection_both``: the same with the validation users protected too (``protect="both"``,
  each score a Gaussian of the clipped validation error, (3, 1e-5) on the validation users).

Printed per seed: each arm's TEST accuracy (a NON-PRIVATE diagnostic of the released model, for
this comparison only) and the noise multiplier of its runs. Seeds (``--seeds``) fix the data
split and the model initialisation; the privacy noise, the trial points and K come from OS
entropy (nothing here is reproducible bit for bit).

Examples::

    python scripts/tune_dpsgd_selection.py                  # the pilot: 3 seeds
    python scripts/tune_dpsgd_selection.py --quick          # a smoke run (1 seed, 1 epoch, E[K] = 2)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any

import torch

from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective, load_sklearn_classification

SPACE = SearchSpace([Hyperparameter("lr", 0.01, 1.0, log_scale=True), Hyperparameter("momentum", 0.0, 0.95)])
DEFAULT = {"lr": 0.1, "momentum": 0.9}


def test_accuracy(model: torch.nn.Module, data) -> float:
    r"""NON-PRIVATE: the accuracy of ``model`` on the test split."""
    with torch.no_grad():
        return float((model(data.X_test.to(torch.float32)).argmax(-1) == data.y_test).double().mean())


def one_seed(seed: int, *, epsilon: float, delta: float, mean_trials: float, epochs: int) -> dict:
    data = load_sklearn_classification("digits", seed=seed)
    m = len(data.y_train)
    batch_size = math.ceil(m / 16)  # Opacus's Poisson rate 1/⌈m/b⌉ = 1/16 = 0.0625
    training = TrainingConfig(epochs=epochs, batch_size=batch_size, hidden_sizes=(64,), seed=seed)
    row: dict[str, Any] = {"seed": seed}
    untuned = TorchModelTuningObjective(
        data,
        SPACE,
        training=training,
        dp_sgd=DPSGDConfig(target_epsilon=epsilon, target_delta=delta, planned_runs=1, max_grad_norm=1.0),
    )
    model = untuned.train(untuned.space.from_natural(DEFAULT), label="untuned")
    row["untuned"] = test_accuracy(model, data)
    row["untuned_sigma"] = untuned.training_report(delta)["noise_multiplier"]
    row["untuned_epsilon"] = untuned.training_report(delta)["epsilon"]
    for arm, protect in (("selection", "training"), ("selection_both", "both")):
        objective = TorchModelTuningObjective(
            data, SPACE, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0)
        )
        result = select_training_runs(
            objective, epsilon=epsilon, delta=delta, mean_trials=mean_trials, protect=protect, score="error"
        )
        row[arm] = test_accuracy(result.model, data) if result.model is not None else None
        row[f"{arm}_sigma"] = result.guarantee["training"].details["noise_multiplier"]
        row[f"{arm}_epsilon"] = {k: v[0] for k, v in result.guarantees.items() if v is not None}
        row[f"{arm}_hyperparameters"] = result.hyperparameters
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epsilon", type=float, default=3.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--mean-trials", type=float, default=10.0)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="1 seed, 1 epoch, E[K] = 2 (a smoke run)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs, args.mean_trials = args.seeds[:1], 1, 2.0
    start = time.time()
    rows = [
        one_seed(s, epsilon=args.epsilon, delta=args.delta, mean_trials=args.mean_trials, epochs=args.epochs)
        for s in args.seeds
    ]
    print(
        f"digits, 64-64-10 MLP, DP-SGD q = 0.0625, clip 1, {args.epochs} epochs, total (ε, δ) = "
        f"({args.epsilon:g}, {args.delta:g}) on the training records, E[K] = {args.mean_trials:g}"
    )
    print("seed | untuned (σ) | selection, training protected (σ) | selection, both protected (σ)")
    for r in rows:
        print(
            f"{r['seed']:4d} | {r['untuned']:.3f} ({r['untuned_sigma']:.2f}) | {r['selection']:.3f} "
            f"({r['selection_sigma']:.2f}) {r['selection_hyperparameters']} | {r['selection_both']:.3f} "
            f"({r['selection_both_sigma']:.2f}) {r['selection_both_hyperparameters']}"
        )
    summary = {}
    for arm in ("untuned", "selection", "selection_both"):
        values = [r[arm] for r in rows if r[arm] is not None]
        spread = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
        summary[arm] = (statistics.fmean(values), spread)
        print(f"{arm}: mean test accuracy {summary[arm][0]:.3f} ± {summary[arm][1]:.3f} (standard error)")
    print(f"wall time {time.time() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "summary": summary, "args": vars(args)}, f, indent=2, default=str)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
