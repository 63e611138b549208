"""scripts/profile_dp_gibo.py: the timing wrappers change nothing the run computes, the
breakdown adds up, and the patched functions are restored."""

import warnings

import pytest
import torch
from helpers import loaded_script

import botorch_dp.optim.batch_selection as batch_selection
import botorch_dp.optim.dp_gibo as dp_gibo
from botorch_dp import DPGIBO
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

SMALL = dict(iterations=2, clip=3.0, n_total=40)


@pytest.fixture(scope="module")
def profile_dp_gibo():
    with loaded_script("profile_dp_gibo") as module:
        yield module


def test_timed_run_equals_a_plain_run_and_restores_the_patches(profile_dp_gibo):
    originals = [
        dp_gibo.select_batch, batch_selection.optimize_acqf, batch_selection.posterior_trace,
        DPGIBO.__dict__["tell"], GradientGP.__dict__["condition_on"], GradientGP.__dict__["gradient_weights"],
        GaussianGradientMechanism.__dict__["release"],
    ]
    run = profile_dp_gibo.profile_run(3, 0, cprofile=False, **SMALL)
    optimizer, problem = profile_dp_gibo.make_run(3, 0, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = optimizer.run(problem, progress=False).release
    assert run["batch_sizes"] == plain.batch_sizes
    assert torch.equal(run["final_theta"], plain.theta)  # same seed, same bits
    assert originals == [
        dp_gibo.select_batch, batch_selection.optimize_acqf, batch_selection.posterior_trace,
        DPGIBO.__dict__["tell"], GradientGP.__dict__["condition_on"], GradientGP.__dict__["gradient_weights"],
        GaussianGradientMechanism.__dict__["release"],
    ]
    parts, calls = run["parts"], run["calls"]
    assert calls["batch selection"] == calls["tell"] == calls["mechanism"] == SMALL["iterations"]
    assert calls["objective"] == sum(b > 0 for b in run["batch_sizes"])
    assert parts["optimize_acqf"] + parts.get("posterior trace", 0.0) <= parts["batch selection"]
    assert parts["gradient weights"] + parts["mechanism"] <= parts["tell"]
    assert calls["GP conditioning*"] >= calls["tell"]  # also inside the batch selection
    assert parts["batch selection"] + parts["objective"] + parts["tell"] <= run["total"]
    assert run["evaluations"] == sum(run["batch_sizes"]) == plain.evaluation_points.shape[0]


def test_main_prints_the_breakdown(profile_dp_gibo, capsys):
    profile_dp_gibo.main(["--dims", "2", "--iterations", "2", "--n-total", "40", "--threads", "1", "--verbose"])
    out = capsys.readouterr().out
    for line in ("d = 2, seed 0:", "optimize_acqf", "GP conditioning*", "objective", "step   2:", "without the objective"):
        assert line in out
