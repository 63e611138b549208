"""Every entry point that takes the public privacy parameters refuses the same bad values
(through botorch_dp.privacy.checks), before computing or releasing anything."""

import math

import pytest
import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.accountants import epsilon_table
from botorch_dp.privacy.checks import check_delta, check_positive, check_positive_int
from botorch_dp.privacy.ledger import PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

GOOD = dict(clip_bound=1.0, num_users=10, privacy_mu=1.0, num_steps=4)


def entry_points(**kw):
    params = {**GOOD, **kw}
    gibo_kw = dict(
        bounds=torch.tensor([[0.0], [1.0]], dtype=torch.float64), kernel=RBFKernel(),
        clip_bound=params["clip_bound"], privacy_mu=params["privacy_mu"], num_iterations=params["num_steps"],
    )
    return {
        "mechanism": lambda: GaussianGradientMechanism(**params),
        "dp_gibo": lambda: DPGIBO(DPGIBOConfig(**gibo_kw)),
    }


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(privacy_mu=0.0), "privacy_mu"),
        (dict(privacy_mu=-1.0), "privacy_mu"),
        (dict(privacy_mu=math.nan), "privacy_mu"),
        (dict(clip_bound=0.0), "clip_bound"),
        (dict(clip_bound=math.inf), "clip_bound"),
        (dict(clip_bound=math.nan), "clip_bound"),
        (dict(num_steps=0), "num_"),
        (dict(num_steps=2.5), "num_"),
    ],
)
def test_all_entry_points_refuse_the_same_values(bad, match):
    for name, make in entry_points(**bad).items():
        with pytest.raises(ValueError, match=match):
            make()


def test_good_values_agree_across_entry_points():
    calls = entry_points()
    mechanism = calls["mechanism"]()
    sigma = mechanism.noise_std
    assert math.isclose(sigma, 2 * 1.0 * math.sqrt(4) / (10 * 1.0))
    assert math.isclose(mechanism.noise_multiplier, sigma / (2 * 1.0 / 10))  # noise std / sensitivity
    # μ = inf is non-private GIBO: allowed, and no noise
    assert GaussianGradientMechanism(**{**GOOD, "privacy_mu": math.inf}).noise_std == 0.0


def test_ledger_and_epsilon_table_use_the_same_checks():
    ledger = PrivacyLedger()
    for mu in (0.0, -2.0, math.nan):
        with pytest.raises(ValueError, match="mu must be positive"):
            ledger.record_validation_step(mu=mu, step_index=0)
        with pytest.raises(ValueError, match="mu must be positive"):
            epsilon_table(mu=mu, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        epsilon_table(mu=1.0, delta=1.0)
    with pytest.raises(ValueError, match="steps"):
        epsilon_table(mu=1.0, steps=0, delta=1e-5)


def test_checks_return_converted_values():
    assert check_positive(3, "x") == 3.0 and isinstance(check_positive(3, "x"), float)
    assert check_positive(math.inf, "x") == math.inf
    with pytest.raises(ValueError, match="positive and finite"):
        check_positive(math.inf, "x", allow_inf=False)
    assert check_positive_int(4.0, "n") == 4 and isinstance(check_positive_int(4.0, "n"), int)
    for bad in (True, 0, -1, 1.5, "3"):
        with pytest.raises(ValueError, match="positive integer"):
            check_positive_int(bad, "n")
    assert check_delta(1e-5) == 1e-5
    for bad in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match="open interval"):
            check_delta(bad)
