"""botorch_dp.optim.public_checks: settings that would waste a run are refused or warned about
before anything is released (issue 32, item 2): a kernel without variance, a kernel whose
length-scales do not fit the bounds, δ ≥ 1/n, and a first step that is mostly noise; δ ≥ 1/n and
a noise-dominated budget are refused unless opted in (issue 43, item 1)."""

import dataclasses
import json
import math
import re
import warnings

import pytest
import torch
from gpytorch.kernels import PolynomialKernel, RBFKernel, ScaleKernel

from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.optim.public_checks import (
    FAR_CORRELATION,
    FLAT_CORRELATION,
    NOISE_DOMINATED_RATIO,
    SettingsWarning,
    check_kernel,
    named_coordinates,
)
from botorch_dp.privacy.analysis.gdp import gdp_epsilon, gdp_mu
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


def test_the_kernel_warning_names_hyperparameters_when_the_coordinates_have_names():
    config = _config([[0.0, 0.0], [1e-3, 1.0]], _rbf(1.0))
    with named_coordinates(["lr", "dropout"]):  # what tune sets around its planning and run
        (found,) = _settings_warnings(config)
    assert "lr: radius 0.0001" in found and "θ[" not in found
    (found,) = _settings_warnings(config)  # outside the block: θ[i] again
    assert "θ[0]: radius 0.0001" in found
    with named_coordinates(["only one name"]):  # names that do not name every coordinate are not used
        (found,) = _settings_warnings(config)
    assert "θ[0]" in found
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_kernel(_rbf(1.0), torch.zeros(2, dtype=torch.float64), torch.tensor([1e-4, 0.1]), names=["a", "b"])
    assert any("a: radius 0.0001" in str(w.message) for w in caught)


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


class _Counted:
    r"""The objective, counting its calls."""

    def __init__(self, objective, num_users=None):
        self.objective, self.calls = objective, 0
        if num_users is not None:
            self.num_users = num_users

    def __call__(self, X):
        self.calls += 1
        return self.objective(X)


def test_delta_at_least_one_over_n_is_refused_before_the_first_release_unless_opted_in():
    _, objective = normal_location(n=50, d=2)
    config = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.05, num_iterations=2)  # 1/n = 0.02
    opt, X = _asked(config)
    message = r"delta = 0\.05 is at least 1/n = 0\.02 \(n = 50 users\), the threshold.*unsafe_allow_large_delta=True"
    with pytest.raises(ValueError, match=message):
        opt.tell(X, objective(X))
    assert opt.ledger.validation.records() == [] and opt.iteration == 0  # before the release
    # at the threshold itself (δ = 1/n exactly) too; just below it, not
    with pytest.raises(ValueError, match="is at least 1/n"):
        DPGIBO(nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.02, num_iterations=2)).run(objective)
    fine = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.0199, num_iterations=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        result = DPGIBO(fine).run(objective, progress=False)
    assert result.release.guarantee.cautions == () and "WARNING" not in result.guarantee_report()
    # the opt-in: warned, run as asked, and the warning travels with the result
    opted = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.05, num_iterations=2, unsafe_allow_large_delta=True)
    with pytest.warns(PrivacyWarning, match=r"is at least 1/n = 0\.02.*unsafe_allow_large_delta=True"):
        result = DPGIBO(opted).run(objective, progress=False)
    (caution,) = result.release.guarantee.cautions
    assert caution.startswith("delta = 0.05 is at least 1/n = 0.02")
    assert f"WARNING: {caution}" in result.guarantee_report()
    assert json.loads(result.to_json())["guarantee"]["this_run"]["cautions"] == [caution]


def test_an_objective_that_knows_n_is_refused_before_its_first_call():
    _, objective = normal_location(n=50, d=2)
    counted = _Counted(objective, num_users=50)
    config = nl_config(d=2, privacy_mu=None, epsilon=1.0, delta=0.05, num_iterations=2)
    with pytest.raises(ValueError, match=r"delta = 0\.05 is at least 1/n = 0\.02"):
        DPGIBO(config).run(counted, progress=False)
    assert counted.calls == 0
    unknown = _Counted(objective)  # n first seen at the first call: refused there, before any release
    opt = DPGIBO(config)
    with pytest.raises(ValueError, match="is at least 1/n"):
        opt.run(unknown, progress=False)
    assert unknown.calls == 1 and opt.ledger.validation.records() == []


