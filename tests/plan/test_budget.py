r"""``plan.budget``: the planning cut to a budget in seconds from a cost estimate (issue 43 item 2). The
estimate's arithmetic is checked by hand, every cut against the budget, and the least planning (no
simulated setting) against ``plan_private_run`` itself."""

import itertools
import math
import warnings

import pytest

import botorch_dp.plan.budget as budget_module
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.plan import plan_private_run, planned_simulations
from botorch_dp.plan.budget import (
    AUTO_SHARE,
    CAPPED_FIT_EVALUATIONS,
    FIT_EVALUATIONS,
    FIT_STEPS,
    SCALE_FIT_EVALUATIONS,
    CostEstimate,
    auto_budget,
    budgeted_options,
    check_plan_budget,
    measure_costs,
)
from botorch_dp.plan.cache import ProxyCache
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
    # the fit's cuts: prorated to the capped evaluations, then nothing
    capped = 20 * 0.01 + 10 * 40 / 60 * 0.1
    assert ESTIMATE.fit({"kernel_fit_evaluations": 40}) == pytest.approx(capped)
    assert ESTIMATE.fit({"kernel_fit_evaluations": 600}) == pytest.approx(fit)  # never above an uncapped fit
    assert ESTIMATE.planning({**least, "fit_kernel": False}, 0) == pytest.approx(3 * probe)
    # "auto": half the private run less the estimate's own time, never below 0
    timed = CostEstimate(0.01, 0.1, 3, 10, 4, 20, seconds_measuring=0.5)
    assert auto_budget(timed) == pytest.approx(AUTO_SHARE * 3 * run - 0.5) and AUTO_SHARE == 0.5
    assert auto_budget(CostEstimate(0.01, 0.1, 3, 10, 4, 20, seconds_measuring=1e3)) == 0.0


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
        else:  # the least there is: no simulated setting, 1 repeat, no comparison, no kernel fit
            assert not compare and options["search_settings"] is False and options["num_repeats"] == 1
            assert options["kernel_fit_lengthscales"] is False
            assert options["kernel_fit_evaluations"] == SCALE_FIT_EVALUATIONS
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
    options = dict(clip_quantiles=(0.25, 0.5, 0.9), search_settings=False, baseline=False)
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
    options = dict(search_settings=False, baseline=False, fit_kernel=fit_kernel)
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


def test_the_fit_is_cut_after_the_comparison_shorter_first_then_to_its_scale_and_never_altogether():
    config, least = plan_config(), dict(search_settings=False, baseline=False, num_repeats=1)
    no_comparison = ESTIMATE.planning(least, 0)
    capped = ESTIMATE.planning({**least, "kernel_fit_evaluations": CAPPED_FIT_EVALUATIONS}, 0)
    scale = {"kernel_fit_evaluations": SCALE_FIT_EVALUATIONS, "kernel_fit_lengthscales": False}
    assert ESTIMATE.planning({**least, **scale}, 0) < capped < no_comparison
    expected = {no_comparison * 1.001: {}, capped * 1.001: {"kernel_fit_evaluations": CAPPED_FIT_EVALUATIONS}}
    for budget, fit in {**expected, 1e-6: scale}.items():
        options, compare, note = budgeted_options(
            config, None, budget=budget, estimate=ESTIMATE, num_methods=3, may_skip_comparison=True
        )
        assert not compare and "no method comparison" in note
        assert {k: options[k] for k in scale if k in options} == fit and "fit_kernel" not in options
    assert "outputscale and noise only" in note and "still exceeds" in note
    # without the fit's cuts (a public rule then picks a method without a plan) the comparison's cut is the last
    options, _, note = budgeted_options(
        config, None, budget=1e-6, estimate=ESTIMATE, num_methods=3, may_skip_comparison=True, fit_cuts=False
    )
    assert "kernel_fit_evaluations" not in options and "kernel fit" not in note and "still exceeds" in note
    # a planning given without a fit, or with the length-scales kept, has no fit to cut
    for given in ({"fit_kernel": False}, {"kernel_fit_lengthscales": False}):
        options, _, note = budgeted_options(
            config, given, budget=1e-6, estimate=ESTIMATE, num_methods=0, may_skip_comparison=False
        )
        assert "kernel fit" not in note and "kernel_fit_evaluations" not in options


