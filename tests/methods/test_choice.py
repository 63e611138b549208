r"""``botorch_dp.methods.choice``: the recommendation follows the proxy (DP-GIBO on a smooth
30-d quadratic with many users, private random search on a flat 2-d landscape with a narrow
basin), the evidence is recomputed by brute force from the kept losses, a method that cannot
reach the budget is listed with its reason, and ``plan_then_compare`` (through ``tune``'s
``tuning.mixed_methods.plan_and_compare``) keeps the comparison on the plan."""

import dataclasses
import math

import pytest
import torch

from botorch_dp.plan import (
    DEFAULT_METHODS,
    CandidateMethod,
    DPGIBOMethod,
    DPHyPOMethod,
    PrivateRandomSearchMethod,
    compare_methods,
)
from botorch_dp.tuning.mixed_methods import plan_and_compare
from tests.optim.loop_helpers import normal_location
from tests.plan.plan_helpers import N_PRIVATE, N_PROXY, D
from tests.plan.plan_helpers import plan_config as _config

from .method_helpers import narrow_basin, smooth_quadratic, uniform_mean_loss

LOCAL_AND_RANDOM = (DPGIBOMethod(), PrivateRandomSearchMethod())


def _compare(proxy, config, n, methods=LOCAL_AND_RANDOM, seeds=(1, 2, 3)):
    evaluations = config.num_iterations * config.batch_size
    return compare_methods(
        proxy, config, methods, num_users=n, num_proxy_users=200, evaluations=evaluations, seeds=seeds, progress=False
    )


def test_the_recommendation_changes_where_the_proxy_says_it_should():
    # smooth 30-d quadratic, n = 10,000: a uniform point's loss is about 2x θ₀'s, DP-GIBO descends
    proxy, config = smooth_quadratic()
    quadratic = _compare(proxy, config, 10_000)
    loss_at_theta0 = float(proxy(config.theta0.unsqueeze(0)).mean())
    assert uniform_mean_loss(proxy, config.bounds) > 1.5 * loss_at_theta0  # the closed form's premise
    assert quadratic.scores[quadratic.best].name == "dp_gibo"
    assert quadratic.scores[0].mean_proxy_loss < loss_at_theta0  # it did descend
    wins, diff, _ = quadratic.paired(1)
    assert wins == 3 and diff > 0
    # flat 2-d loss with a narrow basin 4 widths from θ₀: DP-GIBO cannot move, random points fall in
    proxy, config = narrow_basin()
    basin = _compare(proxy, config, 2_000)
    assert basin.scores[basin.best].name == "private_random_search"
    assert basin.scores[0].mean_proxy_loss > 0.99  # DP-GIBO stayed on the plateau
    wins, diff, _ = basin.paired(0)
    assert wins >= 2 and diff > 0.3
    assert isinstance(basin.recommended, PrivateRandomSearchMethod) and basin.recommended.mean_trials == 18


def test_the_evidence_is_the_kept_losses_and_an_unaffordable_method_says_why():
    proxy, config = narrow_basin()
    capped = DPHyPOMethod(max_mean_trials=10)  # E[K] = 18 is above the cap: not simulated
    comparison = _compare(
        proxy, config, 2_000, methods=(PrivateRandomSearchMethod(), capped, DPGIBOMethod()), seeds=(4, 5)
    )
    rs, hypo, _ = comparison.scores
    assert hypo.method is None and hypo.proxy_losses == () and "max_mean_trials = 10" in hypo.unavailable
    assert comparison.best == min((0, 2), key=lambda i: comparison.scores[i].mean_proxy_loss)
    best, other = comparison.scores[comparison.best], comparison.scores[2 - comparison.best]
    diffs = [b - a for a, b in zip(best.proxy_losses, other.proxy_losses, strict=True)]
    wins, diff, se = comparison.paired(2 - comparison.best)
    assert wins == sum(x > 0 for x in diffs) and diff == pytest.approx(sum(diffs) / 2, rel=1e-12)
    assert se == pytest.approx(abs(diffs[0] - diffs[1]) / 2, rel=1e-9)  # sd/√2 of two values
    assert rs.standard_error == pytest.approx(abs(rs.proxy_losses[0] - rs.proxy_losses[1]) / 2, rel=1e-9)
    table = comparison.table()
    assert table.count("\n") == 3 and "not run: dp_hypo" in table and f"{wins}/2" in table
    assert "recommended (*): " + best.name in str(comparison)
    with pytest.raises(ValueError, match="method='dp_hypo' cannot run here: .*max_mean_trials"):
        comparison.get("dp_hypo")
    with pytest.raises(ValueError, match="not among the planned candidates"):
        comparison.get("ucb")


def test_dp_hypo_runs_where_a_ratio_bound_reaches_the_budget():
    # at epsilon = 1 no ratio above 1.1 reaches (ε, δ) with E[K] = 6; the ladder takes 1.1
    proxy, config = narrow_basin()
    context_config = dataclasses.replace(config, num_iterations=2)
    hypo = _compare(proxy, context_config, 2_000, methods=(DPHyPOMethod(),), seeds=(1,)).scores[0]
    assert hypo.method is not None and hypo.method.ratio_bound == 1.1 and len(hypo.proxy_losses) == 1
    assert all(isinstance(m, CandidateMethod) for m in DEFAULT_METHODS)


def test_plan_then_compare_keeps_the_comparison_with_fresh_paired_seeds():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    plan = plan_and_compare(
        proxy,
        _config(),
        num_users=N_PRIVATE,
        clip_quantiles=(0.9,),
        step_sizes=(0.5,),
        num_repeats=2,
        progress=False,
        methods=LOCAL_AND_RANDOM,
    )
    comparison = plan.methods
    assert [s.name for s in comparison.scores] == ["dp_gibo", "private_random_search"]
    gibo = comparison.scores[0]
    assert gibo.method.config is plan.config and len(gibo.proxy_losses) == 2
    # the comparison's repeats are not the ones the settings were chosen on (no winner's curse)
    assert gibo.proxy_losses != plan.trials[plan.best].proxy_losses
    assert comparison.context.evaluations == plan.trials[plan.best].num_evaluations == 2 * 3
    assert comparison.context.epsilon == pytest.approx(1.0, rel=1e-9) and comparison.context.delta == 1e-5
    assert plan.recommended_method is comparison.recommended and "method choice on the proxy" in str(plan)
    rs = comparison.scores[1].method
    assert rs.mean_trials == 6 and math.isfinite(rs.loss_clip) and rs.epsilon == comparison.context.epsilon
    # the recommendation is the lowest mean
    assert comparison.best == min(range(2), key=lambda i: comparison.scores[i].mean_proxy_loss)
    assert torch.equal(rs.bounds, plan.config.bounds)
