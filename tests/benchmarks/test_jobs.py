"""benchmarks.jobs: the job DAG gives the same runs serially, in worker processes and on
any concurrent.futures executor."""

import concurrent.futures as cf
import dataclasses

import pytest

from benchmarks.jobs import Job, critical_paths, run_jobs, unstored_jobs
from benchmarks.paper import Settings
from benchmarks.paper_jobs import experiment_jobs
from benchmarks.paper_runner import Runner
from benchmarks.runs import Run
from benchmarks.store import RunStore
from botorch_dp.utils import torch_threads
from tests.helpers import quick_reproduction


def fake_run_job(kind: str, kwargs: dict) -> Run:
    """A deterministic job: its loss depends on its seed and on the budget it was given."""
    budget = kwargs.get("budget", 10)
    loss = kwargs["seed"] + 1.0 / budget
    return Run(
        kwargs["experiment"],
        kwargs["method"],
        kwargs["seed"],
        kwargs["setting"],
        [0, budget],
        [1.0, loss],
        loss,
        budget + kwargs["seed"],
        0.0,
        extra={"kind": kind},
    )


def _fake_jobs() -> list[Job]:
    base = lambda seed, method="dp": dict(experiment="x", method=method, seed=seed, setting=None)
    return [
        Job("a", "dp", base(0), cost=5.0),
        Job("b", "dp", base(1), cost=1.0),
        Job("rs a", "rs", base(0, "rs"), budget_from=0, cost=1.0),
        Job("a again", "dp", dict(base(0), experiment="y", method="dp2", setting=3), reuse_of=0, cost=0.0),
        Job("rs b", "rs", base(1, "rs"), budget_from=1, cost=9.0),
    ]


def test_critical_paths_add_the_longest_chain_of_dependants():
    assert critical_paths(_fake_jobs()) == [6.0, 10.0, 1.0, 0.0, 9.0]


def test_budgets_and_reuse_follow_the_dag():
    runs = run_jobs(_fake_jobs(), fake_run_job, progress=False)
    assert runs[2].num_evaluations == runs[0].num_evaluations + 0  # budget of job 0, seed 0
    assert runs[4].evals == [0, runs[1].num_evaluations]
    reused = runs[3]
    assert (reused.experiment, reused.method, reused.setting, reused.extra["reused"]) == ("y", "dp2", 3, True)
    assert dataclasses.replace(reused, experiment="x", method="dp", setting=None, extra=runs[0].extra) == runs[0]


@pytest.mark.parametrize("max_workers, in_flight", [(1, None), (3, None), (3, 1)])
def test_any_executor_gives_the_serial_runs(max_workers, in_flight):
    serial = run_jobs(_fake_jobs(), fake_run_job, progress=False)
    with cf.ThreadPoolExecutor(max_workers=max_workers) as pool:
        pooled = run_jobs(_fake_jobs(), fake_run_job, executor=pool, workers=in_flight, progress=False)
    assert pooled == serial


def test_unstored_jobs_follow_the_dag_through_the_store(tmp_path):
    # --render relies on this: a job fed by another's budget is keyed with the stored budget,
    # so one that is missing must be named (it used to slip through and be run)
    jobs = _fake_jobs()
    store = RunStore(tmp_path / "runs.jsonl", {"experiment": "x"})
    assert unstored_jobs(jobs, store) == ["a", "b", "rs a", "a again", "rs b"]
    run_jobs(jobs, fake_run_job, progress=False, store=store)
    assert unstored_jobs(jobs, store) == []
    # a store without the fed job "rs b" (its key carries job b's budget)
    partial = RunStore(tmp_path / "partial.jsonl", {"experiment": "x"})
    runs = run_jobs(jobs[:4], fake_run_job, progress=False, store=partial)
    assert unstored_jobs(jobs, partial) == ["rs b"]
    # a stored fed job under another budget is not the one the DAG asks for
    wrong = dict(jobs[4].kwargs, budget=runs[1].num_evaluations + 1)
    partial.add(partial.key("rs", wrong), fake_run_job("rs", wrong))
    assert unstored_jobs(jobs, partial) == ["rs b"]
    # a missing source makes its dependants unstored too
    only_b = RunStore(tmp_path / "only_b.jsonl", {"experiment": "x"})
    run_jobs([jobs[1]], fake_run_job, progress=False, store=only_b)
    assert unstored_jobs(jobs, only_b) == ["a", "rs a", "a again", "rs b"]


def test_unsatisfiable_dependencies_raise():
    jobs = [
        Job("a", "dp", dict(experiment="x", method="m", seed=0, setting=None), budget_from=1),
        Job("b", "dp", dict(experiment="x", method="m", seed=1, setting=None), budget_from=0),
    ]
    with cf.ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(RuntimeError, match="cannot be satisfied"):
        run_jobs(jobs, fake_run_job, executor=pool, progress=False)


def _comparable(runs: list[Run]) -> list[dict]:
    """Everything but wall times and the reuse flag."""
    out = []
    for r in runs:
        d = dataclasses.asdict(r)
        d.pop("wall_s")
        d["extra"] = {k: v for k, v in d["extra"].items() if k != "reused"}
        out.append(d)
    return out


@pytest.mark.timeout(300)
def test_worker_processes_and_a_thread_pool_give_the_serial_runs_of_paper_jobs():
    serial = quick_reproduction()
    settings = Settings.quick()
    runner = Runner(settings, serial["pilot"])
    # the μ sweep alone runs μ = 1 and ∞, which the serial run copied from the comparison's runs
    only = ("mu",)
    jobs = experiment_jobs(settings, serial["pilot"], only)
    assert len(jobs) == 3 and all(job.reuse_of is None for job in jobs)
    expected = _comparable([r for r in serial["runs"] if r.experiment in only])
    parallel = run_jobs(jobs, runner.execute, workers=2, progress=False)
    assert _comparable(parallel) == expected
    with torch_threads(1), cf.ThreadPoolExecutor(max_workers=1) as pool:  # threads share torch's thread count
        threaded = run_jobs(jobs, runner.execute, executor=pool, progress=False)
    assert _comparable(threaded) == expected
