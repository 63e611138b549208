"""scripts/profile_dp_gibo.py: the timing wrappers change nothing the run computes, the
breakdown adds up, and the patched functions are restored; the cheap task's losses are ridge
fits' squared errors, the Adam reference arm optimises the trace reduction in the box, and the
side-by-side arms are interleaved and reported."""

import json
import warnings

import numpy as np
import pytest
import torch

import botorch_dp.optim.options.batches as batches
from botorch_dp import DPGIBO
from botorch_dp.gradient_gp import GradientGP
from botorch_dp.optim.options import FixedBatches
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
        batches.optimize_acqf,
        batches.posterior_trace,
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
        batches.optimize_acqf,
        batches.posterior_trace,
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
        "d = 2, seed 0, default:",
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


def test_group_ridge_losses_are_the_ridge_fits_squared_errors(profile_dp_gibo):
    # independent computation: the ridge fit as least squares on the augmented rows [X; diag(√λ)]
    problem = profile_dp_gibo.GroupRidge(3, 0, n_train=20, num_users=7)
    assert problem.dim == 3 and problem.num_users == 7 and torch.equal(problem.bounds[1], torch.ones(3).double())
    X = torch.tensor([[0.1, 0.5, 0.9], [0.0, 1.0, 0.3]], dtype=torch.float64)
    losses = problem(X)
    assert losses.shape == (2, 7)
    for j in range(2):
        lam = (10.0 ** (-2.0 + 6.0 * X[j])).repeat_interleave(2).numpy()  # λ_g for both features of group g
        A = np.vstack([problem.train_X.numpy(), np.diag(np.sqrt(lam))])
        b = np.concatenate([problem.train_y.numpy(), np.zeros(6)])
        w = np.linalg.lstsq(A, b, rcond=None)[0]
        expected = (problem.val_X.numpy() @ w - problem.val_y.numpy()) ** 2
        np.testing.assert_allclose(losses[j].numpy(), expected, rtol=1e-8, atol=1e-12)
    assert profile_dp_gibo.GroupRidge(3, 1).recommended_kernel().base_kernel.lengthscale.eq(0.2).all()


def test_adam_reference_is_a_seeded_box_bound_design_optimizer(profile_dp_gibo):
    problem = profile_dp_gibo.GroupRidge(2, 0)
    theta = torch.tensor([0.5, 0.4], dtype=torch.float64)
    gp = GradientGP(torch.tensor([[0.45, 0.4], [0.5, 0.5]], dtype=torch.float64), problem.recommended_kernel())
    box = batches.local_bounds(theta, torch.full((2,), 0.1, dtype=torch.float64), problem.bounds)

    def search(steps):
        return profile_dp_gibo.adam_batch(gp, theta, box, torch.Generator().manual_seed(3), batch_size=3, steps=steps)

    start, X = search(0), search(100)
    assert X.shape == (3, 2) and torch.equal(X, search(100))  # the search generator alone decides
    assert ((X >= box[0]) & (X <= box[1])).all()
    before = batches.posterior_trace(gp, theta, start)
    after = batches.posterior_trace(gp, theta, X)
    assert after < 0.9 * before  # Adam raised the trace reduction well above the random start's
    with pytest.raises(ValueError, match="fixed batches"):
        profile_dp_gibo.adam_batch(gp, theta, box, torch.Generator(), batch_size=3, bias_tolerance=0.1)


def test_arms_run_side_by_side_and_write_the_report(profile_dp_gibo, tmp_path, capsys):
    original = batches.search_batch
    out = tmp_path / "cmp"
    argv = ["--task", "cheap", "--dims", "2", "--seeds", "0", "1", "--iterations", "2", "--threads", "1"]
    profile_dp_gibo.main([*argv, "--arms", "default", "adam", "fast_search", "--out", str(out)])
    assert batches.search_batch is original
    data = json.loads(out.with_suffix(".json").read_text())
    assert {k for k in ("command", "machine", "threads", "date", "load_start") if data.get(k) is not None} == {
        "command",
        "machine",
        "threads",
        "date",
        "load_start",
    }
    assert data["threads"] == 1 and data["arms"] == ["default", "adam", "fast_search"]
    runs = data["runs"]
    assert [(r["seed"], r["arm"]) for r in runs] == [
        (0, "default"),
        (0, "adam"),
        (0, "fast_search"),
        (1, "fast_search"),
        (1, "adam"),
        (1, "default"),
    ]  # interleaved, the order reversed from seed to seed
    for r in runs:
        assert r["evaluations"] == 2 * 3 and r["own"] == pytest.approx(r["total"] - r["objective"])
    adam = [r for r in runs if r["arm"] == "adam"]
    assert all(r["acquisition_evaluations"] == 2 * profile_dp_gibo.ADAM_STEPS for r in adam)
    md = out.with_suffix(".md").read_text()
    assert "| 2 | adam | 2 |" in md and "| 2 | fast_search | 2 |" in md and data["command"] in md
    assert "load average" in md and "torch threads 1" in md
    with pytest.raises(ValueError, match="arm must be one of"):
        profile_dp_gibo.profile_run(2, 0, iterations=1, clip=2.0, n_total=0, cprofile=False, task="cheap", arm="x")


def test_cheap_task_uses_tunes_settings_and_the_search_options_reach_the_config(profile_dp_gibo):
    from botorch_dp.tuning.one_call import TUNE_DEFAULTS

    optimizer, problem = profile_dp_gibo.make_run(4, 0, iterations=3, clip=2.0, n_total=0, task="cheap")
    c = optimizer.config
    assert isinstance(problem, profile_dp_gibo.GroupRidge) and c.num_iterations == 3
    for field in ("clip", "step_size", "step_rule", "noise_variance"):
        assert getattr(c, field) == TUNE_DEFAULTS[field], field
    assert c.batches == FixedBatches(None, "joint", None)
    greedy, _ = profile_dp_gibo.make_run(
        4, 0, iterations=3, clip=2.0, n_total=0, task="cheap", batch_search="greedy", acqf_speed="reference"
    )
    assert (greedy.config.batches.search, greedy.config.batches.speed) == ("greedy", "reference")
    with pytest.raises(ValueError, match="batch_search must be one of"):
        profile_dp_gibo.make_run(4, 0, iterations=3, clip=2.0, n_total=0, task="cheap", batch_search="x")
