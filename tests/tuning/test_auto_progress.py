r"""``method="auto"`` shows ONE progress bar over all of its planning on the proxy: its total is the
public count of planned simulations (``plan.planned_simulations``, checked here by hand), its lines
name the configuration and the method in hand, and no inner bar restarts from 0 (stderr captured:
off a terminal ``progress_bar`` writes plain lines)."""

import re
import warnings

from botorch_dp import tune
from botorch_dp.plan import DPGIBOMethod, PrivateRandomSearchMethod
from botorch_dp.tuning.method_runs import PLANNING
from tests.tuning.test_mixed_methods import PLAN, SETTINGS, SPACE, _problem


def test_auto_on_a_mixed_space_shows_one_bar_naming_configuration_and_method(capsys):
    log = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(
            _problem("bowl", 300, 1, log, "private"),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            progress=True,
            proxy=_problem("bowl", 100, 0, log, "proxy"),
            num_users=300,
            plan_options=dict(PLAN, num_repeats=2, methods=(DPGIBOMethod(), PrivateRandomSearchMethod())),
            **{**SETTINGS, "num_iterations": 2},
        )
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    planning = [line for line in err.splitlines() if line.startswith(PLANNING)]
    # K = 2 configurations x (1 setting + the given one) x 2 repeats, then 2 methods x 2 repeats
    total = 2 * (1 + 1) * 2 + 2 * 2
    assert len([line for line in planning if ", started," in line]) == 1
    assert len([line for line in planning if ", done," in line]) == 1 and f" {total}/{total} run, done" in err
    counts = [tuple(map(int, m.groups())) for m in (re.search(r": (\d+)/(\d+) run", line) for line in planning)]
    assert all(t == total for _, t in counts) and [n for n, _ in counts] == sorted(n for n, _ in counts)  # never back
    assert not any(line.startswith(("planning on the proxy", "choosing the method")) for line in err.splitlines())
    text = "\n".join(planning)
    for name in (
        "configuration 1/2 (c=a)",
        "configuration 2/2 (c=b)",
        "method dp_gibo",
        "method private_random_search",
    ):
        assert name in text
    assert any("eta" in line for line in planning)


def test_plan_budget_cuts_the_planning_to_the_budget_and_says_so(capsys):
    log = []
    options = dict(PLAN, num_repeats=3, clip_quantiles=(0.5, 0.9), step_sizes=(0.05, 0.1))
    options["methods"] = (DPGIBOMethod(), PrivateRandomSearchMethod())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            _problem("bowl", 300, 1, log, "private"),
            SPACE,
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            progress=True,
            proxy=_problem("bowl", 100, 0, log, "proxy"),
            num_users=300,
            plan_options=options,
            plan_budget=20,
            **{**SETTINGS, "num_iterations": 2},
        )
    # as given: 2 configurations x (4 settings + the given one) x 3 repeats + 2 methods x 3 = 36 > 20;
    # 2 repeats: 2 x 5 x 2 + 2 x 2 = 24 > 20; one setting: 2 x 2 x 2 + 2 x 2 = 12 <= 20
    err = capsys.readouterr().err
    assert " 12/12 run, done" in err  # the planning made exactly the 12 simulated runs counted
    assert result.planning == (
        "plan_budget = 20 simulated runs: planned with 2 repeat(s) (of 3) and 1 candidate setting(s) per "
        "configuration (of 4), 12 simulated runs instead of 36"
    )
    assert result.planning in repr(result) and result.planning in result.guarantee_report()
    assert all(len(s.proxy_losses) == 2 for s in result.methods.scores)


def test_budgeted_options_stay_within_any_budget_they_can_meet():
    from botorch_dp.plan.budget import budgeted_options, planning_count
    from tests.plan.plan_helpers import plan_config

    config = plan_config()
    given = dict(num_repeats=4, clip_quantiles=(0.25, 0.5, 0.9))
    least = planning_count(
        config,
        dict(num_repeats=1, clip_quantiles=(0.5,), step_sizes=(config.step_size,)),
        num_configurations=3,
        num_methods=3,
    )
    assert least == 3 * 2 + 3
    full = planning_count(config, given, num_configurations=3, num_methods=3)
    assert full == 3 * (9 + 1) * 4 + 3 * 4
    for budget in range(1, full + 2):
        cut, note = budgeted_options(config, given, budget=budget, num_configurations=3, num_methods=3)
        count = planning_count(config, cut, num_configurations=3, num_methods=3)
        assert (note is None) == (budget >= full)
        assert count <= budget if budget >= least else count == least and "still exceeds" in note
        if budget >= planning_count(config, {**given, "num_repeats": 2}, num_configurations=3, num_methods=3):
            assert cut["num_repeats"] >= 2 and len(cut.get("clip_quantiles", ())) == 3  # repeats cut first


def test_bars_inside_overall_progress_count_on_one_bar(capsys):
    from botorch_dp.utils import overall_progress, progress_bar, progress_stage

    with overall_progress(total=5, desc="all"):
        for k, n in enumerate((2, 3)):
            progress_stage(configuration=f"c{k}")
            inner = progress_bar(total=n, desc="inner", unit="run")
            for _ in range(n):
                inner.update(1)
            inner.close()
            progress_bar(total=9, desc="hidden", disable=True).update(9)  # a disabled bar counts nowhere
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("all") for line in lines) and lines[-1].startswith(
        "all | configuration c1: 5/5 run, done"
    )
    assert sum(", started," in line for line in lines) == 1 and any("configuration c0" in line for line in lines)
