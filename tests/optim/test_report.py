r"""``optim.report``: the run's plan, checks, guarantee and result from explicit arguments, never the
run object (issue 42, item 5)."""

from __future__ import annotations

import ast
import inspect
import math
import warnings
from pathlib import Path

import pytest
import torch

from botorch_dp.optim import report
from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.state import RunState
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyBudgetExceeded, PrivacyLedger
from tests.optim.loop_helpers import nl_config, normal_location

N, D = 30, 2


def test_no_helper_takes_or_reads_the_run_object():
    r"""No function of the module has a parameter named ``opt``/``run``/``self`` or reads a private
    attribute (``x._y``) of anything it is given."""
    source = Path(report.__file__).read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
            assert not names & {"opt", "run", "self"}, node.name
        if isinstance(node, ast.Attribute):
            assert not node.attr.startswith("_"), f"line {node.lineno}: .{node.attr}"


def _opt(**settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DPGIBO(nl_config(d=D, num_iterations=2, privacy_mu=1.0, seed=0, **settings))


def test_the_guarantee_of_a_state_and_a_ledger_is_the_ledgers_gdp_closed_form():
    r"""Given only a config, its strategies, a fresh state and a ledger holding ``Gaussian(0.3)`` and
    ``Gaussian(0.4)``: ``μ = 0.5`` (√(0.3² + 0.4²)) and its exact ``ε``; no step, so no noise yet."""
    opt = _opt()
    ledger = PrivacyLedger()
    for step, mu in enumerate((0.3, 0.4)):
        ledger.external.record(Gaussian(mu), run_id="other", key=f"step-{step:04d}/grad")
    state = RunState.initial(opt.theta, opt.state.gp, opt.state.optimizer, opt.options.clip.initial_state())
    g = report.guarantee(opt.config, opt.options, state, ledger, opt.plan, delta=1e-6)
    assert g.mu == pytest.approx(0.5, rel=1e-12) and g.epsilon == pytest.approx(gdp_epsilon(0.5, 1e-6), rel=1e-12)
    assert g.num_steps == 0 and g.noise_std == 0.0


def test_spent_lists_the_norm_and_gradient_releases_of_one_run_in_order():
    r"""``spent`` reads the run's norm and gradient μ's off the ledger, in the order they were drawn,
    leaving out other parts (the clip counts) and other runs."""
    _, objective = normal_location(n=N, d=D, seed=2)
    opt = _opt(noise_schedule="adaptive_norm", clip_bound="adaptive", clip_init=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        noise = opt.run(objective, progress=False).release.records["noise"]
    opt.ledger.external.record(Gaussian(0.1), run_id="another", key="step-0000/grad")
    interleaved = [mu for pair in zip(noise.norm_mus, noise.step_mus, strict=True) for mu in pair]
    assert report.spent(opt.ledger, opt.run_id) == interleaved
    assert any(r.key.endswith("/clip") for r in opt.ledger.validation.records(opt.run_id))


def test_the_next_release_is_refused_on_the_ledger_alone_before_anything_is_searched():
    r"""A ledger whose budget cannot pay one step refuses it in ``check_next_release`` (nothing is
    recorded); with room it passes."""
    opt = _opt()
    plan = opt.plan(1)
    step_mu = opt.options.split(1.0).gradient_mu / math.sqrt(2)
    small = PrivacyLedger(validation_mu_budget=0.5 * step_mu)
    with pytest.raises(PrivacyBudgetExceeded):
        report.check_next_release(opt.options, opt.state, small, plan, "run", False)
    assert small.validation.records() == []
    room = PrivacyLedger(validation_mu_budget=1.01 * step_mu)
    report.check_next_release(opt.options, opt.state, room, plan, "run", False)


def test_run_plan_reads_the_settings_and_the_users_it_is_given():
    opt = _opt()
    plan = report.run_plan(opt.config, opt.options, D, None, None)
    assert (plan.num_users, plan.dim, plan.iteration_cap, plan.generator) == (0, D, 2, None)
    assert report.run_plan(opt.config, opt.options, D, 7, None).num_users == 7
    assert plan.split.gradient_mu == 1.0


def test_the_result_of_explicit_arguments_is_the_runs():
    r"""``report.result`` on the run's parts gives the release ``DPGIBO.result`` gives (bit for bit)."""
    _, objective = normal_location(n=N, d=D, seed=3)
    opt = _opt()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ran = opt.run(objective, progress=False).release
    again = report.result(opt.config, opt.options, opt.state, opt.ledger, opt.plan, opt.run_id).release
    assert torch.equal(ran.released_gradients, again.released_gradients) and torch.equal(ran.theta, again.theta)
    assert ran.records["noise"] == again.records["noise"] and ran.guarantee == again.guarantee
    assert list(inspect.signature(report.result).parameters) == [
        "config",
        "options",
        "state",
        "ledger",
        "plan_for",
        "run_id",
    ]
