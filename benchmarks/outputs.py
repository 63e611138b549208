r"""An output directory of a reproduction: ``runs.json``, ``results.md`` and the plots.

``reproduce`` runs experiments and writes all three; ``render`` rewrites the report and
plots from a stored ``runs.json``; ``merge`` combines the ``runs.json`` of several
commands (e.g. a full run split by ``--only``) into one report. ``runs.json`` holds the
settings, the pilot, the command, its wall time and processes, and every ``Run``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from benchmarks.jobs import run_jobs
from benchmarks.paper import EXPERIMENTS, Settings, pilot
from benchmarks.paper_jobs import experiment_jobs
from benchmarks.paper_runner import Runner
from benchmarks.plots import make_plots
from benchmarks.report import write_report
from benchmarks.report_tables import threads_text
from benchmarks.runs import Run

#: Settings fields that list seeds (merged as a union by ``--merge``).
SEED_FIELDS = ("seeds", "sweep_seeds", "normal_location_seeds", "huber_seeds", "svm_seeds")


def settings_from_dict(data: dict) -> Settings:
    r"""``Settings`` from a ``runs.json`` dict (lists become tuples).

    Raises:
        ValueError: If ``data`` has a key that is not a ``Settings`` field.
    """
    fields = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValueError(f"unknown settings in runs.json: {', '.join(unknown)}")
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Settings(**values)


def settings_to_dict(settings: Settings) -> dict:
    r"""``settings`` as a JSON-ready dict (tuples become lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(settings).items()}


def run_experiments(
    settings: Settings,
    only: tuple[str, ...] = EXPERIMENTS,
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: bool = True,
) -> tuple[list[Run], dict, float]:
    r"""The pilot (when a GP experiment runs) and every job of the experiments in ``only``.

    Args:
        settings: The run's settings.
        only: The experiments to run.
        workers: Spawned processes with one torch thread each (``None`` or 1: serial
            here), or the jobs in flight on ``executor`` (see ``jobs.run_jobs``).
        executor: Any ``concurrent.futures.Executor`` to run the jobs on.
        progress: Show a progress bar.

    Returns:
        The runs in job order, the pilot (``{}`` when none ran) and the pilot's seconds.
    """
    runner = Runner(settings)
    pilot_s = 0.0
    if {"comparison", "eps", "mu", "sigma"} & set(only):
        start = time.perf_counter()
        runner.pilot = pilot(settings)
        pilot_s = time.perf_counter() - start
    jobs = experiment_jobs(settings, runner.pilot, only)
    runs = run_jobs(jobs, runner.execute, workers=workers, executor=executor, progress=progress)
    return runs, runner.pilot, pilot_s


def reproduce(
    settings: Settings,
    only: tuple[str, ...],
    out: Path,
    argv: list[str],
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: bool = True,
) -> dict:
    r"""Run the experiments in ``only`` and write plots, ``results.md`` and ``runs.json`` to ``out``.

    Args:
        settings: The run's settings.
        only: The experiments to run.
        out: The output directory (created).
        argv: The command's arguments (quoted in the report).
        workers: See ``run_experiments``.
        executor: See ``run_experiments``.
        progress: Show a progress bar.

    Returns:
        ``results_md`` (path), ``text`` (of results.md), ``runs``, ``pilot``, ``pilot_s`` and ``wall_s``.
    """
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    runs, pilot_values, pilot_s = run_experiments(settings, only, workers=workers, executor=executor, progress=progress)
    total = time.perf_counter() - start
    if executor is not None:
        execution = f"a {type(executor).__name__}"
    elif workers is not None and workers > 1:
        execution = f"{workers} worker processes with 1 torch thread each"
    else:
        execution = threads_text()
    text = write_outputs(
        settings, runs, pilot_values, out, argv, total, only=only, execution=execution, workers=workers or 1
    )
    return {
        "results_md": out / "results.md",
        "text": text,
        "runs": runs,
        "pilot": pilot_values,
        "pilot_s": pilot_s,
        "wall_s": total,
    }


def write_outputs(
    settings: Settings,
    runs: list[Run],
    pilot_values: dict,
    out: Path,
    argv: list[str],
    wall_s: float,
    *,
    only: tuple[str, ...],
    execution: str | None,
    workers: int | None = None,
) -> str:
    r"""Write the plots, ``results.md`` and ``runs.json`` of ``runs`` into ``out``.

    Args:
        settings: The settings the runs were made with.
        runs: The runs.
        pilot_values: The pilot's clip bounds (``{}`` when none ran).
        out: The output directory.
        argv: The command's arguments (quoted in the report).
        wall_s: The command's wall time (pilot and runs).
        only: The experiments run.
        execution: How the jobs ran (processes, threads, executor).
        workers: The number of worker processes, if known.

    Returns:
        The text of ``results.md``.
    """
    make_plots(settings, runs, out)
    text = write_report(settings, runs, pilot_values, out, wall_s, argv, execution=execution)
    (out / "runs.json").write_text(
        json.dumps(
            {
                "settings": settings_to_dict(settings),
                "pilot": pilot_values,
                "argv": argv,
                "wall_s": wall_s,
                "only": list(only),
                "workers": workers,
                "execution": execution,
                "runs": [dataclasses.asdict(r) for r in runs],
            },
            indent=1,
            default=str,
        )
    )
    return text


