r"""What an experiment of the benchmark CLI provides, and the registry of experiments.

An experiment is a module (or any object) with five members:

- ``Settings``: a dataclass of plain fields (``int``, ``float``, ``str``, ``bool``,
  ``None`` or tuples of those); every knob of the experiment, public values only.
- ``quick_settings() -> Settings``: a smoke configuration that keeps every code path and
  runs in well under a minute on one core (the test suite runs it).
- ``prepare(settings) -> dict``: public set-up computed once before the jobs (a pilot's
  clip bounds on synthetic data, for instance); JSON-ready; ``{}`` when there is none. It
  must be a function of the settings alone (no wall times, no entropy): the run store's
  header holds it, and a context that changes between calls would refuse every resume.
- ``experiment_jobs(settings, context) -> list[Job]``: the jobs (``jobs.Job``), each
  depending only on earlier ones; each job's ``kwargs`` are plain JSON-ready values.
- ``make_runner(settings, context) -> RunJob``: a picklable ``run_job(kind, kwargs) -> Run``
  (e.g. ``Runner(settings, context).execute`` of a ``jobs.KindRunner`` subclass);
  deterministic given its arguments, privacy noise excepted where no noise seed is set.
- ``write_report(settings, context, runs, out, command) -> Path``: writes the report
  (Markdown, plots) into the directory ``out`` and returns the Markdown file's path.

Optionally, ``SELECTION_FIELDS``: names of settings fields that only choose WHICH jobs run
(seed lists, a list of sub-experiments) and never change a job's result. The run store
leaves them out of its header, so adding seeds to a finished benchmark reuses its runs.

Before ``write_report`` the CLI adds ``wall_s`` (the command's wall time),
``prepare_wall_s`` (the time ``prepare`` took) and ``execution`` (how the jobs ran) to a
copy of the context.

``EXPERIMENTS`` maps a name to the module path; ``load_experiment`` imports it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXPERIMENTS", "REQUIRED_MEMBERS", "load_experiment"]

#: name -> module path of the experiments the CLI knows.
EXPERIMENTS: dict[str, str] = {
    "paper": "benchmarks.paper_experiment",
    "e1": "benchmarks.e1",
    "amp": "benchmarks.amp",
    "options": "benchmarks.options",
    "mlp": "benchmarks.mlp",
    "dimension": "benchmarks.dimension",
    "mixed": "benchmarks.mixed",
    "dpsgd": "benchmarks.dpsgd",
}

REQUIRED_MEMBERS = ("Settings", "quick_settings", "prepare", "experiment_jobs", "make_runner", "write_report")


def load_experiment(name: str) -> ModuleType:
    r"""The experiment module registered under ``name``.

    Args:
        name: A key of ``EXPERIMENTS``.

    Returns:
        The imported module.

    Raises:
        ValueError: for an unknown name, or a module that lacks one of ``REQUIRED_MEMBERS``.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    module = importlib.import_module(EXPERIMENTS[name])
    missing = [m for m in REQUIRED_MEMBERS if not hasattr(module, m)]
    if missing:
        raise ValueError(f"experiment {name!r} ({EXPERIMENTS[name]}) lacks {', '.join(missing)}")
    return module
