r"""Step rules (botorch_dp/optim/options/steps.py): SGD and AdaGrad release nothing of their own and step
as ``θ − ηg`` (SGD, closed form); full-matrix AdaGrad's private preconditioner takes ``f_H`` of the
steps' budget, charges ``μ_H/√T`` per step under ``step-t/precond`` and conflicts with a moving bound
or budget; each rule is rebuilt from its ``spec()`` and bad settings are refused naming the field."""

import json
import math

import pytest
import torch

from botorch_dp.optim.options import SGD, AdaGrad, FullMatrixAdaGrad, PrivateGOE, from_spec
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit


@pytest.mark.parametrize(
    "rule",
    [SGD(), AdaGrad(), FullMatrixAdaGrad(), FullMatrixAdaGrad("noisy_debiased"), FullMatrixAdaGrad(PrivateGOE(0.3))],
)
def test_a_rule_is_rebuilt_from_its_spec(rule):
    assert from_spec("step_rule", json.loads(json.dumps(rule.spec()))) == rule


def test_the_string_private_is_the_default_private_preconditioner():
    rule = FullMatrixAdaGrad("private")
    assert rule.private == PrivateGOE(0.5) and rule.kind == "private" and rule.mu_fraction == 0.5
    assert rule.requires == {"fixed_basis", "fixed_clip_bound"} and set(rule.conflicts()) == {
        "clip:adaptive",
        "noise:adaptive_norm",
    }
    assert FullMatrixAdaGrad("noisy").conflicts() == {} and FullMatrixAdaGrad("noisy").mu_fraction is None


def test_sgd_steps_theta_minus_eta_g_and_releases_nothing():
    theta = torch.tensor([0.5, -1.0], dtype=torch.float64)
    g = torch.tensor([2.0, -4.0], dtype=torch.float64)
    optimizer = SGD().make_optimizer(theta, 0.25)
    param = optimizer.param_groups[0]["params"][0]
    param.grad = g.clone()
    optimizer.step()
    torch.testing.assert_close(param.detach(), theta - 0.25 * g, rtol=0, atol=0)
    plan = RunPlan(4, 4, 2, 10, BudgetSplit(1.0))
    for rule in (SGD(), AdaGrad(), FullMatrixAdaGrad()):
        assert rule.bound_parts(plan) == {}


def test_the_private_preconditioner_charges_its_share_per_step():
    rule = FullMatrixAdaGrad(PrivateGOE(0.36))
    plan = RunPlan(9, 9, 2, 10, BudgetSplit(2.0, precond_fraction=0.36))
    parts = rule.bound_parts(plan)
    assert list(parts) == ["precond"]
    assert parts["precond"].mu == pytest.approx(2.0 * math.sqrt(0.36) / math.sqrt(9), rel=1e-12)  # μ_H/√T


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FullMatrixAdaGrad("exact"), "preconditioner must be one of"),  # type: ignore[arg-type]
        (lambda: FullMatrixAdaGrad(0.5), "preconditioner must be one of"),  # type: ignore[arg-type]
        (lambda: PrivateGOE(1.0), r"preconditioner_mu_fraction must lie in \(0, 1\), got 1.0"),
        (lambda: PrivateGOE(0.0), "preconditioner_mu_fraction"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()
