r"""``plan.budget``: the planning cut to a budget in seconds from a cost estimate (issue 43 item 2). The
estimate's arithmetic is checked by hand, every cut against the budget, and the least planning (no
simulated setting) against ``plan_private_run`` itself."""

import math
import warnings

import pytest

from botorch_dp.plan import plan_private_run, planned_simulations
from botorch_dp.plan.budget import CostEstimate, budgeted_options, check_plan_budget
from tests.plan.plan_helpers import N_PRIVATE, plan_config
from tests.plan.test_cache import Counting

ESTIMATE = CostEstimate(
    seconds_per_row=0.01, seconds_per_step=0.1, num_configurations=3, num_iterations=10, batch_size=4, fit_points=20
)


def test_the_estimate_is_the_closed_form_of_its_parts():
    run = 10 * (4 * 0.01 + 0.1) + 0.01  # T (b t_row + t_step) + the scored point
    assert ESTIMATE.run() == pytest.approx(run) and ESTIMATE.private_run() == pytest.approx(3 * run)
    selection = 3 * (10 * 4 + 1) * 0.01
    assert ESTIMATE.selection() == pytest.approx(selection)
    fit, probe = 20 * 0.01 + 10 * 0.1, 4 * 0.01 + 0.1
    # as given: 9 settings (3 quantiles x 3 step sizes) + the baseline, 3 repeats, two probes; 3 methods
    full = 3 * (fit + 2 * probe + 10 * 3 * run) + 3 * (3 * run + 2 * selection)
    assert ESTIMATE.planning({}, 3) == pytest.approx(full)
    least = {"search_settings": False, "baseline": False, "num_repeats": 1}
    assert ESTIMATE.planning(least, 0) == pytest.approx(3 * (fit + probe))


def test_the_first_cut_that_fits_is_taken_and_said():
    config, full = plan_config(), ESTIMATE.planning({}, 3)
    chosen = []
    for budget in (0.5, 3.0, 6.0, 10.0, 20.0, 40.0, 80.0, 200.0, 400.0, full):
        options, compare, note = budgeted_options(
            config, None, budget=budget, estimate=ESTIMATE, num_methods=3, may_skip_comparison=True
        )
        estimated = ESTIMATE.planning(options, 3 if compare else 0)
        if budget >= full:
            assert note is None and options == {} and compare
        elif "still exceeds" not in note:
            assert estimated <= budget and f"plan_budget = {budget:.3g} s" in note
        else:  # the least there is: no simulated setting, 1 repeat, no comparison
            assert not compare and options["search_settings"] is False and options["num_repeats"] == 1
        chosen.append(estimated)
    assert chosen == sorted(chosen) and len(set(chosen)) >= 4  # a larger budget never plans less


def test_without_the_opt_in_the_comparison_is_never_cut():
    options, compare, note = budgeted_options(
        plan_config(), None, budget=1e-6, estimate=ESTIMATE, num_methods=3, may_skip_comparison=False
    )
    assert compare and options["num_repeats"] == 1 and "still exceeds" in note


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "10", [1]])
def test_a_bad_budget_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="plan_budget"):
        check_plan_budget(bad)
    assert check_plan_budget(None) is None and check_plan_budget("auto") == "auto" and check_plan_budget(2) == 2.0


def test_the_least_planning_simulates_no_setting_and_recommends_the_middle_one():
    proxy = Counting()
    config = plan_config()
    options = dict(clip_quantiles=(0.25, 0.5, 0.9), search_settings=False, baseline=False, choose_method=False)
    assert planned_simulations(config, **options) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_private_run(proxy, config, num_users=N_PRIVATE, progress=False, **options)
    (trial,) = plan.trials
    assert trial.proxy_losses == () and math.isnan(trial.mean_proxy_loss) and plan.given is None
    assert trial.clip_quantile == 0.5 and plan.config.clip_bound == plan.norm_quantiles[0.5]
    assert trial.step_size == config.step_size and trial.num_evaluations == config.max_evaluations
    # the proxy saw the kernel fit's points and the probe's first batch only: no simulated run
    assert proxy.rows == plan.kernel_fit.points.shape[0] + plan.gradient_points.shape[0]
    assert "nan" in plan.table()


@pytest.mark.parametrize("fit_kernel", [True, False])
def test_timing_the_proxy_costs_no_evaluation_the_planning_would_not_make(fit_kernel):
    from botorch_dp.plan.budget import measure_costs
    from botorch_dp.plan.cache import ProxyCache

    config = plan_config()
    options = dict(search_settings=False, baseline=False, choose_method=False, fit_kernel=fit_kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = Counting()
        plan_private_run(alone, config, num_users=N_PRIVATE, progress=False, **options)
        proxy, cache = Counting(), ProxyCache()
        estimate = measure_costs(cache.objective(proxy), config, num_configurations=1, fit_kernel=fit_kernel)
        timed = proxy.rows
        plan_private_run(cache.objective(proxy), config, num_users=N_PRIVATE, progress=False, **options)
    assert timed == estimate.batch_size > 0 and proxy.rows == alone.rows  # the timed points were reused
    assert estimate.seconds_per_row > 0 and estimate.seconds_per_step > 0


@pytest.mark.parametrize("name", ["baseline", "search_settings"])
def test_the_planning_flags_are_refused_by_name_unless_booleans(name):
    proxy = Counting()
    with pytest.raises(ValueError, match=f"{name} must be True or False, got 'no'"):
        plan_private_run(proxy, plan_config(), num_users=N_PRIVATE, progress=False, **{name: "no"})
    assert proxy.rows == 0  # refused before the proxy is called
