r"""The run's public plan (botorch_dp/optim/options/base.py): one frozen ``RunPlan`` per run, carrying the
config's ``T``, the noise schedule's iteration cap, ``d``, ``n``, the budget split and the noise
generator that every strategy reads."""

import dataclasses
import math
import warnings

import pytest

from botorch_dp.optim.dp_gibo import DPGIBO
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from tests.optim.loop_helpers import nl_config


def test_a_plan_is_frozen_and_private_by_default():
    plan = RunPlan(4, 6, 2, 10, BudgetSplit(1.0))
    assert (plan.generator, plan.chunk_size, plan.diagnostics) == (None, None, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.num_users = 11


def test_a_runs_plan_carries_its_config_and_generator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = nl_config(
            d=3,
            privacy_mu=1.2,
            num_iterations=5,
            seed=1,
            noise_schedule="adaptive_norm",
            max_iterations=8,
            user_chunk_size=4,
        )
        opt = DPGIBO(config)
    plan = opt.plan(12)
    assert (plan.num_iterations, plan.iteration_cap, plan.dim, plan.num_users, plan.chunk_size) == (5, 8, 3, 12, 4)
    assert plan.split.privacy_mu == 1.2 and math.isclose(plan.split.gradient_mu, 1.2)
    assert plan.generator is opt.generators.noise and plan.generator is not None
