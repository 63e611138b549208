"""benchmarks.runs: the Run record and the summaries of runs."""

import dataclasses
import math

import pytest
import torch

from benchmarks.runs import (
    Run,
    format_mean_se,
    format_mu,
    group_by_method,
    iterate_curve,
    mean_se,
    num_seeds,
    round_sig,
    step_interp,
)
from botorch_dp.baselines import random_search
from botorch_dp.problems import NormalLocation


def _run(experiment="e", method="m", seed=0, final=1.0) -> Run:
    return Run(experiment, method, seed, None, [0, 1], [2.0, final], final, 1, 0.1)


def test_mean_se_and_formatting():
    m, se = mean_se([1.0, 2.0, 3.0])
    assert m == 2.0 and se == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(mean_se([5.0])[1])
    assert format_mean_se([1.0, 2.0, 3.0]) == "2 ± 0.58"
    assert format_mean_se([0.123456]) == "0.1235" and format_mean_se([0.123456], 3) == "0.123"
    assert format_mu(math.inf) == "∞" and format_mu(0.5) == "0.5"
    assert round_sig(0.36789) == 0.37


def test_step_interp_takes_the_latest_choice_within_the_budget():
    evals, losses = [2, 5, 9], [3.0, 2.0, 1.0]
    out = step_interp(evals, losses, [0, 2, 4, 5, 8, 9, 100])
    assert math.isnan(out[0])
    assert out[1:] == [3.0, 3.0, 2.0, 2.0, 1.0, 1.0]


def test_group_by_method_keeps_first_appearance_order_and_counts_seeds():
    runs = [_run(method="b", seed=0), _run(method="a", seed=0), _run(method="b", seed=1), _run("other", "c", 7)]
    groups = group_by_method(runs, "e")
    assert list(groups) == ["b", "a"] and [r.seed for r in groups["b"]] == [0, 1]
    assert num_seeds(runs, "e") == 2 and num_seeds(runs, "e", "other") == 3


def test_iterate_curve_is_the_noise_free_loss_of_each_iterate():
    problem = NormalLocation(seed=0)
    result = random_search(problem, problem.bounds, num_evaluations=6, seed=0)
    evals, losses = iterate_curve(problem, result)
    assert evals == [int(e) for e in result.history.evaluations]
    expected = problem.objective(result.history.iterates).tolist()
    assert losses == pytest.approx(expected, rel=1e-12)
    assert losses == sorted(losses, reverse=True)  # best so far


def test_run_round_trips_through_a_dict():
    run = _run()
    run.extra["batch_sizes"] = [3, 4]
    assert Run(**dataclasses.asdict(run)) == run
    assert torch.tensor(run.losses).shape == (2,)
