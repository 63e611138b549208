"""scripts/profile_dp_gibo.py: the timing wrappers change nothing the run computes, the
breakdown adds up, and the patched functions are restored."""

import warnings

import pytest
import torch

import botorch_dp.optim.batch_search as batch_search
import botorch_dp.optim.options.batches as batches
from botorch_dp import DPGIBO
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism
from tests.helpers import loaded_script

SMALL = dict(iterations=2, clip=3.0, n_total=40)


@pytest.fixture(scope="module")
def profile_dp_gibo():
    with loaded_script("profile_dp_gibo") as module:
        yield module


def test_timed_run_equals_a_plain_run_and_restores_the_patches(profile_dp_gibo):
    originals = [
        batches.search_batch,
        batch_search.optimize_acqf,
        batch_search.posterior_trace,
        DPGIBO.__dict__["tell"],
        GradientGP.__dict__["condition_on"],
        GradientGP.__dict__["gradient_weights"],
        GaussianGradientMechanism.__dict__["release_sum"],
    ]
    run = profile_dp_gibo.profile_run(3, 0, cprofile=False, **SMALL)
    optimizer, problem = profile_dp_gibo.make_run(3, 0, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = optimizer.run(problem, progress=False).release
    assert run["batch_sizes"] == plain.batch_sizes
    assert torch.equal(run["final_theta"], plain.theta)  # same seed, same bits
    assert originals == [
        batches.search_batch,
        batch_search.optimize_acqf,
        batch_search.posterior_trace,
        DPGIBO.__dict__["tell"],
        GradientGP.__dict__["condition_on"],
        GradientGP.__dict__["gradient_weights"],
        GaussianGradientMechanism.__dict__["release_sum"],
    ]
    parts, calls = run["parts"], run["calls"]
    assert calls["batch search"] == calls["tell"] == calls["mechanism"] == SMALL["iterations"]
    assert calls["objective"] == sum(b > 0 for b in run["batch_sizes"])
    assert parts["optimize_acqf"] + parts.get("posterior trace", 0.0) <= parts["batch search"]
    assert parts["gradient weights"] + parts["mechanism"] <= parts["tell"]
    assert calls["GP conditioning*"] >= calls["tell"]  # also inside the batch search
    assert parts["batch search"] + parts["objective"] + parts["tell"] <= run["total"]
    assert run["evaluations"] == sum(run["batch_sizes"]) == plain.evaluation_points.shape[0]


def test_main_prints_the_breakdown(profile_dp_gibo, capsys):
    profile_dp_gibo.main(["--dims", "2", "--iterations", "2", "--n-total", "40", "--threads", "1", "--verbose"])
    out = capsys.readouterr().out
    for line in (
        "d = 2, seed 0:",
        "optimize_acqf",
        "GP conditioning*",
        "objective",
        "step   2:",
        "without the objective",
    ):
        assert line in out


def test_dimension_task_is_the_experiments_dp_gibo_job(profile_dp_gibo):
    # --task dimension times the same run the dimension experiment's Runner makes
    from benchmarks import dimension

    run = profile_dp_gibo.profile_run(2, 0, cprofile=False, iterations=2, clip=0.7, n_total=0, task="dimension")
    settings = dimension.Settings(iterations=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job = dimension.Runner(settings, {"pilot": {"2": {"clip_bound": 0.7}}}).gibo(2, 0, "dp_gibo")
    assert run["batch_sizes"] == job.extra["batch_sizes"] == [3, 3]
    # the job evaluates every iterate in one batch, the script only the last: equal up to round-off
    assert run["final_loss"] == pytest.approx(job.final_loss, rel=1e-10, abs=0)
    other = dimension.Runner(settings, {"pilot": {"2": {"clip_bound": 0.2}}}).gibo(2, 0, "dp_gibo")
    assert other.final_loss != pytest.approx(job.final_loss, rel=1e-6)  # B reaches the run
    with pytest.raises(ValueError, match="task must be"):
        profile_dp_gibo.make_run(2, 0, iterations=2, clip=0.7, n_total=0, task="svm")