def test_the_default_target_delta_of_a_privacy_mu_run_is_warned_not_refused():
    # μ-GDP holds at every δ; the reported ε is read at the library's default δ = 1e-5, which is ≥ 1/n here
    n = 200_000
    losses = torch.zeros(3, n, dtype=torch.float64)
    opt, X = _asked(nl_config(d=2, privacy_mu=1.0, num_iterations=2))
    with pytest.warns(PrivacyWarning, match=r"target_delta = 1e-05 is at least 1/n = 5e-06.*default of a privacy_mu"):
        opt.tell(X, losses[: X.shape[0]])
    assert len(opt.guarantee().cautions) == 1
    opt, X = _asked(nl_config(d=2, privacy_mu=1.0, target_delta=2e-5, num_iterations=2))  # given: refused
    with pytest.raises(ValueError, match=r"target_delta = 2e-05 is at least 1/n"):
        opt.tell(X, losses[: X.shape[0]])


def test_a_noise_dominated_budget_is_refused_with_the_closed_form_ratio_and_the_needed_epsilon():
    # R = 2√k/(n μ_g): ε = 0.01, δ = 1e-5 gives μ = 0.0041; n = 20, k = 2: R = 34.5
    _, objective = normal_location(n=20, d=2)
    config = nl_config(d=2, privacy_mu=None, epsilon=0.01, delta=1e-5, num_iterations=3)
    mu = gdp_mu(0.01, 1e-5)
    ratio = 2 * math.sqrt(2) / (20 * mu)
    needed = gdp_epsilon(mu * ratio / NOISE_DOMINATED_RATIO, 1e-5)
    counted = _Counted(objective, num_users=20)
    with pytest.raises(ValueError) as caught:
        DPGIBO(config).run(counted, progress=False)
    message = str(caught.value)
    assert counted.calls == 0
    assert "epsilon = 0.01 leaves the run noise-dominated" in message
    assert f"2√k/(n mu_g) = {ratio:.3g}" in message and f"threshold {NOISE_DOMINATED_RATIO:g}" in message
    assert f"needs epsilon above {needed:.4g}" in message and "allow_noise_dominated=True" in message
    # at the needed ε, R is the threshold (refused, ≥); a little above it, the run goes on
    assert 2 * math.sqrt(2) / (20 * gdp_mu(needed, 1e-5)) == pytest.approx(NOISE_DOMINATED_RATIO, rel=1e-6)
    with pytest.raises(ValueError, match="noise-dominated"):
        DPGIBO(nl_config(d=2, privacy_mu=None, epsilon=needed * 0.99, delta=1e-5, num_iterations=3)).run(objective)
    DPGIBO(nl_config(d=2, privacy_mu=None, epsilon=needed * 1.01, delta=1e-5, num_iterations=3)).run(
        objective, progress=False
    )
    # the opt-in runs it and the result says so
    opted = dataclasses.replace(config, allow_noise_dominated=True)
    with pytest.warns(PrivacyWarning, match="noise-dominated"):
        result = DPGIBO(opted).run(objective, progress=False)
    assert any("noise-dominated" in c for c in result.release.guarantee.cautions)
    assert "WARNING: epsilon = 0.01 leaves the run noise-dominated" in result.guarantee_report()


def test_the_noise_rule_reads_the_released_coordinates():
    # a privacy_mu run: the needed value is in μ; with k = 1 coordinate R halves against k = 4
    mu, n = 0.01, 50
    for d in (1, 4):
        _, objective = normal_location(n=n, d=d)
        ratio = 2 * math.sqrt(d) / (n * mu)  # 4 for d = 1 (runs), 8 ... d = 4: 8 < 10 runs too
        config = nl_config(d=d, privacy_mu=mu, num_iterations=2)
        if ratio >= NOISE_DOMINATED_RATIO:
            with pytest.raises(ValueError):
                DPGIBO(config).run(objective, progress=False)
        else:
            DPGIBO(config).run(objective, progress=False)
    _, objective = normal_location(n=n, d=9)  # R = 2·3/(50·0.01) = 12
    with pytest.raises(ValueError, match=r"privacy_mu = 0\.01 leaves.*k = 9.*needs privacy_mu above 0\.012"):
        DPGIBO(nl_config(d=9, privacy_mu=mu, num_iterations=2)).run(objective, progress=False)


def test_a_first_step_that_is_mostly_noise_warns_with_the_closed_form_ratio_before_its_release():
    _, objective = normal_location(n=50, d=2)
    T, mu = 25, 0.2
    opt, X = _asked(nl_config(d=2, privacy_mu=mu, num_iterations=T))
    ratio = 2 * math.sqrt(T * 2) / (50 * mu)  # σ√d/B with σ = 2B√T/(nμ)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingsWarning)
        with pytest.raises(SettingsWarning, match=re.escape(f"{ratio:.3g}× the largest possible clipped mean")):
            opt.tell(X, objective(X))
    assert opt.ledger.validation.records() == []
    # 100 times the users: σ√d/B = 0.014, no warning
    _, many = normal_location(n=5000, d=2)
    opt, X = _asked(nl_config(d=2, privacy_mu=mu, num_iterations=T))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingsWarning)
        opt.tell(X, many(X))
