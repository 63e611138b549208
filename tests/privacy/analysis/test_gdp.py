r"""Tests for botorch_dp.privacy.analysis.gdp."""

import math

import mpmath
import numpy as np
import pytest

from botorch_dp.privacy.analysis.gdp import (
    compose_gdp,
    gaussian_noise_std_for_mu,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_mu_from_noise,
)

# design.md §5, computed independently.
REFERENCE_EPSILONS_AT_1E_5 = [(0.1, 0.3407), (0.5, 1.9931), (1.0, 4.3772), (2.0, 9.9973)]


@pytest.mark.parametrize("mu, expected", REFERENCE_EPSILONS_AT_1E_5)
def test_reference_values(mu, expected):
    epsilon = gdp_epsilon(mu, 1e-5)
    assert epsilon == pytest.approx(expected, abs=1e-3)
    # The root really solves δ(ε) = δ.
    assert gdp_delta(mu, epsilon) == pytest.approx(1e-5, rel=1e-8)


def _delta_mpmath(mu, epsilon):
    mpmath.mp.dps = 60
    mu, epsilon = mpmath.mpf(mu), mpmath.mpf(epsilon)
    return float(mpmath.ncdf(-epsilon / mu + mu / 2) - mpmath.exp(epsilon) * mpmath.ncdf(-epsilon / mu - mu / 2))


@pytest.mark.parametrize(
    "mu, epsilon", [(1.0, 0.0), (1.0, 2.5), (0.5, 15.0), (0.1, 3.0), (3.0, 1.0), (40.0, 800.0), (1e-3, 1e-3)]
)
def test_delta_matches_high_precision(mu, epsilon):
    # (40, 800) needs e^800, which overflows a naive float evaluation; (0.5, 15) and
    # (0.1, 3) are tiny differences of tiny numbers.
    assert gdp_delta(mu, epsilon) == pytest.approx(_delta_mpmath(mu, epsilon), rel=1e-9)


def test_epsilon_beyond_exp_overflow():
    epsilon = gdp_epsilon(40.0, 1e-5)
    assert epsilon > 709.0 and math.isfinite(epsilon)
    assert gdp_mu(epsilon, 1e-5) == pytest.approx(40.0, rel=1e-9)


def test_epsilon_increasing_in_mu_and_decreasing_in_delta():
    mus = np.geomspace(1e-3, 30.0, 40)
    epsilons = [gdp_epsilon(mu, 1e-5) for mu in mus]
    assert np.all(np.diff(epsilons) > 0)
    deltas = np.geomspace(1e-12, 0.5, 40)
    epsilons = [gdp_epsilon(1.0, delta) for delta in deltas]
    assert np.all(np.diff(epsilons) < 0)
    # δ(ε) decreasing in ε, increasing in μ.
    assert np.all(np.diff([gdp_delta(1.0, e) for e in np.linspace(0, 8, 30)]) < 0)
    # (δ underflows to 0 for tiny μ and saturates at 1 for large μ: use a middle range.)
    assert np.all(np.diff([gdp_delta(mu, 1.0) for mu in np.geomspace(0.1, 8.0, 30)]) > 0)


@pytest.mark.parametrize("delta", [1e-10, 1e-5, 1e-2])
def test_round_trips(delta):
    for mu in [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0]:
        epsilon = gdp_epsilon(mu, delta)
        if epsilon > 0:
            assert gdp_mu(epsilon, delta) == pytest.approx(mu, rel=1e-8)
    for epsilon in [0.05, 0.5, 1.0, 3.0, 10.0]:
        assert gdp_epsilon(gdp_mu(epsilon, delta), delta) == pytest.approx(epsilon, rel=1e-8)


def test_zero_epsilon_region():
    delta = 0.1
    mu_zero = gdp_mu(0.0, delta)
    # Closed form: δ(0) = 2Φ(μ/2) − 1.
    assert gdp_delta(mu_zero, 0.0) == pytest.approx(delta, rel=1e-12)
    assert gdp_epsilon(0.9 * mu_zero, delta) == 0.0
    assert gdp_epsilon(1.1 * mu_zero, delta) > 0.0


