r"""``botorch_dp.methods.dp_gibo``: the simulation is DP-GIBO on the proxy with
``simulation_config``, the private run charges the planned μ to the ledger, and a config without a
finite budget is unavailable."""

import math
import warnings

import pytest
import torch

from botorch_dp import DPGIBO
from botorch_dp.plan import DPGIBOMethod, MethodContext, MethodUnavailable, simulation_config
from botorch_dp.privacy.ledger import PrivacyLedger
from tests.optim.loop_helpers import normal_location
from tests.plan.plan_helpers import N_PRIVATE, N_PROXY, D
from tests.plan.plan_helpers import plan_config as _config


def test_simulation_and_private_run_are_dp_gibo_with_the_planned_config():
    _, proxy = normal_location(n=N_PROXY, d=D, seed=1)
    config = _config()
    context = MethodContext(
        bounds=config.bounds,
        num_users=N_PRIVATE,
        num_proxy_users=N_PROXY,
        epsilon=1.0,
        delta=1e-5,
        config=config,
        evaluations=6.0,
    )
    method = DPGIBOMethod().resolved(proxy, context)
    assert method.config is config and method.gdp_mu == config.privacy_mu
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta = method.simulate(proxy, context, 5)
        plain = DPGIBO(simulation_config(config, N_PRIVATE, N_PROXY, seed=5)).run(proxy, progress=False).release.theta
    assert torch.equal(theta, plain)
    _, private = normal_location(n=N_PRIVATE, d=D, seed=2)
    ledger = PrivacyLedger(validation_mu_budget=config.privacy_mu)
    run = method.run_private(private, ledger=ledger)
    assert ledger.validation.mu(run.run_id) == pytest.approx(config.privacy_mu, rel=1e-9)
    assert (
        run.num_users == N_PRIVATE and run.release is run.result.release and run.epsilon == pytest.approx(1.0, rel=1e-9)
    )
    assert "planned B = 1" in method.describe()  # plan_config's clip bound
    with pytest.raises(MethodUnavailable, match="no finite privacy budget"):
        DPGIBOMethod().resolved(
            proxy,
            MethodContext(
                config.bounds,
                N_PRIVATE,
                N_PROXY,
                math.inf,
                1e-5,
                _config(epsilon=None, delta=None, privacy_mu=math.inf),
                6.0,
            ),
        )
