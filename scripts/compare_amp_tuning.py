r"""Private tuning of AMP logistic regression: DP-GIBO vs Papernot–Steinke vs no tuning vs DP-SGD.

The comparison is ``benchmarks.amp`` (its docstring describes the methods, the
budgets and the scaling-down); it is also the ``amp`` experiment of
``python -m benchmarks``. This script keeps the original command line, with
``--noise-seed`` (reproductions only: a ``PrivacyWarning``; the seed is never written out)
and ``--render``.

Examples::

    python scripts/compare_amp_tuning.py --quick --out /tmp/amp_quick
    python scripts/compare_amp_tuning.py --workers 2          # full: writes reports/amp_tuning.*
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

from botorch_dp.privacy.seeding import PrivacyWarning

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is the repo's top-level benchmarks/, not installed

from benchmarks.amp import (  # noqa: E402, F401 - re-exported for the script's users and tests
    LABELS,
    METHODS,
    REPORT_MD,
    REPORT_PNG,
    RUNS_JSON,
    AMPRunBudget,
    Runner,
    Settings,
    experiment_jobs,
    plain_settings,
    plan,
    settings_from_plain,
)
from benchmarks.amp_report import make_plot, report_text  # noqa: E402
from benchmarks.jobs import run_jobs  # noqa: E402
from benchmarks.runs import Run  # noqa: E402

COMMAND = "python scripts/compare_amp_tuning.py"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="tiny settings for CI")
    p.add_argument("--epsilons", type=float, nargs="+", default=None, help="ε values (default 0.1 1 8)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="public seeds (default 0..4)")
    p.add_argument("--datasets", nargs="+", choices=("breast_cancer", "synthetic"), default=None)
    p.add_argument("--methods", nargs="+", choices=METHODS + ("non_private",), default=None)
    p.add_argument("--workers", type=int, default=1, help="spawned processes with one torch thread each")
    p.add_argument(
        "--noise-seed",
        type=int,
        default=None,
        help="seed of all privacy noise, for reproductions only (PrivacyWarning; never written out)",
    )
    p.add_argument("--out", type=Path, default=Path("reports"), help="where amp_tuning.md/.png/_runs.json go")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument(
        "--render",
        action="store_true",
        help=f"rewrite {REPORT_MD} and {REPORT_PNG} in --out from its {RUNS_JSON}; run nothing",
    )
    return p


def render(out: Path, argv: list[str], plot: bool = True) -> dict:
    r"""Rewrite the report and the plot in ``out`` from its runs file (nothing is run)."""
    stored = json.loads((out / RUNS_JSON).read_text())
    settings = settings_from_plain(stored["settings"])
    runs = [Run(**r) for r in stored["runs"]]
    command = stored["command"]
    if isinstance(command, list):  # runs files written before the command was stored as a string
        command = f"{COMMAND} {' '.join(command)}"
    text = report_text(settings, stored["plan"], runs, command, stored["wall_s"])
    text += f"\nReport re-rendered from {RUNS_JSON} by `python scripts/compare_amp_tuning.py {' '.join(argv)}`.\n"
    (out / REPORT_MD).write_text(text)
    if plot:
        make_plot(settings, runs, out / REPORT_PNG)
    return {"runs": runs, "plan": stored["plan"], "report": text}


def main(argv: list[str] | None = None) -> dict:
    r"""Run the comparison; returns ``{"runs", "plan", "report"}`` (also written to ``--out``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.render:
        return render(args.out, public_argv(argv), plot=not args.no_plot)
    settings = Settings.quick() if args.quick else Settings()
    if args.epsilons:
        settings.epsilons = tuple(args.epsilons)
    if args.seeds:
        settings.seeds = tuple(args.seeds)
    if args.datasets:
        settings.datasets = tuple(args.datasets)
    if args.methods:
        settings.methods = tuple(args.methods)
    if args.noise_seed is not None:
        warnings.warn(
            "--noise-seed makes every privacy noise reproducible; the guarantees then assume it stays "
            "secret. It is not written to the outputs.",
            PrivacyWarning,
            stacklevel=2,
        )
    start = time.perf_counter()
    plan_ = plan(settings)
    plain = plain_settings(settings)
    jobs = experiment_jobs(settings, plan_)
    runs = run_jobs(
        jobs, Runner(settings, plan_, args.noise_seed).execute, workers=args.workers, progress=not args.no_progress
    )
    wall = time.perf_counter() - start
    shown = f"{COMMAND} {' '.join(public_argv(argv))}"
    text = report_text(settings, plan_, runs, shown, wall)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / REPORT_MD).write_text(text)
    (args.out / RUNS_JSON).write_text(
        json.dumps(
            {
                "command": shown,
                "wall_s": wall,
                "settings": plain,
                "plan": plan_,
                "runs": [dataclasses.asdict(r) for r in runs],
            },
            indent=1,
        )
    )
    if not args.no_plot:
        make_plot(settings, runs, args.out / REPORT_PNG)
    print(text)
    return {"runs": runs, "plan": plan_, "report": text}


def public_argv(argv: list[str]) -> list[str]:
    r"""``argv`` with the value of ``--noise-seed`` replaced: a noise seed is never written."""
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("<not recorded>")
        elif arg.startswith("--noise-seed="):
            arg = "--noise-seed=<not recorded>"
        if not hide:
            out.append(arg)
        hide = arg == "--noise-seed"
    return out


if __name__ == "__main__":
    main()
