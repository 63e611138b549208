"""botorch_dp.optim.public_checks: settings that would waste a run are refused or warned about
before anything is released (issue 32, item 2): a kernel without variance, a kernel whose
length-scales do not fit the bounds, δ ≥ 1/n, and a first step that is mostly noise."""

import math
import re
import warnings

import pytest
import torch
from gpytorch.kernels import PolynomialKernel, RBFKernel, ScaleKernel

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.public_checks import FAR_CORRELATION, FLAT_CORRELATION, SettingsWarning
from botorch_dp.privacy.seeding import PrivacyWarning

from .loop_helpers import nl_config, normal_location


def _rbf(lengthscale: float, d: int = 2) -> RBFKernel:
    kernel = RBFKernel(ard_num_dims=d)
    kernel.lengthscale = lengthscale
    return kernel


def _config(bounds, kernel, **kw) -> DPGIBOConfig:
    return DPGIBOConfig(
        bounds=torch.tensor(bounds, dtype=torch.float64),
        kernel=kernel,
        privacy_mu=1.0,
        num_iterations=2,
        batch_size=2,
        raw_samples=8,
        num_restarts=1,
        **kw,
    )


def _settings_warnings(config: DPGIBOConfig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPGIBO(config)
    return [str(w.message) for w in caught if issubclass(w.category, SettingsWarning)]


def test_a_kernel_with_zero_outputscale_is_refused_when_the_config_is_built():
    kernel = ScaleKernel(_rbf(0.5))
    kernel.outputscale = 0.0
    with pytest.raises(ValueError, match=re.escape("kernel: k(θ₀, θ₀) = 0.0") + ".*outputscale"):
        _config([[0.0, 0.0], [1.0, 1.0]], kernel)  # DPGIBOConfig itself: before any run exists
    kernel.outputscale = 1e-3  # small but positive: accepted
    DPGIBO(_config([[0.0, 0.0], [1.0, 1.0]], kernel))


def test_natural_unit_bounds_with_a_unit_cube_kernel_warn_with_the_closed_form_correlation():
    # width 112 in θ[0]: the default radius is 11.2, and an RBF with ℓ = 0.5 correlates exp(−r²/2ℓ²) there
    found = _settings_warnings(_config([[16.0, 0.0], [128.0, 1.0]], _rbf(0.5)))
    assert len(found) == 1 and "spans many of the kernel's length-scales in 1 of 2 coordinate(s)" in found[0]
    rho = math.exp(-(11.2**2) / (2 * 0.5**2))
    assert f"θ[0]: radius 11.2, correlation {rho:.3g}" in found[0] and "θ[1]" not in found[0]
    # the reverse: a box far smaller than the length-scale
    found = _settings_warnings(_config([[0.0, 0.0], [1e-3, 1.0]], _rbf(1.0)))
    assert (
        len(found) == 1
        and "tiny fraction of a length-scale in 1 of 2" in found[0]
        and "θ[0]: radius 0.0001" in found[0]
    )


@pytest.mark.parametrize("lengthscale", [0.05, 0.2, 1.0, 5.0])
def test_unit_cube_bounds_with_a_unit_cube_kernel_do_not_warn(lengthscale):
    assert _settings_warnings(_config([[0.0, 0.0], [1.0, 1.0]], _rbf(lengthscale))) == []


def test_the_thresholds_sit_where_the_radius_is_a_few_length_scales_or_a_hundredth_of_one():
    # exp(−r²/2ℓ²) < 1e-3 ⇔ r/ℓ > 3.72; 1 − exp(−r²/2ℓ²) < 1e-4 ⇔ r/ℓ < 0.0141 (radius 0.1 of a unit box)
    assert _settings_warnings(_config([[0.0, 0.0], [1.0, 1.0]], _rbf(0.1 / 3.8)))  # r/ℓ = 3.8
    assert not _settings_warnings(_config([[0.0, 0.0], [1.0, 1.0]], _rbf(0.1 / 3.6)))
    assert _settings_warnings(_config([[0.0, 0.0], [1.0, 1.0]], _rbf(0.1 / 0.0135)))
    assert not _settings_warnings(_config([[0.0, 0.0], [1.0, 1.0]], _rbf(0.1 / 0.0150)))
    assert math.exp(-(3.8**2) / 2) < FAR_CORRELATION < math.exp(-(3.6**2) / 2)
    assert 1 - math.exp(-(0.0135**2) / 2) < FLAT_CORRELATION < 1 - math.exp(-(0.015**2) / 2)


def test_a_non_stationary_kernel_is_not_compared_with_the_radius():
    kernel = PolynomialKernel(power=2)
    assert _settings_warnings(_config([[16.0, 0.0], [128.0, 1e-3]], kernel)) == []


def _asked(config):
    r"""A new run and its first batch (the warnings below come when it is told)."""
    opt = DPGIBO(config)
    return opt, opt.ask()


def test_delta_at_least_one_over_n_warns_before_the_first_release():
    _, objective = normal_location(n=50, d=2)
    config = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.05, num_iterations=2)  # 1/n = 0.02
    opt, X = _asked(config)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        with pytest.raises(PrivacyWarning, match=r"delta = 0\.05 is at least 1/n = 0\.02 \(n = 50 users\)"):
            opt.tell(X, objective(X))
    assert opt.ledger.validation_records() == [] and opt.iteration == 0  # before the release
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.tell(X, objective(X))  # the run goes on as asked
    assert opt.iteration == 1 and any("is at least 1/n" in str(w.message) for w in caught)
    fine = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=1e-3, num_iterations=2)
    opt, X = _asked(fine)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        opt.tell(X, objective(X))


def test_a_first_step_that_is_mostly_noise_warns_with_the_closed_form_ratio_before_its_release():
    _, objective = normal_location(n=50, d=2)
    T, mu = 25, 0.2
    opt, X = _asked(nl_config(d=2, privacy_mu=mu, num_iterations=T))
    ratio = 2 * math.sqrt(T * 2) / (50 * mu)  # σ√d/B with σ = 2B√T/(nμ)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingsWarning)
        with pytest.raises(SettingsWarning, match=re.escape(f"{ratio:.3g}× the largest possible clipped mean")):
            opt.tell(X, objective(X))
    assert opt.ledger.validation_records() == []
    # 100 times the users: σ√d/B = 0.014, no warning
    _, many = normal_location(n=5000, d=2)
    opt, X = _asked(nl_config(d=2, privacy_mu=mu, num_iterations=T))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingsWarning)
        opt.tell(X, many(X))
