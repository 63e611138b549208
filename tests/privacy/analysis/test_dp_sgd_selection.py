r"""A DP-SGD trial under private selection (``analysis.dp_sgd_selection``): Opacus curves that
overflow are read as ``inf`` over the whole order grid; the profile bound is below the RDP bound
and above one trial; heterogeneous trials; the selection's curve on the ledger's grid."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from botorch_dp.privacy.analysis.dp_sgd_selection import (
    CURVE_ORDERS,
    dp_sgd_privacy_profile,
    dp_sgd_rdp_curve,
    max_rdp_curve,
    reference_trial_curves,
    selection_training_rdp,
)
from botorch_dp.privacy.analysis.private_selection import (
    _HAT_START,
    _HAT_STOP,
    private_selection_epsilon_generic,
    private_selection_rdp_curve,
)
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon, rdp_to_epsilon
from botorch_dp.privacy.analysis.selection_profile import selection_epsilon_pld

#: (q, σ, steps): the issue's case first (Opacus returns NaN from order ≈ 1091), then others.
SHAPES = [(0.0625, 3.0, 240), (0.0625, 1.0, 240), (0.01, 0.8, 3000), (0.25, 5.0, 60), (1.0, 2.0, 10)]
#: Every order the analysis visits: P&S's λ̂ grid (λ̂ − 1 ∈ [1e-3, 1e6]) and the conversion's grid.
ANALYSIS_ORDERS = 1.0 + np.exp(np.linspace(_HAT_START, _HAT_STOP, 241))


def _compute_rdp(q, sigma, steps, orders):
    from opacus.accountants.analysis.rdp import compute_rdp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=np.asarray(orders)))


def test_opacus_overflows_on_the_issue_case():
    r"""The premise: Opacus's own curve holds NaN at large orders for the issue's trial."""
    values = _compute_rdp(0.0625, 3.0, 240, [10.0, 1091.18, 5000.5])
    assert math.isfinite(values[0]) and np.all(np.isnan(values[1:]))


def test_curve_on_the_whole_grid_is_opacus_or_inf():
    _check_curve_on_the_whole_grid(SHAPES[0])


@pytest.mark.parametrize("shape", SHAPES[1:])
def test_curve_on_the_whole_grid_is_opacus_or_inf_more_shapes(shape):
    _check_curve_on_the_whole_grid(shape)


def _check_curve_on_the_whole_grid(shape):
    q, sigma, steps = shape
    curve = dp_sgd_rdp_curve(noise_multiplier=sigma, sample_rate=q, steps=steps)
    raw = _compute_rdp(q, sigma, steps, CURVE_ORDERS)
    got = np.array([curve(a) for a in CURVE_ORDERS])
    assert not np.any(np.isnan(got)) and np.all(got >= 0.0)
    finite = np.isfinite(raw)
    np.testing.assert_array_equal(got[finite], np.maximum(raw[finite], 0.0))
    assert np.all(np.isinf(got[~finite]))
    # between grid orders: the next order up (ε(α) does not decrease), inf beyond the grid
    for order in ANALYSIS_ORDERS:
        value = curve(float(order))
        upper = [a for a in CURVE_ORDERS if a >= order]
        assert value == (curve(upper[0]) if upper else math.inf)
    eps = private_selection_epsilon_generic(curve, mean_trials=10.0, target_delta=1e-5)
    assert math.isfinite(eps) and eps > rdp_to_epsilon(curve, 1e-5)[0]


def test_base_values_that_overflow_read_inf():
    r"""A curve that is NaN above some order gives the bound of the same curve with ``inf`` there."""
    base = lambda a: 0.05 * a if a < 200.0 else math.nan  # noqa: E731
    capped = lambda a: 0.05 * a if a < 200.0 else math.inf  # noqa: E731
    for distribution in ("truncated_negative_binomial", "poisson"):
        got = private_selection_epsilon_generic(base, mean_trials=10.0, target_delta=1e-5, distribution=distribution)
        want = private_selection_epsilon_generic(capped, mean_trials=10.0, target_delta=1e-5, distribution=distribution)
        assert got == want and math.isfinite(got)
    with pytest.raises(ValueError, match="base_rdp must return values >= 0"):
        private_selection_epsilon_generic(lambda a: -1.0, mean_trials=10.0, target_delta=1e-5)


@pytest.fixture(scope="module")
def trial():
    sigma, q, steps = 3.81, 0.0625, 240  # one trial at ε ≈ 1, δ = 1e-5, 15 epochs
    return (
        dp_sgd_rdp_curve(noise_multiplier=sigma, sample_rate=q, steps=steps),
        dp_sgd_privacy_profile(noise_multiplier=sigma, sample_rate=q, steps=steps),
    )


@pytest.mark.parametrize(
    "distribution,eta", [("truncated_negative_binomial", 1.0), ("truncated_negative_binomial", 0.0), ("poisson", 1.0)]
)
def test_profile_bound_is_below_rdp_and_above_one_trial(trial, distribution, eta):
    curve, profile = trial
    single = profile.epsilon(1e-5)
    assert single == pytest.approx(1.0, abs=0.02)
    for mean in (5.0, 20.0):
        rdp = private_selection_epsilon_generic(
            curve, mean_trials=mean, target_delta=1e-5, distribution=distribution, tnb_eta=eta
        )
        pld = selection_epsilon_pld(profile, distribution=distribution, expected_trials=mean, delta=1e-5, tnb_eta=eta)
        assert single < pld < rdp


def test_max_rdp_curve_bounds_every_curve_fast():
    curves = [lambda a, r=r: a * r for r in (0.05, 0.2)] + [lambda a: 0.1 * a if a < 50 else math.nan]
    top = max_rdp_curve(curves)
    assert top(10.0) == 2.0 and top(60.0) == math.inf
    eps_top = private_selection_epsilon_generic(top, mean_trials=10.0, target_delta=1e-5)
    for curve in curves:
        assert eps_top >= private_selection_epsilon_generic(curve, mean_trials=10.0, target_delta=1e-5)


def test_heterogeneous_reference_bounds_every_trial():
    trials = [(3.81, 0.0625, 240), (3.0, 0.0625, 160), (5.0, 0.125, 240)]  # σ, batch size and epochs differ
    curve, profile = reference_trial_curves(trials)
    rdp_ref = private_selection_epsilon_generic(curve, mean_trials=10.0, target_delta=1e-5)
    pld_ref = selection_epsilon_pld(profile, expected_trials=10.0, delta=1e-5)
    for sigma, q, steps in trials:
        one = dp_sgd_rdp_curve(noise_multiplier=sigma, sample_rate=q, steps=steps)
        for a in (1.5, 8.0, 32.0, 256.0):
            assert curve(a) >= one(a)
        assert rdp_ref >= private_selection_epsilon_generic(one, mean_trials=10.0, target_delta=1e-5)
        single = dp_sgd_privacy_profile(noise_multiplier=sigma, sample_rate=q, steps=steps)
        assert np.all(profile.delta(single.epsilons) >= single.deltas)
        assert pld_ref >= selection_epsilon_pld(single, expected_trials=10.0, delta=1e-5)


def test_selection_curve_on_the_ledger_grid(trial):
    from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS
    from botorch_dp.privacy.ledger.events import TrainingMechanism

    curve, _ = trial
    values = selection_training_rdp(curve, mean_trials=10.0)
    assert len(values) == len(TRAINING_RDP_ORDERS)
    event = TrainingMechanism("private selection over DP-SGD runs, E[K] = 10", values)  # the ledger accepts it
    full = private_selection_rdp_curve(curve, mean_trials=10.0)
    np.testing.assert_array_equal(event.rdp, [full(a) for a in TRAINING_RDP_ORDERS])
    on_grid = rdp_curve_epsilon(values, TRAINING_RDP_ORDERS, 1e-5)[0]
    assert on_grid == private_selection_epsilon_generic(
        curve, mean_trials=10.0, target_delta=1e-5, orders=TRAINING_RDP_ORDERS
    )
    with pytest.raises(ValueError, match="distribution"):
        selection_training_rdp(curve, mean_trials=10.0, distribution="binomial")


def test_issue_crash_with_opacus_called_at_every_order():
    r"""The issue's call as written (Opacus evaluated at each order the analysis visits): no crash.
    Slow (about a minute), listed in tests/slow_tests.txt; the fast version is the grid test above."""

    def base(order):
        return float(_compute_rdp(0.0625, 3.0, 240, [order])[0])

    eps = private_selection_epsilon_generic(base, mean_trials=10.0, target_delta=1e-5)
    fast = private_selection_epsilon_generic(
        dp_sgd_rdp_curve(noise_multiplier=3.0, sample_rate=0.0625, steps=240), mean_trials=10.0, target_delta=1e-5
    )
    assert math.isfinite(eps) and eps <= fast + 1e-6
