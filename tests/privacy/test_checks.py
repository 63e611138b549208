"""Every entry point that takes the public privacy parameters refuses the same bad values
(through botorch_dp.privacy.checks), before computing or releasing anything."""

import math

import pytest
import torch
from gpytorch.kernels import RBFKernel

from botorch_dp.optim.dp_gibo import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.accountants import epsilon_table
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon
from botorch_dp.privacy.analysis.zcdp import zcdp_epsilon
from botorch_dp.privacy.checks import (
    all_finite,
    check_choice,
    check_delta,
    check_greater,
    check_history_entry,
    check_losses,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
    check_probability,
)
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism

GOOD = dict(clip_bound=1.0, num_users=10, privacy_mu=1.0, num_steps=4)


def entry_points(**kw):
    params = {**GOOD, **kw}
    gibo_kw = dict(
        bounds=torch.tensor([[0.0], [1.0]], dtype=torch.float64),
        kernel=RBFKernel(),
        clip_bound=params["clip_bound"],
        privacy_mu=params["privacy_mu"],
        num_iterations=params["num_steps"],
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
    for _name, make in entry_points(**bad).items():
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
            ledger.external.record(Gaussian(mu), run_id="run-a", key="step-0000")
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


def test_new_checks_return_converted_values_and_name_the_argument():
    assert check_nonnegative(0, "x") == 0.0 and isinstance(check_nonnegative(0, "x"), float)
    assert check_nonnegative(math.inf, "x") == math.inf
    for bad, kw in ((-1e-300, {}), (math.nan, {}), (math.inf, {"allow_inf": False})):
        with pytest.raises(ValueError, match="x must be non-negative"):
            check_nonnegative(bad, "x", **kw)
    assert check_nonnegative_int(0.0, "i") == 0 and isinstance(check_nonnegative_int(0.0, "i"), int)
    for bad in (True, -1, 0.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="i must be a non-negative integer"):
            check_nonnegative_int(bad, "i")
    assert check_greater(2, "order", 1.0) == 2.0
    for bad in (1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="order must be finite and exceed 1"):
            check_greater(bad, "order", 1.0)
    assert check_probability(1, "q", allow_one=True) == 1.0
    with pytest.raises(ValueError, match="open interval"):
        check_probability(1.0, "gamma")
    for bad in (0.0, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"q must lie in \(0, 1\]"):
            check_probability(bad, "q", allow_one=True)
    assert check_choice("rdp", "accountant", ("rdp", "prv")) == "rdp"
    with pytest.raises(ValueError, match="accountant must be one of"):
        check_choice("moments", "accountant", ("rdp", "prv"))
    assert check_history_entry(1, 0.5, 3.0) == (1.0, 0.5, 3)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        check_history_entry(1.0, 0.5, 0, steps_name="steps")


def test_analysis_and_ledger_refuse_the_same_delta():
    # one message for every entry point that takes a δ
    ledger = PrivacyLedger()
    calls = [
        lambda d: gdp_epsilon(1.0, d),
        lambda d: zcdp_epsilon(0.5, d),
        lambda d: ledger.validation.epsilon(d),
        lambda d: ledger.training.epsilon(d),
        lambda d: private_selection_epsilon(per_trial_mu=0.1, mean_trials=10.0, target_delta=d),
    ]
    for call in calls:
        for bad in (0.0, 1.0, math.nan):
            with pytest.raises(ValueError, match="delta must lie in the open interval"):
                call(bad)


def test_all_finite_agrees_with_the_elementwise_test():
    fmax = torch.finfo(torch.float64).max
    g = torch.Generator().manual_seed(0)
    cases = [
        torch.zeros(0, 3, dtype=torch.float64),
        torch.tensor([[fmax, fmax], [-fmax, 5e-324]], dtype=torch.float64),  # the sum overflows, all finite
        torch.tensor([3e38, 3e38], dtype=torch.float32),
    ]
    for bad in (math.nan, math.inf, -math.inf):
        for dtype in (torch.float64, torch.float32):
            x = torch.randn(4, 50, generator=g, dtype=torch.float64).to(dtype)
            x[int(torch.randint(4, (), generator=g)), int(torch.randint(50, (), generator=g))] = bad
            cases += [x, x[:, ::3]]  # strided views too
            x = torch.tensor([fmax, -fmax, bad], dtype=torch.float64)  # inf - inf and NaN hidden in an overflow
            cases.append(x)
    for x in cases:
        assert all_finite(x) == bool(torch.isfinite(x).all())
    assert not all_finite(torch.tensor([fmax, fmax, math.nan], dtype=torch.float64))


def test_check_losses():
    good = torch.zeros(2, 3, dtype=torch.float64)
    check_losses(good, 2)
    with pytest.raises(ValueError, match="shape"):
        check_losses(torch.zeros(3, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="shape"):
        check_losses(torch.zeros(3, 3, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="at least one user"):
        check_losses(torch.zeros(2, 0, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match="stay fixed"):
        check_losses(good, 2, num_users=4)
    bad = good.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite.*\[1\]"):
        check_losses(bad, 2)
    bad[1, 2] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        check_losses(bad, 2)
    with pytest.raises(ValueError, match="floating"):
        check_losses(torch.zeros(2, 3, dtype=torch.int64), 2)
