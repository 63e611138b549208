r"""Pilot: cheap tuning of a DP-SGD-trained MLP on sklearn digits (issue 41, item 2).

Arms, each at a total (ε, δ) = (3, 1e-5) on the private training records, over paired seeds:
``subsample`` (``tune_on_subsample``: 8 configurations on one Poisson subset, the default γ and τ),
``proxy`` (``tune_on_proxy_then_train`` on a public 30% slice of the training split) and ``untuned``
(one DP-SGD run at lr 0.1, momentum 0.9 at the whole ε). The model is a 64-64-10 MLP, Opacus DP-SGD,
15 epochs at sampling rate q = 0.0625 (16 batches per epoch), clip 1; lr and momentum are tuned.
The public slice is removed from the private training data in every arm.

    python scripts/tune_dpsgd_cheap.py --seeds 3 --out reports/dpsgd-cheap-pilot.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import time
import warnings

import numpy as np
import torch

from botorch_dp.methods.cheap_plan import final_only_noise
from botorch_dp.methods.cheap_tuning import tune_on_proxy_then_train, tune_on_subsample
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective, load_sklearn_classification

EPSILON, DELTA, EPOCHS, BATCHES = 3.0, 1e-5, 15, 16


def split(seed: int):
    data = load_sklearn_classification("digits", seed=seed)
    m = len(data.y_train)
    order = torch.randperm(m, generator=torch.Generator().manual_seed(seed))
    public = order[: int(0.3 * m)]
    private = order[int(0.3 * m) :]
    cut = int(0.75 * len(public))
    proxy = (
        data.X_train[public[:cut]],
        data.y_train[public[:cut]],
        data.X_train[public[cut:]],
        data.y_train[public[cut:]],
    )
    private_data = dataclasses.replace(data, X_train=data.X_train[private], y_train=data.y_train[private])
    return private_data, proxy


def objective_for(data, seed: int) -> TorchModelTuningObjective:
    space = SearchSpace([Hyperparameter("lr", 1e-3, 2.0, log_scale=True), Hyperparameter("momentum", 0.0, 0.95)])
    training = TrainingConfig(
        epochs=EPOCHS, batch_size=math.ceil(len(data.y_train) / BATCHES), hidden_sizes=(64,), seed=seed
    )
    return TorchModelTuningObjective(data, space, training=training, dp_sgd=DPSGDConfig(noise_multiplier=1.0))


def test_metrics(objective, model) -> dict[str, float]:
    X, y = objective.data.X_test, objective.data.y_test
    with torch.no_grad():
        out = model(X.to(torch.float32))
        loss = float(torch.nn.functional.cross_entropy(out, y))
        acc = float((out.argmax(-1) == y).double().mean())
    return {"test_loss": loss, "test_accuracy": acc}


def untuned(objective) -> tuple[dict, float]:
    rate, steps = 1.0 / BATCHES, EPOCHS * BATCHES
    sigma, eps = final_only_noise(epsilon=EPSILON, delta=DELTA, sample_rate=rate, steps=steps)
    run = objective.with_data(objective.data, dp_sgd=DPSGDConfig(noise_multiplier=sigma, max_grad_norm=1.0))
    theta = objective.space.from_natural({"lr": 0.1, "momentum": 0.9}).to(torch.float64)
    return test_metrics(objective, run.train(theta, label="untuned")), objective.ledger.training.epsilon(DELTA)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--configs", type=int, default=8)
    parser.add_argument("--subsample-fraction", type=float, default=None)
    parser.add_argument("--tuning-share", type=float, default=None)
    parser.add_argument("--out", default="reports/dpsgd-cheap-pilot.json")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for seed in range(args.seeds):
        private, proxy = split(seed)
        for arm in ("untuned", "subsample", "proxy"):
            objective = objective_for(private, seed)
            start = time.time()
            if arm == "untuned":
                metrics, spent = untuned(objective)
                hyper, split_text = {"lr": 0.1, "momentum": 0.9}, "one run at the whole epsilon"
            else:
                if arm == "subsample":
                    result = tune_on_subsample(
                        objective,
                        epsilon=EPSILON,
                        delta=DELTA,
                        tuner=args.configs,
                        seed=seed,
                        tuning_share=args.tuning_share,
                        **({} if args.subsample_fraction is None else {"subsample_fraction": args.subsample_fraction}),
                    )
                else:
                    result = tune_on_proxy_then_train(
                        objective, None, proxy, epsilon=EPSILON, delta=DELTA, tuner=args.configs, seed=seed
                    )
                ledger = objective.ledger
                assert ledger is not None  # a DP-SGD objective records its training runs
                metrics, spent = test_metrics(objective, result.model), ledger.training.epsilon(DELTA)
                hyper, split_text = result.hyperparameters, result.split
            rows.append(
                {
                    "seed": seed,
                    "arm": arm,
                    **metrics,
                    "training_epsilon": spent,
                    "hyperparameters": hyper,
                    "split": split_text,
                    "seconds": time.time() - start,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for arm in ("untuned", "subsample", "proxy"):
        acc = np.array([r["test_accuracy"] for r in rows if r["arm"] == arm])
        loss = np.array([r["test_loss"] for r in rows if r["arm"] == arm])
        summary[arm] = {
            "test_accuracy_mean": float(acc.mean()),
            "test_accuracy_se": float(acc.std(ddof=1) / math.sqrt(len(acc))) if len(acc) > 1 else None,
            "test_loss_mean": float(loss.mean()),
        }
    out = {
        "command": "PYTHONPATH=. python scripts/tune_dpsgd_cheap.py "
        + f"--seeds {args.seeds} --configs {args.configs} --out {args.out}"
        + (f" --subsample-fraction {args.subsample_fraction}" if args.subsample_fraction is not None else "")
        + (f" --tuning-share {args.tuning_share}" if args.tuning_share is not None else ""),
        "machine": f"{platform.machine()} {platform.processor() or ''} {platform.system()}, torch {torch.__version__}",
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
        "summary": summary,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
