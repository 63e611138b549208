r"""Run the missing jobs of one kind for some seeds into an experiment's run store, one command per seed.

``python -m benchmarks.rerun NAME --kind KIND --seeds 3,4 [--epsilons 3] --out DIR [--set FIELD=VALUE ...]`` opens
``DIR/runs-NAME.jsonl`` with the header ``python -m benchmarks run NAME --out DIR`` would use (the
same settings), runs every job of ``KIND`` for those seeds (and those ``epsilon`` values) that the
store does not hold and is fed by no other job (``budget_from`` unset), and records each as it
finishes. A later
``python -m benchmarks run NAME --out DIR --render`` (same ``--set``) writes the report from the
store. This splits a long rerun of one arm into short commands, e.g. after a fix to the arm's
method: drop the arm's stored lines from the store first, and the other arms' runs are reused.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from benchmarks.cli import field_defaults, plain, settings_with
from benchmarks.experiment import load_experiment
from benchmarks.store import RunStore

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rerun", description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--kind", required=True, help="the jobs' kind (e.g. tune_auto)")
    parser.add_argument("--seeds", required=True, help="comma-separated replication seeds")
    parser.add_argument("--epsilons", help="comma-separated epsilon values (default: every job's)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    experiment = load_experiment(args.name)
    settings = settings_with(experiment.Settings(), args.set)
    seeds = {int(s) for s in args.seeds.split(",") if s.strip()}
    epsilons = None if args.epsilons is None else {float(e) for e in args.epsilons.split(",") if e.strip()}
    context = experiment.prepare(settings)
    selection = set(getattr(experiment, "SELECTION_FIELDS", ()))
    header = {
        "experiment": args.name,
        "settings": {k: v for k, v in plain(settings).items() if k not in selection},
        "context": context,
    }
    store = RunStore(args.out / f"runs-{args.name}.jsonl", header, added_field_defaults=field_defaults(settings))
    runner = experiment.make_runner(settings, context)
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
    ran = 0
    for job in experiment.experiment_jobs(settings, context):
        if job.kind != args.kind or job.budget_from is not None or job.kwargs.get("seed") not in seeds:
            continue
        epsilon = job.kwargs.get("epsilon")
        if epsilons is not None and (epsilon is None or float(epsilon) not in epsilons):
            continue  # a job without an epsilon (a non-private reference) is not one of those asked for
        key = store.key(job.kind, dict(job.kwargs))
        if store.get(key) is not None:
            continue
        start = time.perf_counter()
        store.add(key, runner(job.kind, dict(job.kwargs)))
        ran += 1
        print(f"{job.label}: {time.perf_counter() - start:.1f} s", flush=True)
    print(f"{ran} job(s) run into {store.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
