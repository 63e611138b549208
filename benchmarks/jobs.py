r"""A DAG of benchmark jobs and one scheduler that runs it over any executor.

A ``Job`` names a runner method (``kind``) and its keyword arguments; it may take its
evaluation budget from an earlier job (``budget_from``) or copy an identical earlier
DP-GIBO run (``reuse_of``). ``run_jobs`` runs the jobs over a ``concurrent.futures.Executor``
(``evaluation.SerialExecutor`` in this process by default, a pool of spawned processes with
one torch thread each, a Dask or Ray executor, a thread pool) and returns the runs in job
order. Each job is deterministic given its arguments, so every way of
running gives the runs of a serial run with one torch thread (apart from wall times).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from benchmarks.runs import Run
from benchmarks.store import RunStore
from botorch_dp.evaluation import SerialExecutor, init_one_thread_worker, process_pool

__all__ = [
    "Job",
    "KindRunner",
    "RunJob",
    "critical_paths",
    "init_one_thread_worker",
    "job_kwargs",
    "process_pool",
    "reused_run",
    "run_jobs",
]

#: ``run_job(kind, kwargs) -> Run``: runs one job (picklable for process pools).
RunJob = Callable[[str, dict], Run]


class KindRunner:
    r"""Base of an experiment's runner: ``execute(kind, kwargs)`` calls the method ``kind``.

    A subclass lists its job kinds in ``KINDS`` and defines one method per kind taking the
    job's keyword arguments. It holds only the settings and the public context, so
    ``runner.execute`` can be sent to worker processes as the ``run_job`` of ``run_jobs``.

    Args:
        settings: The experiment's settings.
        context: Its public context (``prepare``'s dict; default empty).
    """

    KINDS: tuple[str, ...] = ()

    def __init__(self, settings: Any, context: dict | None = None) -> None:
        self.settings = settings
        self.context = {} if context is None else context

    def execute(self, kind: str, kwargs: dict) -> Run:
        r"""Run ``self.<kind>(**kwargs)``; ``ValueError`` for a kind not in ``KINDS``."""
        if kind not in self.KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        return getattr(self, kind)(**kwargs)


@dataclass
class Job:
    r"""One unit of work: ``Runner.<kind>(**kwargs)``, possibly fed by earlier jobs.

    Attributes:
        label: Progress-bar label.
        kind: The ``Runner`` method.
        kwargs: Its keyword arguments (plain, picklable values).
        budget_from: Index of the job whose ``num_evaluations`` is passed as ``budget``.
        reuse_of: Index of an identical DP-GIBO job: its ``Run`` is copied (relabelled), not re-run.
        cost: Rough seconds at one thread (a scheduling hint for workers; no effect on results).
    """

    label: str
    kind: str
    kwargs: dict
    budget_from: int | None = None
    reuse_of: int | None = None
    cost: float = 1.0

    @property
    def deps(self) -> list[int]:
        r"""Indices of the jobs this one waits for."""
        return [i for i in (self.budget_from, self.reuse_of) if i is not None]


def job_kwargs(job: Job, results: list[Run | None]) -> dict:
    r"""The job's keyword arguments, with ``budget`` taken from its ``budget_from`` job."""
    kwargs = dict(job.kwargs)
    if job.budget_from is not None:
        source = results[job.budget_from]
        assert source is not None, f"job {job.label!r} runs before its budget source"
        kwargs["budget"] = source.num_evaluations
    return kwargs


def unstored_jobs(jobs: list[Job], store: RunStore) -> list[str]:
    r"""Labels of the jobs that ``run_jobs(jobs, ..., store=store)`` would have to run.

    Walks the DAG as ``run_jobs`` does, but only through the store: a job fed by another
    (``budget_from``) is keyed with the stored source's budget, and is unstored when its
    source is; a reused job is unstored when its source is.
    """
    results: list[Run | None] = [None] * len(jobs)
    missing = []
    for i, job in enumerate(jobs):  # sources always come before the jobs they feed
        if job.reuse_of is not None:
            source = results[job.reuse_of]
            results[i] = None if source is None else reused_run(job, source)
        elif job.budget_from is None or results[job.budget_from] is not None:
            results[i] = store.get(store.key(job.kind, job_kwargs(job, results)))
        if results[i] is None:
            missing.append(job.label)
    return missing


def reused_run(job: Job, source: Run) -> Run:
    r"""``source`` relabelled with the experiment, method and setting of the reusing ``job``."""
    k = job.kwargs
    return dataclasses.replace(
        source,
        experiment=k["experiment"],
        method=k["method"],
        setting=k["setting"],
        extra={**source.extra, "reused": True},
    )


def critical_paths(jobs: list[Job]) -> list[float]:
    r"""Cost of each job plus its longest chain of dependants (for scheduling longest-first)."""
    cp = [job.cost for job in jobs]
    for i in range(len(jobs) - 1, -1, -1):  # dependants always come after their sources
        for d in jobs[i].deps:
            cp[d] = max(cp[d], jobs[d].cost + cp[i])
    return cp


def run_jobs(
    jobs: list[Job],
    run_job: RunJob,
    *,
    workers: int | None = None,
    executor: cf.Executor | None = None,
    progress: bool = True,
    store: RunStore | None = None,
) -> list[Run]:
    r"""Run ``jobs`` and return their ``Run`` objects in job order (whatever order they finished in).

    Every job whose sources are done is submitted to the executor, longest critical path
    first, and reused runs are copied here. Without ``executor`` and with ``workers``
    ``None`` or 1 the executor is a ``SerialExecutor``: the jobs run one after the other in
    this process. The runs equal those of a serial run with one torch thread (torch's
    results depend on its thread count in the last digits), apart from wall times.
    Threads of one process share torch's global
    random state, which BoTorch's ``manual_seed`` forks, so concurrent threads are not
    reproducible; use processes (or a thread pool of one worker).

    Args:
        jobs: The jobs; a job only depends on earlier jobs.
        run_job: ``run_job(kind, kwargs) -> Run``; must be picklable for process pools.
        workers: Without ``executor``: the number of spawned processes (``process_pool``).
            With ``executor``: at most this many jobs in flight (``None``: no limit).
        executor: Any ``concurrent.futures.Executor``; it is not shut down here. Its
            workers should run torch with one thread.
        progress: Show a progress bar.
        store: A ``RunStore``: a job whose key it holds is not run (its stored run is
            used, and jobs that depend on it get their budget from it), and every job that
            finishes is added to it at once, so an interrupted benchmark resumes where it
            stopped.

    Returns:
        One ``Run`` per job, in job order.
    """
    results: list[Run | None] = [None] * len(jobs)
    bar = tqdm(total=len(jobs), desc="jobs", disable=not progress)
    try:
        if executor is None and (workers is None or workers <= 1):
            _schedule(jobs, run_job, SerialExecutor(), 1, results, bar, store)
        elif executor is None:
            assert workers is not None  # workers > 1 here
            with process_pool(workers) as pool:
                _schedule(jobs, run_job, pool, workers, results, bar, store)
        else:
            _schedule(jobs, run_job, executor, workers or len(jobs), results, bar, store)
    finally:
        bar.close()
    done = [r for r in results if r is not None]
    assert len(done) == len(jobs), "a job finished without a run"
    return done


def _schedule(
    jobs: list[Job],
    run_job: RunJob,
    executor: cf.Executor,
    max_in_flight: int,
    results: list[Run | None],
    bar,
    store: RunStore | None,
) -> None:
    r"""Submit ready jobs to ``executor`` (longest critical path first) until all are done."""
    cp = critical_paths(jobs)
    pending = set(range(len(jobs)))
    in_flight: dict[cf.Future, tuple[int, str | None]] = {}
    while pending or in_flight:
        progressed = True
        while progressed:  # copy reused runs here; submit ready jobs while workers are free
            progressed = False
            ready = sorted(
                (i for i in pending if all(results[d] is not None for d in jobs[i].deps)), key=lambda i: (-cp[i], i)
            )
            for i in ready:
                reuse_of = jobs[i].reuse_of
                if reuse_of is not None:
                    source = results[reuse_of]
                    assert source is not None  # a reused job depends on its source
                    results[i] = reused_run(jobs[i], source)
                    pending.discard(i)
                    bar.update()
                    progressed = True
                    continue
                kwargs = job_kwargs(jobs[i], results)
                key = store.key(jobs[i].kind, kwargs) if store is not None else None
                stored = store.get(key) if store is not None and key is not None else None
                if stored is not None:
                    results[i] = stored
                    pending.discard(i)
                    bar.update()
                    progressed = True
                elif len(in_flight) < max_in_flight:
                    in_flight[executor.submit(run_job, jobs[i].kind, kwargs)] = (i, key)
                    pending.discard(i)
        if not in_flight:
            if pending:
                raise RuntimeError("job dependencies cannot be satisfied")
            break
        done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
        for fut in done:
            i, key = in_flight.pop(fut)
            run = results[i] = fut.result()
            if store is not None and key is not None:
                store.add(key, run)
            bar.set_postfix_str(jobs[i].label)
            bar.update()
