"""benchmarks.mlp in quick mode, through the experiment contract: equal budgets within a
seed, every private run at its target (ε, δ) and reproducible jobs under seeded noise (the pilot:
test_mlp_pilot.py; the report: test_mlp_report.py)."""

import dataclasses
import json
import math
import pickle

import pytest

from benchmarks import mlp, mlp_task
from benchmarks.experiment import REQUIRED_MEMBERS, load_experiment
from benchmarks.jobs import job_kwargs
from botorch_dp.privacy.analysis.gdp import gdp_epsilon


@pytest.fixture
def quick(mlp_quick):
    return mlp_quick


def test_the_module_satisfies_the_contract(quick):
    assert load_experiment("mlp") is mlp and all(hasattr(mlp, m) for m in REQUIRED_MEMBERS)
    s = quick["settings"]
    assert isinstance(s.seeds, tuple) and isinstance(s.mus, tuple)
    json.dumps(dataclasses.asdict(s))
    json.dumps(quick["context"])
    run_job = pickle.loads(pickle.dumps(mlp.make_runner(s, quick["context"])))  # for process pools
    assert run_job.__self__.settings == s
    for job in quick["jobs"]:
        json.dumps(job.kwargs)
        assert all(d < quick["jobs"].index(job) for d in job.deps)


def test_every_method_of_a_seed_gets_dp_gibos_evaluations(quick):
    s, runs = quick["settings"], quick["runs"]
    d = mlp.search_space(s).dim
    assert d == 4
    budget = s.iterations * (d + 1)
    for seed in s.seeds:
        mine = [r for r in runs if r.seed == seed]
        assert {(r.method, r.setting) for r in mine} == (
            {(m, mu) for m in mlp_task.PRIVATE_METHODS for mu in s.mus}
            | {(m, math.inf) for m in mlp_task.REFERENCE_METHODS}
        )
        assert {r.num_evaluations for r in mine} == {budget}
        for r in mine:  # only the selections may realise another number of trials (a hidden K)
            if r.method in (mlp.PRIVATE_RS, mlp.DP_HYPO):
                assert r.extra["realized_trials_NON_PRIVATE"] >= 0
            else:
                assert r.evals[-1] == budget
                assert r.extra["trainings"] >= budget + 1  # the evaluations and the diagnostic model


def test_private_runs_spend_exactly_the_target_epsilon(quick):
    s = quick["settings"]
    for r in quick["runs"]:
        if r.method in mlp_task.PRIVATE_METHODS:
            assert r.epsilon == pytest.approx(gdp_epsilon(r.setting, s.target_delta), rel=1e-6)
        else:
            assert r.epsilon is None and math.isinf(r.setting)
    # a smaller μ means a smaller per-trial budget for both selections
    for method in (mlp.PRIVATE_RS, mlp.DP_HYPO):
        mu0 = {r.setting: r.extra["per_trial_mu"] for r in quick["runs"] if r.method == method and r.seed == 0}
        assert mu0[min(s.mus)] < mu0[max(s.mus)]


def test_released_hyperparameters_and_diagnostics_are_in_range(quick):
    space = mlp.search_space(quick["settings"])
    for r in quick["runs"]:
        for h in space.hyperparameters:
            assert h.lower * (1 - 1e-9) <= r.extra["hyperparameters"][h.name] <= h.upper * (1 + 1e-9)
        assert 0.0 <= r.extra["test_accuracy"] <= 1.0
        assert 0.0 <= r.final_loss <= quick["settings"].loss_cap
        assert r.losses[-1] == pytest.approx(r.final_loss, abs=1e-12)  # deterministic training


def test_jobs_are_deterministic_with_seeded_noise_and_not_without(quick):
    settings, context, jobs, runs = quick["settings"], quick["context"], quick["jobs"], quick["runs"]
    run_job = mlp.make_runner(settings, context)
    strip = lambda r: dataclasses.replace(r, wall_s=0.0)
    for kind in ("gibo", "dp_hypo"):
        i = next(i for i, j in enumerate(jobs) if j.kind == kind and j.kwargs["method"] != mlp.GIBO)
        assert strip(run_job(jobs[i].kind, job_kwargs(jobs[i], runs))) == strip(runs[i])
    fresh = mlp.make_runner(dataclasses.replace(settings, seeded_noise=False), context)
    a, b = (fresh(jobs[0].kind, jobs[0].kwargs) for _ in range(2))
    assert a.extra["hyperparameters"] != b.extra["hyperparameters"]  # OS-entropy noise differs between runs
