r"""One command for every benchmark: ``python -m benchmarks``, from the repository root.

Usage::

    python -m benchmarks list
    python -m benchmarks run dimension --quick --out /tmp/dim
    python -m benchmarks run mlp --workers 2 --out reports
    python -m benchmarks run paper --set only=comparison,svm --set seeds=0,1,2 --workers 2
    python -m benchmarks run dimension --dask tcp://scheduler:8786 --out /shared/dim
    python -m benchmarks run mlp --out reports --render     # report from stored runs only

``run NAME`` takes the experiment's full settings (``--quick``: its smoke settings), changes
fields with ``--set FIELD=VALUE`` (tuples comma-separated, ``none`` for ``None``), computes
its public context (``prepare``: a pilot on synthetic data, say), runs its jobs and writes
its report into ``--out``.

Resuming: every finished job is appended at once (fsynced) to ``OUT/runs-NAME.jsonl``
(``store.RunStore``). Running the same command again skips the jobs stored there, so an
interrupted or killed benchmark continues where it stopped and a finished one only
re-renders its report. A store made with other settings is refused with the fields that
differ; ``--fresh`` discards it first. Fields an experiment lists in ``SELECTION_FIELDS``
(its seed lists, say) only choose which jobs run, so more seeds reuse the stored runs.

Execution: ``--workers N`` runs independent jobs in N spawned processes with one torch
thread each; ``--dask ADDRESS`` sends them to a Dask scheduler (``local`` starts a
``LocalCluster`` of ``--workers`` single-threaded processes). Every job is deterministic
given its arguments, so all ways of running give the runs of a serial run with one torch
thread (wall times aside).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
import types
import typing
import warnings
from pathlib import Path
from typing import Any

from benchmarks.experiment import EXPERIMENTS, load_experiment
from benchmarks.jobs import run_jobs, unstored_jobs
from benchmarks.report_tables import threads_text
from benchmarks.store import RunStore
from botorch_dp.utils import torch_threads

__all__ = ["build_parser", "field_defaults", "main", "parse_value", "plain", "run_experiment", "settings_with"]

_NONE = ("none", "null")


def _scalar(text: str, kind: Any, name: str) -> Any:
    if kind is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"--set {name}: expected true or false, got {text!r}")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"--set {name}: expected {kind.__name__}, got {text!r}") from None
    if kind is str:
        return text
    raise ValueError(f"--set {name}: cannot parse a value of type {kind!r}")


def parse_value(text: str, hint: Any, name: str) -> Any:
    r"""``text`` as a value of the type ``hint`` of the settings field ``name``.

    Supports ``int``, ``float``, ``str``, ``bool``, ``X | None`` (``none``) and
    ``tuple[X, ...]`` (comma-separated; an empty string is the empty tuple).
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if text.lower() in _NONE and len(args) < len(typing.get_args(hint)):
            return None
        if len(args) != 1:
            raise ValueError(f"--set {name}: unsupported type {hint!r}")
        return parse_value(text, args[0], name)
    if origin is tuple:
        (kind, *_) = typing.get_args(hint)
        return tuple(_scalar(part.strip(), kind, name) for part in text.split(",") if part.strip())
    return _scalar(text, hint, name)


def settings_with(settings: Any, assignments: list[str]) -> Any:
    r"""``settings`` with the ``FIELD=VALUE`` assignments applied (``ValueError`` names a bad one)."""
    hints = typing.get_type_hints(type(settings))
    changes: dict[str, Any] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"--set takes FIELD=VALUE, got {item!r}")
        if name not in hints or name not in {f.name for f in dataclasses.fields(settings)}:
            known = ", ".join(f.name for f in dataclasses.fields(settings))
            raise ValueError(f"--set {name}: not a settings field of this experiment (fields: {known})")
        changes[name] = parse_value(text.strip(), hints[name], name)
    return dataclasses.replace(settings, **changes)


