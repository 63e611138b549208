r"""``tune``'s refusals before spending (``tuning.tune_checks``): which rule fires at which number of
users, brute-forced against the rules' closed forms (``δ ≥ 1/n``; ``R = 2√k/(n μ_g) ≥ 10`` for
DP-GIBO's gradient; ``R = 1/(n μ) ≥ 10`` for a score, at the whole ``μ`` for a selection method),
refusal without the opt-in and a carried warning with it, the first-call check of an objective whose
``n`` is unknown, and the refusals of unknown settings and of an objective on another space."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch

from botorch_dp import tune
from botorch_dp.baselines.selection import PublicRefusal
from botorch_dp.optim.public_checks import LARGE_DELTA_OPT_IN, NOISE_DOMINATED_OPT_IN
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import Hyperparameter, SearchSpace
from botorch_dp.tuning.tune_checks import FirstCallChecked, TuneChecks, check_objective, check_setting_names


def _checks(**kw) -> TuneChecks:
    facts: dict[str, Any] = dict(
        epsilon=1.0, delta=0.05, mu=gdp_mu(1.0, 0.05), gradient_mu=0.05, dims=4, score_mu=None,
        allow_large_delta=False, allow_noise_dominated=False,
    )  # fmt: skip
    facts.update(kw)
    return TuneChecks(**facts)


def _firing(checks: TuneChecks, opt_in: str) -> set[int]:
    return {n for n in range(1, 60) if any(o == opt_in for _, o, _ in checks.cautions(n))}


def test_each_rule_fires_exactly_where_its_closed_form_says():
    checks = _checks()
    assert _firing(checks, LARGE_DELTA_OPT_IN) == {n for n in range(1, 60) if 0.05 >= 1 / n}  # n ≥ 20
    assert _firing(checks, NOISE_DOMINATED_OPT_IN) == {n for n in range(1, 60) if 2 * 2 / (n * 0.05) >= 10}  # n ≤ 8
    scored = _checks(gradient_mu=1e3, score_mu=0.004)  # the gradient rule never fires; the score's: 1/(n·0.004) ≥ 10
    assert _firing(scored, NOISE_DOMINATED_OPT_IN) == {n for n in range(1, 60) if 1 / (n * 0.004) >= 10}
    selection = _checks(gradient_mu=None, mu=0.004)  # a selection method: the score rule at the whole μ
    assert _firing(selection, NOISE_DOMINATED_OPT_IN) == set(range(1, 26))
    assert checks.cautions(None) == [] and checks.static() == []
    trained = _checks(training_records=30, training_delta=0.2)  # δ = 0.05 and the target_delta 0.2 ≥ 1/30
    assert [c.split(" = ")[0] for c, _, _ in trained.static()] == ["delta", "dp_sgd target_delta"]
    assert [c.split(" = ")[0] for c, _, _ in _checks(training_records=10, training_delta=0.2).static()] == [
        "dp_sgd target_delta"  # δ = 0.05 < 1/10: only the target fires
    ]


def test_a_caution_is_refused_without_its_opt_in_and_carried_with_it():
    with pytest.raises(ValueError, match=f"pass {NOISE_DOMINATED_OPT_IN}=True"):
        _checks().enforce(5)
    with pytest.raises(ValueError, match=f"pass {LARGE_DELTA_OPT_IN}=True"):
        _checks(gradient_mu=1e3).enforce(30)
    allowed = _checks(allow_noise_dominated=True)
    with pytest.warns(PrivacyWarning, match="noise-dominated"):
        allowed.enforce(5)
    assert len(allowed.carried(5)) == 1 and "noise-dominated" in allowed.carried(5)[0]
    assert allowed.carried(12) == ()  # between the rules: nothing fires at n = 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _checks().enforce(12)


def test_an_objective_of_unknown_n_is_checked_on_its_first_losses_only():
    calls = []

    def objective(configurations):
        calls.append(len(configurations))
        return torch.zeros(len(configurations), n_users[0], dtype=torch.float64)

    n_users = [5]
    guarded = _checks().guarded(objective, None)
    assert isinstance(guarded, FirstCallChecked)
    with pytest.raises(PublicRefusal, match=NOISE_DOMINATED_OPT_IN):
        guarded([{"x": 0.5}])
    n_users[0] = 12
    fine = _checks().guarded(objective, None)
    losses = fine([{"x": 0.5}, {"x": 0.1}])
    assert losses.shape == (2, 12) and fine.checked
    n_users[0] = 5  # checked once: later calls pass through
    assert fine([{"x": 0.5}]).shape == (1, 5) and calls == [1, 2, 1]
    assert _checks().guarded(objective, 12) is objective  # n known: checked up front, not wrapped


def test_unknown_settings_and_an_objective_on_another_space_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"unknown setting num_iteration=3\..*num_iterations"):
        check_setting_names({"num_iteration": 3}, tune)
    check_setting_names({"num_iterations": 3, "seed": 1}, tune)
    space = SearchSpace([Hyperparameter("x", 0.0, 1.0)])
    with pytest.raises(ValueError, match="proxy must be callable"):
        check_objective("proxy", 3, space)
    check_objective("proxy", None, space)
    assert math.isfinite(_checks().mu)
