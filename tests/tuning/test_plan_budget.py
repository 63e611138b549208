r"""``tune(plan_budget=...)``: a budget in seconds cuts the planning on the proxy before it starts and
says so; ``None`` plans as given; without a proxy only the default is accepted (issue 43 item 2)."""

import warnings

import pytest

from botorch_dp import tune
from tests.tuning.test_mixed_methods import PLAN, SETTINGS, SPACE, _problem


def _tune(**kw):
    log = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tune(
            _problem("bowl", 300, 1, log, "private"),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            progress=False,
            proxy=_problem("bowl", 100, 0, log, "proxy"),
            num_users=300,
            **{**SETTINGS, "num_iterations": 2},
            **kw,
        )


def test_a_budget_too_small_for_any_comparison_runs_the_public_rule_and_says_what_was_cut():
    result = _tune(plan_options=dict(PLAN), plan_budget=1e-6)
    # no comparison: the rule of tune without a proxy picks (the space has a categorical: private random search)
    assert result.method == "private_random_search"
    assert result.method_rule.startswith("the planning budget left no room to compare methods on the proxy;")
    assert "private random search, since the space has" in result.method_rule
    # DP-GIBO's settings are of no use to a selection: the proxy was not used past the timing
    assert "no method comparison (private random search by the public rule" in result.planning
    assert all(run.plan is None for run in result.runs)
    assert result.planning.startswith("plan_budget = 1e-06 s: planned with 2 repeats;")
    assert "no method comparison" in result.planning and "still exceeds the budget" in result.planning
    assert result.planning in repr(result)


def test_no_budget_plans_as_given():
    result = _tune(plan_options=dict(PLAN, num_repeats=2), plan_budget=None)
    assert result.planning is None and result.methods is not None
    assert all(len(s.proxy_losses) == 2 for s in result.methods.scores if s.method is not None)


def test_a_budget_without_a_proxy_is_refused_by_name():
    with pytest.raises(ValueError, match=r"plan_budget=5\.0: there is no planning without proxy="):
        tune(lambda configs: None, SPACE, epsilon=1.0, delta=1e-5, plan_budget=5.0)
    with pytest.raises(ValueError, match="plan_budget must be 'auto', None"):
        tune(lambda configs: None, SPACE, epsilon=1.0, delta=1e-5, plan_budget="fast")