def plain(settings: Any) -> dict:
    r"""The settings dataclass as a dict of its fields (lists for tuples), ready for JSON."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(settings).items()}


def field_defaults(settings: Any) -> dict:
    r"""The declared default of every field of the settings dataclass (lists for tuples)."""
    defaults = {}
    for f in dataclasses.fields(settings):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        defaults[f.name] = list(value) if isinstance(value, tuple) else value
    return defaults


def run_experiment(
    name: str,
    settings: Any,
    out: Path,
    *,
    workers: int = 1,
    dask: str | None = None,
    fresh: bool = False,
    render_only: bool = False,
    progress: bool = True,
    command: str = "",
    threads: int | None = None,
) -> dict:
    r"""Run (or resume) experiment ``name`` with ``settings`` and write its report into ``out``.

    Args:
        name: A key of ``experiment.EXPERIMENTS``.
        settings: The experiment's ``Settings``.
        out: The output directory (created); the run store is ``out/runs-<name>.jsonl``.
        workers: Spawned processes (``> 1``), or the Dask cluster's size with ``dask="local"``.
        dask: A Dask scheduler address, ``"local"`` for a ``LocalCluster``, or ``None``.
        fresh: Discard an existing run store first.
        render_only: Run nothing: write the report from the stored runs (every job must be stored).
        progress: Show a progress bar.
        command: The command line, quoted in the report.
        threads: Torch threads of this process for serial runs (default: torch's; 1 with
            ``workers > 1``). Torch's results depend on the thread count in the last digits.

    Returns:
        ``report`` (the Markdown path), ``runs``, ``context``, ``wall_s``, ``stored`` (jobs
        found in the store) and ``ran`` (jobs run now).
    """
    experiment = load_experiment(name)
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"runs-{name}.jsonl"
    if fresh and path.exists():
        path.unlink()
    prepare_start = time.perf_counter()
    context = experiment.prepare(settings)
    prepare_wall = time.perf_counter() - prepare_start
    selection = set(getattr(experiment, "SELECTION_FIELDS", ()))
    header_settings = {k: v for k, v in plain(settings).items() if k not in selection}
    store = RunStore(
        path,
        {"experiment": name, "settings": header_settings, "context": context},
        added_field_defaults=field_defaults(settings),
    )
    jobs = experiment.experiment_jobs(settings, context)
    before = len(store)
    runner = experiment.make_runner(settings, context)
    if render_only:
        missing = unstored_jobs(jobs, store)
        if missing:
            raise ValueError(f"--render: {len(missing)} job(s) are not stored in {path}, e.g. {missing[0]!r}")
    if dask is not None:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=1) if dask == "local" else None
        with Client(cluster if cluster is not None else dask) as client:
            runs = run_jobs(
                jobs,
                runner,
                executor=client.get_executor(),
                workers=workers if dask == "local" else None,
                progress=progress,
                store=store,
            )
        if cluster is not None:
            cluster.close()
        execution = f"Dask ({'LocalCluster of ' + str(workers) + ' single-thread workers' if cluster else dask})"
    else:
        with torch_threads(1 if workers > 1 else threads):
            runs = run_jobs(jobs, runner, workers=workers, progress=progress, store=store)
        execution = f"{workers} worker processes with 1 torch thread each" if workers > 1 else threads_text()
    wall = time.perf_counter() - start
    report_context = {**context, "wall_s": wall, "prepare_wall_s": prepare_wall, "execution": execution}
    report = experiment.write_report(settings, report_context, runs, out, command)
    return {
        "report": report,
        "runs": runs,
        "context": context,
        "wall_s": wall,
        "stored": before,
        "ran": len(store) - before,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="list the experiments")
    show = sub.add_parser("settings", help="print an experiment's settings")
    show.add_argument("name", choices=sorted(EXPERIMENTS))
    show.add_argument("--quick", action="store_true")
    run = sub.add_parser("run", help="run (or resume) an experiment and write its report")
    run.add_argument("name", choices=sorted(EXPERIMENTS))
    run.add_argument("--quick", action="store_true", help="the experiment's smoke settings")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a settings field (repeatable; tuples comma-separated, 'none' for None)",
    )
    run.add_argument("--out", type=Path, help="output directory (default outputs/NAME, or outputs/NAME-quick)")
    run.add_argument("--workers", type=int, default=1, help="spawned processes with one torch thread each")
    run.add_argument("--dask", metavar="ADDRESS", help="a Dask scheduler address, or 'local' for a LocalCluster")
    run.add_argument("--threads", type=int, help="torch threads of this process (default torch's; 1 with --workers)")
    run.add_argument("--fresh", action="store_true", help="discard the stored runs of OUT first")
    run.add_argument("--render", action="store_true", help="only write the report from the stored runs")
    run.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.action == "list":
        for name, module in EXPERIMENTS.items():
            doc = (load_experiment(name).__doc__ or "").strip().splitlines()
            print(f"{name:<12} {doc[0] if doc else module}")
        return None
    experiment = load_experiment(args.name)
    settings = experiment.quick_settings() if args.quick else experiment.Settings()
    if args.action == "settings":
        for key, value in plain(settings).items():
            print(f"{key} = {value!r}")
        return None
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    try:
        settings = settings_with(settings, args.set)
    except ValueError as error:
        parser.error(str(error))
    out = args.out or Path("outputs") / (args.name + ("-quick" if args.quick else ""))
    command = "python -m benchmarks " + shlex.join(argv)
    warnings.filterwarnings("ignore", message=".*(optimization|Optimization).*")
    try:
        result = run_experiment(
            args.name,
            settings,
            out,
            workers=args.workers,
            dask=args.dask,
            fresh=args.fresh,
            render_only=args.render,
            progress=not args.no_progress,
            command=command,
            threads=args.threads,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from error
    print(result["report"].read_text())
    print(
        f"{result['ran']} job(s) run, {result['stored']} taken from {out / f'runs-{args.name}.jsonl'}; "
        f"wall time {result['wall_s']:.1f} s; wrote {result['report']}"
    )
    return result
