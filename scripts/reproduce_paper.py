#!/usr/bin/env python
r"""Reproduce the DP-GIBO paper's experiments (Sopa et al. §4 and Appendix E; §4 of the short version).

Writes ``results.md`` (tables, findings, timing), ``runs.json`` (every run) and PNG plots
to ``--out``:

1. ``comparison.png``: validation loss against evaluations on GP length-scale tuning
   (E.1: d = 15, n = 2000 split 50/50, T = 25, bias tolerance 0.5, AdaGrad η = 0.3) for DP-GIBO
   (μ = 1), non-private GIBO, random search, private random search (Papernot–Steinke,
   same (ε, δ) as DP-GIBO) and UCB-BO, all with DP-GIBO's evaluation budget;
2. ``eps_sweep.png``: bias tolerance of adaptive batches (the paper's ε), evaluations used vs
   final loss;
3. ``mu_sweep.png``: final loss against μ;
4. ``sigma_sweep.png``: E.5, observation noise 0.01, surrogate σ correct / too high / too low;
5. ``normal_location.png`` (E.3) and ``huber.png`` (E.4, DP-GIBO vs noisy GD);
6. ``svm.png``: E.2 / Sopa et al. (short version) §4.4, SVM hyperparameter tuning (d = 33): DP-GIBO (μ = 1),
   non-private GIBO and random search with DP-GIBO's evaluation count.

Usage::

    python scripts/reproduce_paper.py                 # full mode, writes reports/
    python scripts/reproduce_paper.py --quick --out /tmp/quick   # ~1 minute smoke run
    # full mode split over commands (each within a time limit), then one report:
    python scripts/reproduce_paper.py --workers 16 --only comparison --out /tmp/a
    python scripts/reproduce_paper.py --workers 16 --only eps mu normal huber --out /tmp/b
    python scripts/reproduce_paper.py --workers 16 --only sigma svm --out /tmp/c
    python scripts/reproduce_paper.py --merge /tmp/a /tmp/b /tmp/c --out reports
    # what produced reports/ on 2 cores (35 + ~45 minutes):
    python scripts/reproduce_paper.py --workers 2 --only comparison svm normal huber --out outputs/full_a
    python scripts/reproduce_paper.py --workers 2 --only eps mu sigma --out outputs/full_b
    python scripts/reproduce_paper.py --merge outputs/full_a outputs/full_b --out reports

``--workers N`` runs independent jobs in N spawned processes with one torch thread each
(jobs that need another job's result, e.g. random search's evaluation budget, wait for
it; a DP-GIBO run shared by several experiments runs once). The runs equal those of a
serial run with ``--threads 1`` (torch's results depend on its thread count in the last
digits, which ill-conditioned runs can amplify). ``--render DIR`` rewrites a report from
``DIR/runs.json``; ``--merge`` combines the ``runs.json`` of several commands.

The code is in ``benchmarks`` (``paper``: settings, pilot and experiments;
``jobs``: the job DAG and its scheduler over any ``concurrent.futures`` executor;
``report``/``plots``: ``results.md`` and the PNGs; ``outputs``: ``runs.json``, render,
merge); this script only parses the command line.

Choices the paper does not fix, and reductions of the full mode (also stated in
``results.md``):

- Seeds: 10 replications for the method comparison and every sweep (E.1), 5 for the SVM
  (E.2), 3 for E.3/E.4 (the paper shows one run). ``--seeds``, ``--sweep-seeds`` and
  ``--svm-seeds`` override them. Serial full mode takes hours (one torch thread: DP-GIBO
  ~25 s, UCB-BO ~80 s per d = 15 run, σ-sweep runs 75–180 s, SVM DP-GIBO ~110 s, GIBO
  ~170 s, random search ~50 s per run); use ``--workers``.
- σ sweep: E.5 says "once again [the] set-up from Example 4.1" with μ = 1, while E.1
  gives the σ experiment its own settings: full batches b = d + 1 (fixed), B = 1,
  μ = 0.1, T = 45. Those are used (``sigma_*`` settings), with evaluation noise 0.01.
- Clip bound B on the GP problem: the paper's B = 3 is far above the per-user gradient
  estimates there, so its noise 2B√T/(nμ) swamps the signal. B is set from a pilot on an
  independent synthetic draw of the problem (problem seed 10000, never used for results):
  the 90% quantile of per-user gradient-estimate norms ``‖A y_i‖`` at uniform random θ with
  d + 1 uniform points in the search box around θ. DP-GIBO with the paper's B = 3 is
  reported as well. The loss clip C of private random search is the 95% quantile of the
  pilot's per-user losses.
- θ₀ on the GP problem: E.1 says "random restarts inside the optimization area", which
  can mean random starting points (the default here, ``--theta0 random``: uniform in the
  box per seed) or the restarts of the acquisition optimization. ``--theta0 centre`` starts
  every DP-GIBO/GIBO run at the box centre (the package default) instead. With AdaGrad,
  a coordinate moves at most η√T = 1.5 in T = 25 steps, a third of the box width, so
  random starts cannot reach far-away optima. E.3/E.4 start at θ₀ = 0 as in the paper.
- Batches: chosen jointly by default (``--batch-selection joint``, the package default;
  reports written before the option existed used ``greedy``).
- Step sizes of E.3/E.4 are not given in the paper: plain gradient steps with η = 0.1
  (normal location: Hessian I, clipped gradients of norm ≤ 1) and η = 0.2 (Huber: Hessian
  below 2I, about 0.25I), the same η for DP-GIBO and noisy GD.
- SVM (E.2): the UCI CT-slice data are not shipped, so ``KernelSVMRegression`` on
  friedman1 data (30 features, 5 informative; 1000 training points, 1000 validation
  users) stands in, d = 33 as in §4.4 of the short version of Sopa et al. (the long version has d = 103). The
  paper's box, AdaGrad η = 0.8, B = 1, b = d + 1, θ₀ uniform per seed and an RBF surrogate
  with length-scale 1 on the raw (not normalised) coordinates. The paper gives no T; T = 25
  (850 evaluations; the loss levels off after about 10 iterations in a pilot on 2 seeds).
  Non-private GIBO does not clip.
- Acquisition optimization: ``optimize_acqf`` with 32 raw samples and 1 restart (the
  paper does not say; 64/2 tripled the run time for the same traces in a pilot).
- UCB-BO: BoTorch ``SingleTaskGP`` (Normalize/Standardize, fit by marginal likelihood
  every 25 iterations, re-conditioned in between), analytic UCB with β = 2, 2(d + 1)
  Sobol points. It is NON-PRIVATE, like random search and GIBO.

Every loss in the output is a NON-PRIVATE diagnostic (the noise-free validation loss of
what a method returned), computed only to evaluate the methods.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from pathlib import Path

from botorch_dp.utils import torch_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is the repo's top-level benchmarks/, not installed

from benchmarks.outputs import merge, render, reproduce  # noqa: E402
from benchmarks.paper import EXPERIMENTS, Settings  # noqa: E402
from benchmarks.report_tables import timing_table  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke configuration (~1 minute)")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="output directory (default: reports/)")
    parser.add_argument(
        "--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS), help="run only these experiments"
    )
    parser.add_argument("--seeds", type=int, help="number of seeds of the comparison (overrides the mode)")
    parser.add_argument("--sweep-seeds", type=int, help="number of seeds of the sweeps and E.3/E.4")
    parser.add_argument("--svm-seeds", type=int, help="number of seeds of the SVM experiment")
    parser.add_argument(
        "--theta0",
        choices=("random", "centre"),
        default="random",
        help="start of DP-GIBO/GIBO on the GP problem: uniform per seed, or the box centre",
    )
    parser.add_argument(
        "--batch-selection",
        choices=("joint", "greedy"),
        default="joint",
        help="how DP-GIBO/GIBO choose their batches (DPGIBOConfig.batch_search)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run independent jobs in this many spawned processes with one torch thread each "
        "(default 1: one after the other in this process)",
    )
    parser.add_argument(
        "--threads", type=int, help="torch threads of this process (default: torch's; 1 with --workers)"
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--render", type=Path, metavar="DIR", help="only rewrite DIR/results.md and plots from DIR/runs.json (no runs)"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="merge the runs.json of several output directories (or runs.json files), e.g. "
        "from commands with different --only, into one report in --out (no runs)",
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def settings_from_args(args: argparse.Namespace) -> Settings:
    r"""The mode's settings with the seed counts, θ₀ and batch selection of the command line."""
    settings = Settings.quick() if args.quick else Settings()
    if args.seeds:
        settings = dataclasses.replace(settings, seeds=tuple(range(args.seeds)))
    if args.sweep_seeds:
        k = tuple(range(args.sweep_seeds))
        settings = dataclasses.replace(settings, sweep_seeds=k, normal_location_seeds=k, huber_seeds=k)
    if args.svm_seeds:
        settings = dataclasses.replace(settings, svm_seeds=tuple(range(args.svm_seeds)))
    return dataclasses.replace(settings, gp_theta0=args.theta0, batch_selection=args.batch_selection)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
    if args.render is not None:
        result = render(args.render, argv)
        print(result["text"])
        return result
    if args.merge is not None:
        try:
            result = merge(args.merge, args.out, argv)
        except ValueError as error:
            raise SystemExit(str(error)) from error
        print(result["text"])
        return result
    only = tuple(e for e in EXPERIMENTS if e in args.only)
    # with workers, the pilot here also runs on one thread
    with torch_threads(args.threads or (1 if args.workers > 1 else None)):
        result = reproduce(
            settings_from_args(args), only, args.out, argv, workers=args.workers, progress=not args.no_progress
        )
    if result["pilot"]:
        print(
            f"pilot: B = {result['pilot']['clip_bound']:g}, C = {result['pilot']['loss_clip']:g} "
            f"({result['pilot_s']:.1f} s)"
        )
    print(result["text"])
    print("Timing summary")
    print(timing_table(result["runs"]))
    print(f"total wall time {result['wall_s']:.1f} s; wrote {result['results_md']}")
    return result


if __name__ == "__main__":
    main()