def runs_json_path(path: Path) -> Path:
    r"""``path`` if it is a file, else ``path/runs.json``."""
    return path if path.is_file() else path / "runs.json"


def render(out: Path, argv: list[str]) -> dict:
    r"""Rewrite ``results.md`` and the plots of ``out`` from its ``runs.json`` (no new runs).

    Args:
        out: A directory with a ``runs.json``.
        argv: The rendering command's arguments (noted in the report).

    Returns:
        ``results_md``, ``text``, ``runs``, ``pilot`` and ``wall_s`` (of the original command).
    """
    data = json.loads((out / "runs.json").read_text())
    settings = settings_from_dict(data["settings"])
    runs = [Run(**r) for r in data["runs"]]
    note = data.get("note", "")
    note = (note + "  \n" if note else "") + (
        f"Report re-rendered from `runs.json` with `python scripts/reproduce_paper.py {' '.join(argv)}` "
        "(tables, findings and plots recomputed from the stored runs; nothing was re-run)."
    )
    make_plots(settings, runs, out)
    text = write_report(
        settings, runs, data["pilot"], out, data["wall_s"], data["argv"], note=note, execution=data.get("execution")
    )
    return {
        "results_md": out / "results.md",
        "text": text,
        "runs": runs,
        "pilot": data["pilot"],
        "wall_s": data["wall_s"],
    }


def merge(sources: list[Path], out: Path, argv: list[str]) -> dict:
    r"""Merge the ``runs.json`` of several output directories into one report in ``out`` (no new runs).

    Meant for one full-mode reproduction split into commands with different ``--only``
    (each within a time limit). The settings must agree apart from the seed lists (merged
    as unions); the pilots must agree where present; a run (experiment, method, seed,
    setting) may come from one source only. Runs are ordered by experiment, then as
    in their source, so the tables equal those of one command running everything (except
    that a sweep run in another command than the comparison re-runs, instead of reusing,
    the DP-GIBO run they share).

    Args:
        sources: Output directories or ``runs.json`` files.
        out: The directory to write the merged ``runs.json``, report and plots to.
        argv: The merging command's arguments.

    Returns:
        ``results_md``, ``text``, ``runs``, ``pilot`` and ``wall_s`` (the sum over the sources).

    Raises:
        ValueError: If the settings or pilots disagree, or a run is in two sources.
    """
    datas = [json.loads(runs_json_path(src).read_text()) for src in sources]
    base = dict(datas[0]["settings"])
    for src, data in zip(sources[1:], datas[1:], strict=True):
        diff = sorted(
            k
            for k in set(base) | set(data["settings"])
            if k not in SEED_FIELDS and base.get(k) != data["settings"].get(k)
        )
        if diff:
            raise ValueError(f"--merge: settings of {src} differ from {sources[0]} in {', '.join(diff)}")
    for k in SEED_FIELDS:
        base[k] = sorted({x for data in datas for x in data["settings"].get(k, [])})
    pilots = [data["pilot"] for data in datas if data.get("pilot")]
    if any(p != pilots[0] for p in pilots[1:]):
        raise ValueError("--merge: the sources have different pilots (clip bounds)")
    runs: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, int, str], Path] = {}
    for src, data in zip(sources, datas, strict=True):
        for r in data["runs"]:
            key = (r["experiment"], r["method"], r["seed"], str(r["setting"]))
            if key in seen:
                raise ValueError(f"--merge: run {key} is in both {seen[key]} and {src}")
            seen[key] = src
            runs.append(r)
    order = {e: i for i, e in enumerate(EXPERIMENTS)}
    runs.sort(key=lambda r: order.get(r["experiment"], len(order)))  # stable: source order within an experiment
    only = [e for e in EXPERIMENTS if any(e in data.get("only", EXPERIMENTS) for data in datas)]
    parts = [
        f"`{src}` (`{' '.join(data.get('argv', []))}`, {data.get('wall_s', math.nan):.0f} s, "
        f"{data.get('execution', 'threads not recorded')})"
        for src, data in zip(sources, datas, strict=True)
    ]
    note = "Merged from the `runs.json` of " + "; ".join(parts) + ". Total wall time: sum over these commands."
    wall = sum(data.get("wall_s", math.nan) for data in datas)
    merged = {
        "settings": base,
        "pilot": pilots[0] if pilots else {},
        "argv": argv,
        "wall_s": wall,
        "only": only,
        "execution": "the processes listed below",
        "note": note,
        "merged_from": [
            {
                "path": str(src),
                "argv": data.get("argv"),
                "wall_s": data.get("wall_s"),
                "only": data.get("only"),
                "execution": data.get("execution"),
            }
            for src, data in zip(sources, datas, strict=True)
        ],
        "runs": runs,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.json").write_text(json.dumps(merged, indent=1, default=str))
    settings = settings_from_dict(base)
    run_list = [Run(**r) for r in runs]
    make_plots(settings, run_list, out)
    text = write_report(settings, run_list, merged["pilot"], out, wall, argv, note=note, execution=merged["execution"])
    return {"results_md": out / "results.md", "text": text, "runs": run_list, "pilot": merged["pilot"], "wall_s": wall}
