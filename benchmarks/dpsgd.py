r"""Tuning a DP-SGD-trained MLP with its training records protected: every method of the library
against Papernot–Steinke at RDP and three untuned defaults (issue 41, item 5).

The task is ``benchmarks.dpsgd_task`` (scikit-learn digits and breast_cancer, an MLP trained by
Opacus DP-SGD, lr and momentum tuned); the arms are the registry ``benchmarks.dpsgd_arms.ARMS``.
One job per (data set, ε, seed, arm), ε = 3 first (the goal's cell), and one per (data set, seed)
for the non-private random search. Every private arm spends the same total ε on the private
training records (δ = ``target_delta``), which its ledger states. The test accuracy each run
records is a NON-PRIVATE diagnostic. The privacy noise comes from OS entropy, so a run is not
reproducible bit for bit; the seed fixes the split, the public slice and the initialisation.

    python -m benchmarks run dpsgd --workers 2 --out reports
    python -m benchmarks run dpsgd --quick --out /tmp/dpsgd
"""

from __future__ import annotations

import time

from benchmarks.dpsgd_arms import ARMS
from benchmarks.dpsgd_report import REPORT_MD, write_report  # noqa: F401  (re-exported)
from benchmarks.dpsgd_task import Settings, quick_settings  # noqa: F401  (re-exported)
from benchmarks.jobs import Job, KindRunner
from benchmarks.runs import Run
from botorch_dp.utils import torch_threads

__all__ = [
    "EXPERIMENT",
    "SELECTION_FIELDS",
    "Runner",
    "Settings",
    "experiment_jobs",
    "make_runner",
    "prepare",
    "quick_settings",
    "write_report",
]

#: The ``Run.experiment`` of every run of this module.
EXPERIMENT = "dpsgd"
#: Fields that only choose which jobs run: more seeds, ε's, data sets or arms reuse the stored runs.
SELECTION_FIELDS = ("datasets", "epsilons", "seeds", "arms")
#: The ``setting`` of the non-private reference (run once per data set and seed).
INF = "inf"


def prepare(settings: Settings) -> dict:
    r"""No pilot: ``{}``. Checks the arms' names (``ValueError`` naming an unknown one). The arms'
    descriptions are read from the registry when the report is written, so the store's header (and
    every stored run's key) does not change when an arm is added to the registry."""
    unknown = [a for a in settings.arms if a not in ARMS]
    if unknown:
        raise ValueError(f"arms: unknown arm(s) {unknown}; known: {sorted(ARMS)}")
    return {}


def setting_of(dataset: str, epsilon: float | str) -> str:
    r"""The ``Run.setting`` of a cell: ``"digits ε=3"`` (``"digits ε=inf"`` for the reference)."""
    return f"{dataset} ε={epsilon if isinstance(epsilon, str) else format(epsilon, 'g')}"


class Runner(KindRunner):
    r"""Runs one arm on one seed and returns a ``Run``; picklable (settings and context only)."""

    KINDS = ("arm",)

    def execute(self, kind: str, kwargs: dict) -> Run:
        with torch_threads(1):
            return super().execute(kind, kwargs)

    def arm(self, arm: str, dataset: str, seed: int, epsilon: float | None) -> Run:
        r"""``ARMS[arm].run(settings, dataset, seed, epsilon)`` as a ``Run`` (``epsilon=None``: the reference)."""
        start = time.perf_counter()
        values = ARMS[arm].run(self.settings, dataset, seed, 0.0 if epsilon is None else float(epsilon))
        loss = float(values["test_loss"])
        return Run(
            EXPERIMENT,
            arm,
            seed,
            setting_of(dataset, INF if epsilon is None else epsilon),
            [int(round(float(values["trainings"])))],
            [loss],
            loss,
            float(values["trainings"]),
            time.perf_counter() - start,
            epsilon=values["ledger_epsilon"],
            extra={"dataset": dataset, "target_epsilon": epsilon, **values},
        )


def make_runner(settings: Settings, context: dict):
    r"""``Runner(settings, context).execute``: the picklable ``run_job`` of ``jobs.run_jobs``."""
    return Runner(settings, context).execute


def experiment_jobs(settings: Settings, context: dict) -> list[Job]:
    r"""Per ε (in the settings' order: ε = 3 first, the goal's cells) and data set, every seed's private
    and default arms; after the first ε the non-private reference of every data set and seed. Equal cost
    hints keep this order with workers, so an interrupted run has finished the goal's cells first."""
    s = settings
    jobs: list[Job] = []
    per_epsilon = [a for a in s.arms if ARMS[a].kind != "reference"]
    references = [a for a in s.arms if ARMS[a].kind == "reference"]
    for i, eps in enumerate(s.epsilons):
        for dataset in s.datasets:
            for seed in s.seeds:
                for arm in per_epsilon:
                    kwargs = dict(arm=arm, dataset=dataset, seed=seed, epsilon=eps)
                    jobs.append(Job(f"{arm} {setting_of(dataset, eps)} seed {seed}", "arm", kwargs))
        if i == 0:
            for dataset in s.datasets:
                for seed in s.seeds:
                    for arm in references:
                        kwargs = dict(arm=arm, dataset=dataset, seed=seed, epsilon=None)
                        jobs.append(Job(f"{arm} {dataset} seed {seed}", "arm", kwargs))
    return jobs