T_ROW, T_STEP = 0.01, 0.1  # what the mocked clock charges a proxy row and a DP-GIBO ask


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    r"""A clock that moves only when the planning computes what the estimate counts: ``T_ROW`` per proxy row,
    ``T_STEP`` per DP-GIBO ask, and ``FIT_STEPS / FIT_EVALUATIONS`` steps per likelihood evaluation of a fit."""
    from gpytorch.mlls import ExactMarginalLogLikelihood

    clock = _Clock()
    ask, forward = DPGIBO.ask, ExactMarginalLogLikelihood.forward

    def timed_ask(self, *args, **kwargs):
        clock.now += T_STEP
        return ask(self, *args, **kwargs)

    def timed_forward(self, *args, **kwargs):
        clock.now += T_STEP * FIT_STEPS / FIT_EVALUATIONS
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(budget_module, "time", clock)
    monkeypatch.setattr(DPGIBO, "ask", timed_ask)
    monkeypatch.setattr(ExactMarginalLogLikelihood, "forward", timed_forward)
    return clock


class _Timed(Counting):
    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def __call__(self, X):
        self.clock.now += T_ROW * len(X)
        return super().__call__(X)


def test_on_a_mocked_clock_the_budgeted_planning_stays_within_its_budget(clock):
    config = plan_config()
    spent, cuts, fits = {}, set(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for budget in (1.9, 1.4, 1.0, 0.7, 0.05):
            cached = ProxyCache().objective(_Timed(clock))  # the planning's memo: the timed points are reused
            estimate = measure_costs(cached, config, num_configurations=1)
            assert (estimate.seconds_per_row, estimate.seconds_per_step) == pytest.approx((T_ROW, T_STEP))
            options, _, note = budgeted_options(
                config, None, budget=budget, estimate=estimate, num_methods=0, may_skip_comparison=False
            )
            start = clock.now
            plan_private_run(cached, config, num_users=N_PRIVATE, progress=False, **options)
            spent[budget] = clock.now - start
            cuts.add(note.split(": planned with ")[1].split("; estimated")[0])
            fits.append((options.get("kernel_fit_evaluations"), options.get("kernel_fit_lengthscales", True)))
            if "still exceeds" not in note:
                assert spent[budget] <= budget, (budget, note)
    assert spent[0.05] <= estimate.planning(options, 0)  # the least planning costs at most its estimate
    assert len(cuts) == 4  # each budget but the last two (both at the least planning) cut differently
    scale = (SCALE_FIT_EVALUATIONS, False)
    assert fits == [(None, True), (None, True), (CAPPED_FIT_EVALUATIONS, True), scale, scale]
    in_order = list(spent.values())  # the budgets from the largest down
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(in_order))  # a smaller budget never plans more


def test_on_a_tiny_task_the_least_fitted_planning_keeps_the_full_plan_s_kernel_and_middle_bound():
    r"""Where the fit converges within ``CAPPED_FIT_EVALUATIONS`` (here in about 20), the budget's shorter fit is
    the full fit, so the minimal planning recommends the full plan's kernel and its middle clip candidate."""
    config = plan_config()
    least = budgeted_options(
        config, None, budget=ESTIMATE.planning(dict(search_settings=False, baseline=False, num_repeats=1,
                                                    kernel_fit_evaluations=CAPPED_FIT_EVALUATIONS), 0) * 1.001,
        estimate=ESTIMATE, num_methods=0, may_skip_comparison=False,
    )[0]  # fmt: skip
    assert least["kernel_fit_evaluations"] == CAPPED_FIT_EVALUATIONS and least["search_settings"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = plan_private_run(Counting(), config, num_users=N_PRIVATE, progress=False,
                                step_sizes=(config.step_size,), baseline=False, num_repeats=1)  # fmt: skip
        small = plan_private_run(Counting(), config, num_users=N_PRIVATE, progress=False, **least)
    for name, values in full.kernel_fit.hyperparameters.items():
        assert small.kernel_fit.hyperparameters[name] == pytest.approx(values, rel=1e-9, abs=1e-12)
    assert small.config.clip_bound == pytest.approx(full.norm_quantiles[0.5], rel=1e-9)
    assert small.config.step_size == full.trials[1].step_size and len(full.trials) == 3
