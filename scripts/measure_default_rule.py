#!/usr/bin/env python
r"""``tune``'s arms WITHOUT a proxy at small continuous d: the evidence for the default-method rule (issue 41).

On the GP length-scale task of ``benchmarks.dimension`` (``dimension_problem`` with its default
settings: 3 relevant inputs, 400 training points, 1000 validation users, box ``[0.05, 5]^d``),
and (``--task mlp``) on the digits MLP of ``benchmarks.mixed_task`` with its categoricals and
width fixed, ``tune`` is called as a user without a proxy would call it, once per arm: DP-GIBO with
``TUNE_DEFAULTS`` (``method="dp_gibo"``), private random search and DP-HyPO (``E[K]`` = DP-GIBO's
evaluations, ``C = loss_clip = 3``), all at the same ``(ε, δ)``. The score of a returned point is
its NON-PRIVATE mean validation loss (a diagnostic). Seeds are paired: every arm sees the same
problem per seed; the privacy noise comes from the seed (a reproduction, never for a release).

Usage::

    python scripts/measure_default_rule.py                       # d = 2..5, 6 seeds; reports/default_rule_tune.*
    python scripts/measure_default_rule.py --task mlp --dims 1 2 3   # the digits MLP; reports/default_rule_tune_mlp.*
    python scripts/measure_default_rule.py --quick --out /tmp    # d = 2, 1 seed (a smoke run)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.dimension_task import Settings, dimension_problem  # noqa: E402
from benchmarks.provenance import script_meta, write_report  # noqa: E402
from botorch_dp import tune  # noqa: E402
from botorch_dp.tuning import Hyperparameter, SearchSpace  # noqa: E402
from botorch_dp.utils import torch_threads  # noqa: E402

ARMS = ("dp_gibo", "private_random_search", "dp_hypo")


def make_task(dim: int, seed: int):
    r"""The space, the objective (q dicts -> q x n losses) and the true mean loss of cell (``dim``, ``seed``)."""
    problem = dimension_problem(Settings(), dim, seed)
    lo, hi = problem.bounds[0].tolist(), problem.bounds[1].tolist()
    names = [f"lengthscale_{j}" for j in range(dim)]
    space = SearchSpace([Hyperparameter(n, a, b) for n, a, b in zip(names, lo, hi, strict=True)])

    def theta(configs) -> torch.Tensor:
        return torch.tensor([[c[n] for n in names] for c in configs], dtype=torch.float64)

    def objective(configs):
        return problem.evaluate_true(theta(configs))

    def true_loss(config) -> float:
        return float(problem.evaluate_true(theta([config])).mean())

    return space, objective, true_loss


#: The continuous MLP spaces by d (``--task mlp``): the mixed benchmark's continuous hyperparameters.
MLP_SPACES = {
    1: (Hyperparameter("lr", 1e-4, 0.3, log_scale=True),),
    2: (Hyperparameter("lr", 1e-4, 0.3, log_scale=True), Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True)),
    3: (
        Hyperparameter("lr", 1e-4, 0.3, log_scale=True),
        Hyperparameter("weight_decay", 1e-6, 1e-1, log_scale=True),
        Hyperparameter("dropout", 0.0, 0.5),
    ),
}


def make_mlp_task(dim: int, seed: int):
    r"""The digits MLP of ``benchmarks.mixed_task`` with its categoricals and width fixed (Adam, ReLU, width
    64): a continuous space of ``dim`` of its hyperparameters; the loss is the NON-PRIVATE test loss."""
    import functools

    from benchmarks.mixed_task import Settings as MixedSettings
    from benchmarks.mixed_task import load_data, make_model, make_optimizer
    from botorch_dp.training import TrainingConfig
    from botorch_dp.tuning import TorchModelTuningObjective

    settings = MixedSettings()
    data = load_data(settings, seed)
    assert data.num_classes is not None  # a classification data set
    space = SearchSpace(list(MLP_SPACES[dim]))
    objective = TorchModelTuningObjective(
        data,
        space,
        model_fn=functools.partial(
            make_model, data.num_features, int(data.num_classes), width=64, activation="relu", **_fixed(dim)
        ),
        optimizer=functools.partial(make_optimizer, optimizer="adam", **_fixed_optimizer(dim)),
        training=TrainingConfig(epochs=settings.epochs, batch_size=settings.train_batch_size, seed=seed, num_threads=1),
        loss_cap=settings.loss_cap,
    )

    def true_loss(config) -> float:
        return float(objective.evaluate_non_private(space.from_natural(config))["test_loss"])

    return space, objective, true_loss


def _fixed(dim: int) -> dict:
    return {} if dim >= 3 else {"dropout": 0.0}


def _fixed_optimizer(dim: int) -> dict:
    return {} if dim >= 2 else {"weight_decay": 0.0}


def run(args: argparse.Namespace) -> dict:
    rows = []
    for dim in args.dims:
        for seed in args.seeds:
            space, objective, true_loss = (make_task if args.task == "gp" else make_mlp_task)(dim, seed)
            for arm in ARMS:
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the seeded noise's PrivacyWarning (a reproduction)
                    result = tune(
                        objective, space, epsilon=args.epsilon, delta=args.delta, seed=seed, progress=False, method=arm
                    )
                rows.append(
                    {
                        "dim": dim,
                        "seed": seed,
                        "arm": arm,
                        "true_loss": true_loss(result.hyperparameters),
                        "epsilon": result.guarantee.epsilon,
                        "seconds": time.perf_counter() - start,
                    }
                )
                print(rows[-1], flush=True)
    return {"rows": rows, "summary": summarize(rows, args)}


def _se(values: list[float]) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def summarize(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    out = []
    for dim in args.dims:
        by = {a: {r["seed"]: r["true_loss"] for r in rows if r["dim"] == dim and r["arm"] == a} for a in ARMS}
        entry: dict = {"dim": dim}
        for a in ARMS:
            losses = [by[a][s] for s in args.seeds]
            entry[a] = {"mean": statistics.fmean(losses), "se": _se(losses)}
        for other in ARMS[1:]:
            diffs = [by["dp_gibo"][s] - by[other][s] for s in args.seeds]
            entry[f"dp_gibo_vs_{other}"] = {
                "dp_gibo_wins": sum(d < 0 for d in diffs),
                "mean_difference": statistics.fmean(diffs),
                "se": _se(diffs),
            }
        out.append(entry)
    return out


def markdown(report: dict) -> str:
    m = report["meta"]
    fmt = lambda v, se: f"{v:.4f}" + ("" if se is None else f" ± {se:.4f}")  # noqa: E731
    n = len(m["seeds"])
    lines = [
        "# tune without a proxy at small continuous d (evidence for the default-method rule)",
        "",
        f"Command: `{m['command']}`  ",
        f"Machine: {m['machine']}, {m['cpus']} CPUs, {m['threads']} torch thread(s); "
        f"Python {m['python']}, torch {m['torch']}; {m['date']}",
        "",
        (
            "Task: `benchmarks.dimension_task.dimension_problem` (GP length-scales, 3 relevant inputs, 1000 "
            "validation users). Loss: NON-PRIVATE mean validation loss at the released point."
            if m.get("task", "gp") == "gp"
            else "Task: the digits MLP of `benchmarks.mixed_task` (4 epochs, validation examples as users, loss "
            "capped at 5) with Adam, ReLU and width 64 fixed; d = 1: lr; d = 2: lr, weight decay; d = 3: lr, "
            "weight decay, dropout (the others 0). Loss: NON-PRIVATE test loss of the model trained at the released "
            "point."
        ),
        "",
        f"`tune(objective, space, epsilon={m['epsilon']:g}, delta={m['delta']:g}, method=ARM)` with no "
        "proxy and every other argument at its default (DP-GIBO: `TUNE_DEFAULTS`; the selections: E[K] = DP-GIBO's "
        f"evaluations, C = 3); {n} paired seeds.",
        "",
        "| d | DP-GIBO | private random search | DP-HyPO | DP-GIBO − PRS (paired) | DP-GIBO wins vs PRS "
        "| DP-GIBO wins vs DP-HyPO |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in report["summary"]:
        prs, hypo = e["dp_gibo_vs_private_random_search"], e["dp_gibo_vs_dp_hypo"]
        lines.append(
            f"| {e['dim']} | {fmt(e['dp_gibo']['mean'], e['dp_gibo']['se'])} | "
            f"{fmt(e['private_random_search']['mean'], e['private_random_search']['se'])} | "
            f"{fmt(e['dp_hypo']['mean'], e['dp_hypo']['se'])} | {fmt(prs['mean_difference'], prs['se'])} | "
            f"{prs['dp_gibo_wins']}/{n} | {hypo['dp_gibo_wins']}/{n} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--epsilon", type=float, default=3.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--task", choices=("gp", "mlp"), default="gp", help="GP length-scales, or the digits MLP")
    parser.add_argument("--quick", action="store_true", help="d = 2, one seed (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    args = parser.parse_args(argv)
    if args.quick:
        args.dims, args.seeds = [2], [0]
    with torch_threads(args.threads):
        report = run(args)
    report["meta"] = {
        **script_meta("scripts/measure_default_rule.py", argv if argv is not None else sys.argv[1:], args.threads),
        **{k: getattr(args, k) for k in ("dims", "epsilon", "delta", "seeds", "task")},
    }
    name = "default_rule_tune" if args.task == "gp" else "default_rule_tune_mlp"
    write_report(args.out, name, report, markdown(report), indent=1, allow_nan=True)
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
