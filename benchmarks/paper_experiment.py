r"""The DP-GIBO paper's experiments (``paper``) as an experiment of the benchmark CLI.

``Settings`` adds ``only`` (the experiments of ``paper.EXPERIMENTS`` to run) to
``paper.Settings``; the report is ``results.md`` with the plots and a ``runs.json`` that
``scripts/reproduce_paper.py --render`` and ``--merge`` read. ``scripts/reproduce_paper.py``
is the same experiment with the paper's own command-line options.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from benchmarks import paper, paper_jobs
from benchmarks.jobs import Job, RunJob
from benchmarks.outputs import write_outputs
from benchmarks.paper_runner import Runner
from benchmarks.runs import Run

__all__ = ["Settings", "experiment_jobs", "make_runner", "prepare", "quick_settings", "write_report"]

#: Fields that only choose which jobs run (left out of the run store's header).
SELECTION_FIELDS = ("only", "seeds", "sweep_seeds", "normal_location_seeds", "huber_seeds", "svm_seeds")

#: The experiments whose jobs need the pilot's clip bounds.
NEEDS_PILOT = ("comparison", "eps", "mu", "sigma")


@dataclasses.dataclass
class Settings(paper.Settings):
    r"""``paper.Settings`` and the experiments to run (``only``, names from ``paper.EXPERIMENTS``)."""

    only: tuple[str, ...] = paper.EXPERIMENTS

    def __post_init__(self) -> None:
        unknown = [e for e in self.only if e not in paper.EXPERIMENTS]
        if unknown or not self.only:
            raise ValueError(f"only must name experiments of {paper.EXPERIMENTS}, got {self.only!r}")


def quick_settings() -> Settings:
    r"""``paper.Settings.quick()`` with every experiment (about a minute on one core)."""
    return Settings(**dataclasses.asdict(paper.Settings.quick()))


def paper_settings(settings: Settings) -> paper.Settings:
    r"""The ``paper.Settings`` part of ``settings``."""
    values = dataclasses.asdict(settings)
    values.pop("only")
    return paper.Settings(**values)


def prepare(settings: Settings) -> dict:
    r"""The pilot's clip bounds (an independent synthetic draw), or ``{}`` when no job needs them."""
    if not set(NEEDS_PILOT) & set(settings.only):
        return {}
    return paper.pilot(paper_settings(settings))


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""The jobs of the experiments in ``settings.only`` (see ``paper_jobs.experiment_jobs``)."""
    return paper_jobs.experiment_jobs(paper_settings(settings), dict(context), tuple(settings.only))


def make_runner(settings: Settings, context: dict) -> RunJob:
    r"""``paper_runner.Runner(settings, pilot).execute``."""
    return Runner(paper_settings(settings), dict(context)).execute


def write_report(settings: Settings, context: dict, runs: list[Run], out: Path, command: str) -> Path:
    r"""Write ``results.md``, the plots and ``runs.json`` (readable by ``reproduce_paper.py --render``)."""
    pilot = {k: v for k, v in context.items() if k not in ("wall_s", "prepare_wall_s", "execution")}
    write_outputs(
        paper_settings(settings),
        runs,
        pilot,
        out,
        command.split(),
        float(context.get("wall_s", math.nan)),
        only=tuple(settings.only),
        execution=context.get("execution"),
    )
    return out / "results.md"
