r"""Tune the continuous hyperparameters of a torch MLP privately with DP-GIBO.

θ = (learning rate, weight decay, dropout rate) of an SGD-trained MLP, searched on the
unit cube (log-uniformly for the learning rate and the weight decay). The data set is
one scikit-learn ships (default ``load_digits``), split into train / validation / test
and standardized with the training statistics. Each validation example is a user; its
loss is its cross-entropy under the model trained at θ (a fresh model from a fixed seed
for every θ, so an evaluation is reproducible). DP-GIBO spends ``--mu`` (μ-GDP) on the
validation users (or ``--epsilon E --delta D``, a target (ε, δ) resolved to μ by exact
GDP inversion); everything it releases (θ_T, the iterates, the evaluation points, the
noisy gradients) is covered by that guarantee. ``--optimizer`` picks the torch optimizer
whose ``lr`` and ``weight_decay`` are tuned.

Randomness: ``--seed`` seeds PUBLIC randomness only (data splits, model initialization
and dropout, the pilot's points); DP-GIBO's config gets no seed derived from it. The
privacy noise (DP-GIBO's gradient noise, DP-SGD's noise and Poisson batches) comes from
OS entropy unless ``--noise-seed`` is given (reproductions only; it raises a
``PrivacyWarning``). The noise seed is never written to the JSON, the plot or stdout.

``--dp-train`` also trains every candidate with Opacus DP-SGD (Poisson sampling) and
records each training run in a ``PrivacyLedger``. The training data then get their own
guarantee, composed over ALL training runs (every evaluation of DP-GIBO, the final model,
and the diagnostic baseline run) — it grows with the number of runs (Sopa et al., short version, §3.4 and
§5: each training call costs training privacy). ``--dp-train-epsilon E`` calibrates the
DP-SGD noise multiplier so that ALL planned runs together spend at most E at ``--delta``
(Opacus ``get_noise_multiplier`` over the summed steps of the planned runs: DP-GIBO's
``max_evaluations`` plus the final model and the diagnostic baseline); a run beyond the
plan is refused. DP-SGD makes the losses noisy; that
noise is modelled as observation noise σ² in the GP, estimated by a pilot on PUBLIC
synthetic data of the same shape (``--noise-variance`` states a value instead). σ² is
never fit on the sensitive validation losses.

Outputs (in ``--out``): ``tune_torch_model.json`` with the ``private_release`` (θ_T and
iterates in natural units, evaluation points, guarantees), the ``public_settings``, and a
separately keyed ``NON_PRIVATE_diagnostics`` section (validation loss / accuracy and
test accuracy of the final and initial θ — never publish it); ``tune_torch_model.png``
plots public quantities only.

Examples::

    python scripts/tune_torch_model.py --mu 1 --iterations 10
    python scripts/tune_torch_model.py --mu 1 --iterations 10 --dp-train --dp-noise-multiplier 1.5
    python scripts/tune_torch_model.py --epsilon 1 --delta 1e-5 --dp-train --dp-train-epsilon 3
    python scripts/tune_torch_model.py --quick

Plugging in your own model and data
-----------------------------------
DP-GIBO needs one thing: a callable ``objective`` mapping a ``q x d`` tensor of
parameters θ (float64, inside the public box ``bounds``) to the ``q x n`` tensor of
per-user losses (row j: the loss of each of the n users at θ_j). Finite values only;
the number of users must stay fixed. Then::

    from botorch_dp import DPGIBO, DPGIBOConfig
    result = DPGIBO(DPGIBOConfig(bounds=bounds, kernel=kernel, privacy_mu=1.0,
                                 clip_bound=B, num_iterations=T)).run(objective)
    result.release  # private: theta, iterates, evaluation_points, guarantee

For a torch model, ``botorch_dp.tuning.TorchModelTuningObjective`` builds that
callable: give it your data (``(X_train, y_train, X_val, y_val)`` numpy arrays or
tensors of any float dtype, or a ``ClassificationData``), a ``SearchSpace`` of
``Hyperparameter`` ranges (``log_scale=True`` for rates), ``model_fn(**kwargs) ->
nn.Module`` (e.g. your module class), ``optimizer=`` any ``torch.optim`` class and
``loss_fn(outputs, targets) -> n`` any per-example loss (``reduction="none"``). Each
hyperparameter is passed by name to the optimizer or to ``model_fn``
(``Hyperparameter(target=...)`` or their signatures decide). The kernel, its
hyperparameters, ``B``, η and σ² must be chosen without the sensitive data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
from gpytorch.kernels import ScaleKernel

from botorch_dp import DPGIBO, DPGIBOConfig
from botorch_dp.optim.options import AdaGrad, FixedClip, batch_rule
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.tuning import (
    SKLEARN_DATASETS,
    SearchSpace,
    TorchModelTuningObjective,
    default_mlp_space,
    estimate_training_noise_variance,
    load_sklearn_classification,
    synthetic_like,
)
from botorch_dp.utils import child_seeds, torch_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for scripts.tune_torch_model_output: the JSON guarantee, the printout, the plot

from scripts.tune_torch_model_output import finite, plot_release, print_summary, training_section  # noqa: E402

RESULT_FILE = "tune_torch_model.json"
PLOT_FILE = "tune_torch_model.png"
#: σ² stated for deterministic (non-DP) training: training from a fixed seed is a
#: deterministic but rough function of θ; a small noise term keeps the GP from
#: interpolating that roughness exactly.
DEFAULT_NOISE_VARIANCE = 1e-4
#: Floor of the pilot's σ² estimate (a variance estimated from a few runs can be tiny).
MIN_NOISE_VARIANCE = 1e-4
#: Name of the child stream of ``--seed`` that draws the pilot's public points.
PILOT_POINTS_STREAM = 1
#: ``--optimizer`` choices: torch optimizers that take ``lr`` and ``weight_decay``.
OPTIMIZERS = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "rmsprop": torch.optim.RMSprop,
}
#: Training runs besides DP-GIBO's evaluations: the final model and the diagnostic baseline.
EXTRA_TRAINING_RUNS = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    g = p.add_argument_group("privacy of the validation data (DP-GIBO)")
    target = g.add_mutually_exclusive_group()
    target.add_argument(
        "--mu", type=float, default=None, help="GDP budget μ on the validation users (default 1; inf: non-private)"
    )
    target.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="target ε on the validation users at --delta, instead of --mu (μ by exact GDP inversion)",
    )
    g.add_argument(
        "--delta", type=float, default=1e-5, help="δ of the targets, at which ε is reported (both guarantees)"
    )
    g.add_argument("--iterations", type=int, default=10, help="T, number of noisy gradient steps")
    g.add_argument(
        "--clip-bound",
        type=float,
        default=5.0,
        help="B, per-user clipping norm (chosen on public synthetic data of the same shape, "
        "where the median per-user gradient norm at the box centre is about 3-8)",
    )
    batch = g.add_mutually_exclusive_group()
    batch.add_argument("--batch-size", type=int, default=None, help="b, fixed batch (default d + 1)")
    batch.add_argument(
        "--bias-tolerance",
        type=float,
        default=None,
        help="adaptive batches: add points until tr Σ_D(θ) ≤ bias_tolerance (up to d + 1)",
    )
    g.add_argument("--step-size", type=float, default=0.2, help="η (AdaGrad on the unit cube)")
    g.add_argument("--search-radius", type=float, default=0.1, help="local box half-width (unit cube)")
    g.add_argument("--lengthscale", type=float, default=0.2, help="RBF length-scale of the GP (unit cube)")
    g.add_argument("--outputscale", type=float, default=1.0, help="prior variance of a per-user loss")
    g.add_argument(
        "--noise-variance",
        type=float,
        default=None,
        help=f"σ² of the GP; default {DEFAULT_NOISE_VARIANCE:g} without --dp-train, a public pilot with it",
    )
    g.add_argument("--raw-samples", type=int, default=64)
    g.add_argument("--num-restarts", type=int, default=2)

    t = p.add_argument_group("model, data and training")
    t.add_argument("--dataset", choices=SKLEARN_DATASETS, default="digits")
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--train-batch-size", type=int, default=64)
    t.add_argument("--hidden", type=int, nargs="+", default=[64], help="hidden-layer widths")
    t.add_argument(
        "--optimizer", choices=sorted(OPTIMIZERS), default="sgd", help="torch optimizer (lr and weight decay tuned)"
    )
    t.add_argument("--threads", type=int, default=1, help="torch threads (small models: 1 is fastest)")

    d = p.add_argument_group("privacy of the training data (DP-SGD)")
    d.add_argument("--dp-train", action="store_true", help="train every candidate with Opacus DP-SGD")
    noise = d.add_mutually_exclusive_group()
    noise.add_argument("--dp-noise-multiplier", type=float, default=None, help="DP-SGD noise multiplier (default 1)")
    noise.add_argument(
        "--dp-train-epsilon",
        type=float,
        default=None,
        help="target training ε at --delta of ALL planned DP-SGD runs composed; calibrates the noise multiplier",
    )
    d.add_argument("--dp-max-grad-norm", type=float, default=1.0, help="DP-SGD per-example clipping norm")
    d.add_argument("--training-accountant", choices=("rdp", "prv"), default="rdp")
    d.add_argument("--pilot-repeats", type=int, default=3, help="DP-SGD runs per pilot point for σ²")

    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of PUBLIC randomness only: splits, initialization, dropout, pilot points (not the noise)",
    )
    p.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="seed of the privacy noise (DP-GIBO and DP-SGD), for reproductions only: the noise becomes "
        "reproducible (PrivacyWarning). Default: OS entropy. Never written to the outputs",
    )
    p.add_argument("--out", type=Path, default=Path("outputs/tune_torch_model"))
    p.add_argument("--quick", action="store_true", help="tiny settings for a smoke test")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    return p


def make_kernel(space: SearchSpace, lengthscale: float, outputscale: float) -> ScaleKernel:
    r"""Scaled RBF kernel with fixed, public hyperparameters on the unit cube."""
    return space.recommended_kernel(lengthscale, outputscale)


def main(argv: list[str] | None = None) -> dict:
    r"""Run the tuning; returns the JSON summary as a dict (also written to ``--out``)."""
    args = build_parser().parse_args(argv)
    if args.quick:
        args.iterations = min(args.iterations, 2)
        args.epochs = min(args.epochs, 3)
        args.raw_samples, args.num_restarts = 32, 1
        args.pilot_repeats = 2
    start = time.perf_counter()
    with torch_threads(args.threads):
        summary = _run(args)
    summary["wall_time_s"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / RESULT_FILE).write_text(json.dumps(summary, indent=2))
    print(
        f"wall time: {summary['wall_time_s']:.1f} s; saved {args.out / RESULT_FILE}"
        + ("" if args.no_plot else f" and {args.out / PLOT_FILE}")
    )
    return summary


def _run(args: argparse.Namespace) -> dict:
    data = load_sklearn_classification(args.dataset, seed=args.seed)
    space = default_mlp_space()
    training = TrainingConfig(
        epochs=args.epochs,
        batch_size=args.train_batch_size,
        hidden_sizes=tuple(args.hidden),
        seed=args.seed,
        num_threads=None,  # the script sets the threads once
    )
    # privacy noise: OS entropy, or two independent streams of --noise-seed (never written out)
    gibo_seed: int | None = None  # DP-GIBO noise and candidate search from OS entropy
    sgd_noise_seed: int | None = None
    if args.noise_seed is not None:
        gibo_seed, sgd_noise_seed = child_seeds(int(args.noise_seed), 2)  # DPGIBO warns (PrivacyWarning)
    d = space.dim
    theta0 = space.bounds.mean(0)
    # σ² is set after the pilot below; everything else is public and fixed here
    config = DPGIBOConfig(
        bounds=space.bounds,
        kernel=make_kernel(space, args.lengthscale, args.outputscale),
        num_iterations=args.iterations,
        clip=FixedClip(args.clip_bound),
        step_size=args.step_size,
        step_rule=AdaGrad(),
        batches=batch_rule(args.batch_size, bias_tolerance=args.bias_tolerance),
        search_radius=args.search_radius,
        theta0=theta0,
        target_delta=args.delta,
        raw_samples=args.raw_samples,
        num_restarts=args.num_restarts,
        # a target (epsilon, delta), or privacy_mu
        epsilon=args.epsilon,
        delta=args.delta if args.epsilon is not None else None,
        privacy_mu=args.mu if args.epsilon is None else None,
        seed=gibo_seed,
    )
    planned_runs = config.max_evaluations + EXTRA_TRAINING_RUNS
    dp_sgd = None
    if args.dp_train and args.dp_train_epsilon is not None:
        dp_sgd = DPSGDConfig(
            max_grad_norm=args.dp_max_grad_norm,
            target_epsilon=args.dp_train_epsilon,
            target_delta=args.delta,
            planned_runs=planned_runs,
        )
    elif args.dp_train:
        dp_sgd = DPSGDConfig(
            1.0 if args.dp_noise_multiplier is None else args.dp_noise_multiplier, args.dp_max_grad_norm
        )
    ledger = PrivacyLedger(training_accountant=args.training_accountant, training_delta=args.delta)
    objective = TorchModelTuningObjective(
        data,
        space,
        optimizer=OPTIMIZERS[args.optimizer],
        training=training,
        dp_sgd=dp_sgd,
        ledger=ledger,
        noise_seed=sgd_noise_seed,
    )

    # ---- σ²: stated, or a pilot on PUBLIC synthetic data (never the validation losses)
    if args.noise_variance is not None:
        noise_variance, noise_source = args.noise_variance, "stated (--noise-variance)"
    elif args.dp_train:
        (pilot_points_seed,) = child_seeds([args.seed, PILOT_POINTS_STREAM], 1)
        gen = torch.Generator().manual_seed(pilot_points_seed)
        num_points = 1 if args.quick else 3
        points = torch.cat([theta0[None], torch.rand(num_points - 1, d, generator=gen, dtype=torch.float64)])
        print(f"pilot: {num_points} x {args.pilot_repeats} DP-SGD runs on public synthetic data to estimate σ² ...")
        pilot = estimate_training_noise_variance(
            objective, synthetic_like(data, seed=args.seed), points, num_repeats=args.pilot_repeats
        )
        noise_variance = max(pilot, MIN_NOISE_VARIANCE)
        noise_source = (
            f"pilot on public synthetic data: pooled variance {pilot:.3g} of the mean validation "
            f"loss over {args.pilot_repeats} DP-SGD runs at {num_points} public points, "
            f"floored at {MIN_NOISE_VARIANCE:g}"
        )
    else:
        noise_variance, noise_source = DEFAULT_NOISE_VARIANCE, "stated default (deterministic training)"
    config = dataclasses.replace(config, noise_variance=noise_variance)

    # one ledger: DP-GIBO's validation steps next to the objective's DP-SGD training runs
    result = DPGIBO(config, ledger=ledger).run(objective, progress=not args.no_progress)
    release = result.release
    num_tuning_runs = objective.num_trainings
    space = objective.space

    # ---- NON-PRIVATE diagnostics: train at θ_T (the deliverable model) and at θ_0
    final = objective.evaluate_non_private(release.theta, label="final")
    initial = objective.evaluate_non_private(release.iterates[0], label="diagnostic-theta0")

    g = release.guarantee
    report = ledger.report(args.delta)  # both guarantees, side by side, never composed
    assert math.isclose(report["validation"]["mu"], g.mu) or math.isinf(g.mu)
    validation = {
        "data": f"validation split ({objective.num_users} users = examples)",
        "mu": finite(g.mu),
        "epsilon": finite(g.epsilon),
        "delta": g.delta,
        "noise_std": g.noise_std,
        "noise_multiplier": finite(g.noise_multiplier),
        "num_steps": g.num_steps,
        "holds": g.holds,
    }
    training_guarantee = training_section(
        objective, ledger, report, dp_sgd, len(data.y_train), args.delta, num_tuning_runs
    )

    summary = {
        "private_release": {
            "hyperparameters": space.to_natural(release.theta),
            "theta_unit_cube": release.theta.tolist(),
            "iterates": space.to_natural(release.iterates),
            "iterates_unit_cube": release.iterates.tolist(),
            "evaluation_points": space.to_natural(release.evaluation_points),
            "batch_sizes": release.batch_sizes,
            "posterior_traces": release.posterior_traces,
            "released_gradients": release.released_gradients.tolist(),
            "guarantees": {"validation_data": validation, "training_data": training_guarantee},
        },
        "public_settings": {
            "dataset": args.dataset,
            "split_sizes": data.sizes(),
            "search_space": space.describe(),
            "theta0_unit_cube": theta0.tolist(),
            "T": args.iterations,
            "mu": finite(config.privacy_mu),
            "target_epsilon": args.epsilon,
            "clip_bound": args.clip_bound,
            "batch_size": args.batch_size,
            "bias_tolerance": args.bias_tolerance,
            "step_size": args.step_size,
            "step_rule": "adagrad",
            "search_radius": args.search_radius,
            "kernel": {"type": "ScaleKernel(RBF)", "lengthscale": args.lengthscale, "outputscale": args.outputscale},
            "noise_variance": noise_variance,
            "noise_variance_source": noise_source,
            "training": {
                "epochs": args.epochs,
                "batch_size": args.train_batch_size,
                "hidden": args.hidden,
                "optimizer": "SGD(momentum=0.9)" if args.optimizer == "sgd" else OPTIMIZERS[args.optimizer].__name__,
            },
            "public_seed": args.seed,
            "privacy_noise": "OS entropy" if args.noise_seed is None else "seeded (reproduction; seed not recorded)",
            "dp_sgd": None
            if dp_sgd is None or objective.run_dp_sgd is None
            else {  # both set with --dp-train
                "noise_multiplier": objective.run_dp_sgd.noise_multiplier,
                "max_grad_norm": dp_sgd.max_grad_norm,
                "poisson_sampling": True,
                "target_epsilon": dp_sgd.target_epsilon,
                "planned_runs": dp_sgd.planned_runs,
            },
        },
        "NON_PRIVATE_diagnostics": {
            "WARNING": "NON-PRIVATE: computed from the validation and test data without any "
            "privacy protection. For the developer only; do not publish.",
            "final_theta": final,
            "initial_theta0": initial,
        },
    }
    print_summary(summary, args)
    if not args.no_plot:
        args.out.mkdir(parents=True, exist_ok=True)
        plot_release(args.out / PLOT_FILE, release, space, validation, training_guarantee, ledger)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
