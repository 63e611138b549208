"""The selection-over-training-runs row (botorch_dp/audit/training_selection.py): its claim is the selection's
validation statement (a real ``select_training_runs(protect="both")`` call states the same), the design's exact
``ε`` lies below the claim and its likelihood ratio increases with the released score (quadrature written out
here), it is sound on today's library, and it catches score noise calibrated at a multiple of ``μ₀``."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from botorch_dp.audit.training_selection import audit_training_selection_score, selection_score_charge
from botorch_dp.privacy.analysis import selection_profile

ROW = dict(epsilon=2.0, delta=1e-5, mean_trials=2.0, loss_clip=1.0, num_users=10)


def min_of_trials_density(x, shift, mean_trials):
    r"""Density of the smallest of ``K`` draws of ``N(shift, 1)``, ``K`` geometric on ``{1, 2, ...}`` with mean
    ``mean_trials``: ``Σ_k P(K = k) k φ(x − shift) S(x − shift)^{k−1}``, summed term by term."""
    p = 1.0 / mean_trials
    survival, pdf = norm.sf(x - shift), norm.pdf(x - shift)
    total, power = np.zeros_like(x), np.ones_like(x)  # power = S^{k-1}
    for k in range(1, 80):  # P(K >= 80) = (1 - p)^79, below 1e-23 at E[K] = 2
        total += p * (1 - p) ** (k - 1) * k * pdf * power
        power *= survival
    return total


def exact_epsilon(mu, mean_trials, delta):
    r"""The exact ``ε`` at ``δ`` of the row's design, in noise units (``D``: shift 0, ``D′``: shift ``μ``)."""
    x = np.linspace(-12.0, 12.0 + mu, 100001)
    dx = x[1] - x[0]
    a, b = min_of_trials_density(x, 0.0, mean_trials), min_of_trials_density(x, mu, mean_trials)

    def delta_at(eps):
        return max(np.sum(np.maximum(b - math.exp(eps) * a, 0)), np.sum(np.maximum(a - math.exp(eps) * b, 0))) * dx

    lo, hi = 0.0, 40.0
    for _ in range(40):
        lo, hi = ((lo + hi) / 2, hi) if delta_at((lo + hi) / 2) > delta else (lo, (lo + hi) / 2)
    return hi, a, b, x


@pytest.mark.privacy_fast
def test_the_claim_covers_the_designs_exact_epsilon_and_the_score_is_the_likelihood_ratio_test():
    r"""At the ``μ₀`` the profile calibrates for ``(2, 1e-5)`` and ``E[K] = 2`` (the row's charge, checked against
    a real selection below) the design's exact ``ε`` at ``δ`` is below 2; at ``2 μ₀`` (half the noise) it is not."""
    mu = selection_profile.per_trial_mu_for_epsilon_pld(target_epsilon=2.0, target_delta=1e-5, mean_trials=2.0)
    honest, a, b, x = exact_epsilon(mu, 2.0, 1e-5)
    assert 1.5 < honest < 2.0  # the claim covers the design, and not by much (1.78)
    middle = (x > -6) & (x < 6)
    assert np.all(np.diff(np.log(b[middle] / a[middle])) > 0)  # the threshold test is the likelihood-ratio test
    assert exact_epsilon(2 * mu, 2.0, 1e-5)[0] > 3.5  # half the noise: far above the claim (3.86)


@pytest.mark.privacy_fast
def test_the_row_is_sound_and_reads_its_claim_from_the_guarantee():
    result = audit_training_selection_score(num_runs=20_000, seed=3)
    assert result.mechanism == "training_selection_score" and result.num_runs == 20_000
    assert (result.claimed_epsilon, result.delta) == (2.0, 1e-5)
    assert not result.leaks and result.empirical_epsilon_lower <= result.claimed_epsilon, result
    assert result.empirical_mu > 0.2, result  # D and D′ are told apart (the design separates)


@pytest.mark.privacy_fast
def test_score_noise_calibrated_at_four_times_mu0_is_caught(monkeypatch):
    r"""The scores' ``μ₀`` calibration returns 4 ``μ₀`` while the charge still states ``(2, 1e-5)``: the scores
    carry a quarter of their noise (exact ``ε`` about 8.7 at ``δ``), and the row shows more than the claim."""
    calibrate = selection_profile.per_trial_mu_for_epsilon_pld
    monkeypatch.setattr(selection_profile, "per_trial_mu_for_epsilon_pld", lambda **kw: 4 * calibrate(**kw))
    result = audit_training_selection_score(num_runs=20_000, seed=3)
    assert result.claimed_epsilon == 2.0
    assert result.leaks and result.empirical_epsilon_lower > 2.0, result


def test_score_noise_calibrated_at_twice_mu0_is_caught_at_the_quick_size(monkeypatch):
    calibrate = selection_profile.per_trial_mu_for_epsilon_pld
    monkeypatch.setattr(selection_profile, "per_trial_mu_for_epsilon_pld", lambda **kw: 2 * calibrate(**kw))
    result = audit_training_selection_score(num_runs=100_000, seed=0)
    assert result.leaks and result.empirical_epsilon_lower > 2.0, result


def test_a_real_selection_states_the_rows_charge_and_releases_its_best_score():
    r"""One ``select_training_runs(protect="both")`` call at the row's settings (10 validation users, ``C = 1``,
    ``E[K] = 2``, validation ``ε = 2``): the validation statement, ``μ₀`` and noise are the row's, and the
    released score is the smallest of its trials' noisy scores (the minimum the row takes)."""
    import torch

    from botorch_dp.methods.training_runs import select_training_runs
    from botorch_dp.training import DPSGDConfig, TrainingConfig
    from botorch_dp.tuning import Hyperparameter, SearchSpace, TorchModelTuningObjective

    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 2, generator=g)
    y = (X[:, 0] > 0).long()
    space = SearchSpace([Hyperparameter("lr", 1e-3, 1.0, log_scale=True)])
    objective = TorchModelTuningObjective(
        (X[:20], y[:20], X[20:], y[20:]),
        space,
        training=TrainingConfig(epochs=1, batch_size=20, hidden_sizes=()),
        dp_sgd=DPSGDConfig(noise_multiplier=1.0),
        loss_cap=1.0,
    )
    result = select_training_runs(
        objective, epsilon=3.0, delta=1e-5, validation_epsilon=2.0, mean_trials=2.0, protect="both", seed=5,
        non_private_trials=True,
    )  # fmt: skip
    charge, guarantee, _ = selection_score_charge(**ROW)
    mu = selection_profile.per_trial_mu_for_epsilon_pld(target_epsilon=2.0, target_delta=1e-5, mean_trials=2.0)
    assert charge["accounting"] == "profile" and charge["mu"] == mu
    assert guarantee.details["noise_std"] == pytest.approx(1.0 / (10 * mu), rel=1e-12)  # C/(n μ₀)
    stated = result.guarantee["validation"]
    assert (stated.epsilon, stated.delta) == (guarantee.epsilon, guarantee.delta) == (2.0, 1e-5)
    for key in ("accounting", "per_trial_mu", "noise_std", "loss_clip"):
        assert stated.details[key] == guarantee.details[key], key
    assert stated.details["per_trial_mu"] == charge["mu"]
    assert result.released_score == min(trial["score"] for trial in result.trials)
