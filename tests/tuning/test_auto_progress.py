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
            plan_budget=None,
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
