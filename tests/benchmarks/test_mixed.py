"""benchmarks.mixed in quick mode through the CLI's ``run_experiment`` into a tmp run store:
every method of every seed runs end to end with tune's evaluation budget, the private runs hold
their target ε, the natural hyperparameters are plain values of the space, and a second call
resumes from the store without running anything (the report: test_mixed_report.py)."""

import dataclasses
import json
import math
import pickle
import warnings

import pytest
import torch

from benchmarks import mixed
from benchmarks.cli import run_experiment
from benchmarks.experiment import REQUIRED_MEMBERS, load_experiment

pytestmark = pytest.mark.slow  # one quick run of every method (about a minute on one core)


@pytest.fixture
def quick(mixed_quick):
    return mixed_quick


def test_the_module_satisfies_the_contract(quick):
    assert load_experiment("mixed") is mixed and all(hasattr(mixed, m) for m in REQUIRED_MEMBERS)
    s = quick["settings"]
    json.dumps(dataclasses.asdict(s))
    json.dumps(quick["context"])
    run_job = pickle.loads(pickle.dumps(mixed.make_runner(s, quick["context"])))
    assert run_job.__self__.settings == s
    for i, job in enumerate(quick["jobs"]):
        json.dumps(job.kwargs)
        assert all(d < i for d in job.deps)


def test_every_method_of_a_seed_runs_with_tunes_budget(quick):
    s, runs = quick["settings"], quick["runs"]
    K, d = 4, mixed.search_space(s).dim
    budget = K * s.iterations * (d + 1) + K  # every configuration's run, then its scored final point
    for seed in s.seeds:
        mine = [r for r in runs if r.seed == seed]
        assert {(r.method, r.setting) for r in mine} == (
            {(m, e) for m in mixed.PRIVATE_METHODS for e in s.epsilons}
            | {(m, math.inf) for m in mixed.REFERENCE_METHODS}
        )
        assert {r.num_evaluations for r in mine} == {budget}
        tune_runs = [r for r in mine if r.method == mixed.TUNE]
        assert all(r.extra["trainings"] == budget for r in tune_runs)  # tune trained exactly what it counted
        for r in mine:
            if r.method in (mixed.RANDOM, mixed.MIXED_BO):
                assert r.extra["trainings"] == budget + 1  # the budget, then the released point's diagnostic


def test_the_private_runs_hold_their_target_epsilon(quick):
    for r in quick["runs"]:
        if r.method in mixed.PRIVATE_METHODS:
            assert r.epsilon is not None and r.epsilon <= r.setting * (1 + 1e-9)
            assert r.epsilon >= 0.95 * r.setting  # calibrated to the target, not far below it
        else:
            assert r.epsilon is None


def test_hyperparameters_are_plain_values_of_the_mixed_space(quick):
    s = quick["settings"]
    for r in quick["runs"]:
        h = r.extra["hyperparameters"]
        assert h["optimizer"] in ("sgd", "adam") and h["activation"] in ("relu", "tanh")
        assert type(h["width"]) is int and s.width_low <= h["width"] <= s.width_high
        assert 1e-4 * (1 - 1e-9) <= h["lr"] <= 0.3 * (1 + 1e-9) and 0.0 <= h["dropout"] <= 0.5
        if r.method == mixed.TUNE:
            assert {k: h[k] for k in ("optimizer", "activation")} == r.extra["chosen_configuration"]
            scores = r.extra["noisy_scores"]  # the released scores: the chosen one is their argmin
            assert len(scores) == 4


def test_the_chosen_configuration_is_the_argmin_of_the_released_scores(quick):
    space = mixed.search_space(quick["settings"])
    for r in quick["runs"]:
        if r.method == mixed.TUNE:
            winner = space.configurations()[int(torch.tensor(r.extra["noisy_scores"]).argmin())]
            assert winner == r.extra["chosen_configuration"]


def test_a_second_call_resumes_from_the_store(quick):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = run_experiment("mixed", quick["settings"], quick["out"], progress=False, command="again", threads=1)
    assert again["ran"] == 0 and again["stored"] == len(quick["jobs"])
    assert [dataclasses.asdict(r) for r in again["runs"]] == [dataclasses.asdict(r) for r in quick["runs"]]
