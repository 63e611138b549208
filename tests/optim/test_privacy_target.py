r"""A run's privacy parameters (botorch_dp/optim/privacy_target.py): a target ``(ε, δ)`` resolves to the
``μ`` whose GDP privacy profile ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` meets ``δ`` exactly
(checked against the profile written out here), the defaults and the reporting ``δ`` are as
documented, incomplete or contradicting targets are refused naming the fields, and a private run
needs per-user losses from at least two users."""

import math

import pytest
from scipy.stats import norm

from botorch_dp.optim.privacy_target import (
    DEFAULT_PRIVACY_MU,
    DEFAULT_TARGET_DELTA,
    check_per_user_losses,
    resolve_privacy,
)


def _profile(mu, epsilon):
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (3.0, 1e-6), (0.3, 1e-3)])
def test_a_target_resolves_to_the_mu_whose_profile_meets_delta(epsilon, delta):
    mu, eps, dlt, target = resolve_privacy(None, epsilon, delta, None)
    assert (eps, dlt, target) == (epsilon, delta, delta)
    assert _profile(mu, epsilon) == pytest.approx(delta, rel=1e-6)
    assert _profile(mu * 1.01, epsilon) > delta > _profile(mu * 0.99, epsilon)  # the largest such μ
    assert resolve_privacy(mu * (1 + 1e-12), epsilon, delta, 1e-7) == (mu * (1 + 1e-12), epsilon, delta, 1e-7)


def test_the_defaults():
    assert resolve_privacy(None, None, None, None) == (DEFAULT_PRIVACY_MU, None, None, DEFAULT_TARGET_DELTA)
    assert resolve_privacy(2.0, None, None, 1e-6) == (2.0, None, None, 1e-6)
    assert resolve_privacy(math.inf, None, None, None)[0] == math.inf


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((None, None, 1e-5, None), r"delta \(δ\) was given without epsilon"),
        ((None, 1.0, None, None), r"epsilon \(ε\) needs delta \(δ\)"),
        ((0.5, 1.0, 1e-5, None), r"Give either privacy_mu \(μ\) or epsilon and delta.*privacy_mu = 0.5 is not the μ"),
        ((None, -1.0, 1e-5, None), r"epsilon \(ε\)"),
        ((None, 1.0, 1.5, None), r"delta \(δ\)"),
        ((0.0, None, None, None), r"privacy_mu \(μ\)"),
        ((1.0, None, None, 0.0), "target_delta"),
    ],
)
def test_incomplete_or_contradicting_targets_are_refused_naming_the_fields(args, match):
    with pytest.raises(ValueError, match=match):
        resolve_privacy(*args)


def test_a_private_run_needs_per_user_losses_of_two_users():
    check_per_user_losses(2, 1.0)
    check_per_user_losses(1, math.inf)  # a non-private run accepts one column
    with pytest.raises(ValueError, match=r"losses have 1 column\(s\), but a private run needs per-user losses"):
        check_per_user_losses(1, 1.0)