def test_zero_mu_releases_nothing():
    # μ = 0 (e.g. no step recorded yet) is the limit of the profile: δ(ε) → 0 for every
    # ε ≥ 0 as μ → 0, so ε(δ) = 0 at every δ; compose_gdp([]) gives exactly this μ.
    assert gdp_delta(1e-12, 0.0) < 1e-12
    for delta in (1e-10, 1e-5, 0.5):
        assert gdp_epsilon(0.0, delta) == 0.0
        assert gdp_epsilon(compose_gdp([]), delta) == 0.0
    assert gdp_delta(0.0, 0.0) == 0.0 and gdp_delta(0.0, 2.0) == 0.0
    assert gdp_mu_from_noise(1.0, 2.0, 0) == 0.0


def test_infinite_mu_and_epsilon():
    assert gdp_epsilon(math.inf, 1e-5) == math.inf
    assert gdp_delta(math.inf, 3.0) == 1.0
    assert gdp_delta(1.0, math.inf) == 0.0
    assert gdp_mu(math.inf, 1e-5) == math.inf
    assert compose_gdp([0.5, math.inf]) == math.inf
    assert gaussian_noise_std_for_mu(1.0, math.inf) == 0.0
    assert gdp_mu_from_noise(1.0, 0.0, 3) == math.inf


def test_composition_and_noise_calibration():
    assert compose_gdp([0.6, 0.8]) == pytest.approx(1.0, rel=1e-15)
    assert compose_gdp([]) == 0.0
    assert compose_gdp([0.2] * 25) == pytest.approx(1.0, rel=1e-14)
    # DP-GIBO: sensitivity 2B/n, noise 2B√T/(nμ) per step gives μ in total.
    clip_bound, num_users, mu, steps = 3.0, 1000, 1.0, 25
    sensitivity = 2 * clip_bound / num_users
    noise_std = gaussian_noise_std_for_mu(sensitivity, mu, steps)
    assert noise_std == pytest.approx(2 * clip_bound * math.sqrt(steps) / (num_users * mu))
    assert gdp_mu_from_noise(sensitivity, noise_std, steps) == pytest.approx(mu, rel=1e-14)
    assert gdp_mu_from_noise(sensitivity, noise_std, steps) == pytest.approx(
        compose_gdp([sensitivity / noise_std] * steps), rel=1e-14
    )
    assert gdp_mu_from_noise(1.0, 2.0, 0) == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gdp_epsilon(-1.0, 1e-5), "mu must be non-negative"),
        (lambda: gdp_epsilon(math.nan, 1e-5), "mu must be non-negative"),
        (lambda: gdp_epsilon(1.0, 0.0), "delta must lie"),
        (lambda: gdp_epsilon(1.0, 1.0), "delta must lie"),
        (lambda: gdp_epsilon(1.0, -1e-5), "delta must lie"),
        (lambda: gdp_mu(-0.1, 1e-5), "epsilon must be non-negative"),
        (lambda: gdp_mu(1.0, 2.0), "delta must lie"),
        (lambda: gdp_delta(1.0, -1.0), "epsilon must be non-negative"),
        (lambda: gdp_delta(-1.0, 1.0), "mu must be non-negative"),
        (lambda: gaussian_noise_std_for_mu(1.0, 0.0), "mu must be positive"),
        (lambda: compose_gdp([1.0, -0.5]), "non-negative"),
        (lambda: gaussian_noise_std_for_mu(0.0, 1.0), "sensitivity"),
        (lambda: gaussian_noise_std_for_mu(1.0, 1.0, steps=0), "steps"),
        (lambda: gaussian_noise_std_for_mu(1.0, 1.0, steps=2.5), "steps"),  # type: ignore[arg-type]  # on purpose
        (lambda: gdp_mu_from_noise(1.0, -1.0, 1), "noise_std"),
    ],
)
def test_input_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
