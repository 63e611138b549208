"""Tests for botorch_dp.baselines.private_random_search: selection, clipping and noise scale."""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch

from botorch_dp.baselines import private_random_search, random_search
from botorch_dp.privacy.analysis.private_selection import private_selection_epsilon
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import NormalLocation

#: The NON-PRIVATE diagnostic: these tests read K and every trial on purpose.
prs_trials = functools.partial(private_random_search, non_private_trials=True)


def test_private_random_search_without_noise_picks_the_best_trial():
    problem = NormalLocation(dim=2, num_users=25, seed=2)
    with pytest.warns(PrivacyWarning, match="reproducible"):
        res = prs_trials(problem, problem.bounds, mean_trials=30.0, per_trial_mu=1e9, loss_clip=1e3, seed=5)
    K = res.num_evaluations
    assert K >= 1 and not res.history.public
    # same seed -> same uniform candidates as random search; noise std C/(nμ₀) = 4e-8 is negligible
    ref = random_search(problem, problem.bounds, num_evaluations=K, seed=5)
    torch.testing.assert_close(res.history.points, ref.history.points)
    assert torch.equal(res.theta, ref.theta)
    assert res.history.extras["released_score"] == pytest.approx(float(problem.objective(res.theta)), abs=1e-6)
    assert res.guarantee.details["noise_std"] == pytest.approx(1e3 / (25 * 1e9))
    assert res.guarantee.epsilon == pytest.approx(
        private_selection_epsilon(per_trial_mu=1e9, mean_trials=30.0, target_delta=1e-5)
    )


def test_private_random_search_clips_losses_and_noises_with_C_over_n_mu():
    n, C, mu0 = 10, 1.0, 0.5
    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    constant = lambda X: torch.full((X.shape[0], n), 5.0, dtype=torch.float64)  # clipped to C = 1
    res = prs_trials(
        constant, bounds, mean_trials=400.0, per_trial_mu=mu0, loss_clip=C, seed=0
    )  # fixed seed: statistical bounds
    scores = res.history.extras["noisy_scores"]
    assert scores.numel() == res.num_evaluations > 100
    assert float(scores.mean()) == pytest.approx(C, abs=4 * 0.2 / math.sqrt(scores.numel()))
    assert float(scores.std()) == pytest.approx(C / (n * mu0), rel=0.15)  # 0.2


def test_private_random_search_poisson_with_zero_trials_returns_fallback():
    bounds = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float64)
    calls = []
    objective = lambda X: calls.append(X) or torch.zeros(X.shape[0], 3, dtype=torch.float64)
    # E[K] = 1e-9: K = 0 with probability ≈ 1
    res = prs_trials(objective, bounds, mean_trials=1e-9, per_trial_mu=0.1, loss_clip=1.0, distribution="poisson")
    assert res.num_evaluations == 0 and not calls
    torch.testing.assert_close(res.theta, torch.tensor([0.5, 1.0], dtype=torch.float64))


def test_private_random_search_default_draws_K_points_and_noise_from_os_entropy():
    n = 4
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    objective = lambda X: X.sum(-1, keepdim=True).expand(-1, n).clone()
    kwargs = dict(mean_trials=20.0, per_trial_mu=0.5, loss_clip=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns
        runs = [prs_trials(objective, bounds, **kwargs) for _ in range(3)]
    # nothing is reproducible: the trial points (and, almost surely, K) differ between calls
    points = [r.history.points for r in runs]
    assert not any(torch.equal(points[0][:1], p[:1]) for p in points[1:])
    assert len({r.num_evaluations for r in runs} | {r.history.extras["released_score"] for r in runs}) > 1
    # an explicit seed reproduces all of it, and says so
    with pytest.warns(PrivacyWarning, match="seed stays secret"):
        a = prs_trials(objective, bounds, seed=4, **kwargs)
    with pytest.warns(PrivacyWarning):
        b = prs_trials(objective, bounds, seed=4, **kwargs)
    assert a.num_evaluations == b.num_evaluations and torch.equal(a.history.points, b.history.points)
    assert torch.equal(a.history.extras["noisy_scores"], b.history.extras["noisy_scores"])
    with pytest.raises(TypeError, match="secure_rng"):
        private_random_search(objective, bounds, secure_rng=True, **kwargs)


def test_private_random_search_accepts_every_63_bit_seed():
    # child_seeds hands out seeds up to 2**63 - 1; the derived noise stream must not overflow int64
    from botorch_dp.utils import child_seeds

    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    objective = lambda X: torch.zeros(X.shape[0], 3, dtype=torch.float64)
    for seed in (2**63 - 1, max(child_seeds(7, 8))):
        with pytest.warns(PrivacyWarning, match="reproducible"):
            a = prs_trials(objective, bounds, mean_trials=5.0, per_trial_mu=1.0, loss_clip=1.0, seed=seed)
        with pytest.warns(PrivacyWarning, match="reproducible"):
            b = prs_trials(objective, bounds, mean_trials=5.0, per_trial_mu=1.0, loss_clip=1.0, seed=seed)
        assert torch.equal(a.history.extras["noisy_scores"], b.history.extras["noisy_scores"])


@pytest.mark.privacy_fast
def test_without_a_seed_K_is_not_one_fixed_value_and_the_noise_differs():
    # issue 40, item 6: K, read by counting the objective's rows (never from the result), varies over 20
    # unseeded calls (all equal has probability below 1e-17 for a geometric of mean 8), and the noise of
    # the released score (released score minus the clipped mean at the released point) differs each call
    n, rows = 5, []
    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)

    def objective(X):
        rows.append(X.shape[0])
        return X.expand(-1, n).clone()

    counts, noises = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns about a seed
        for _ in range(20):
            rows.clear()
            res = private_random_search(objective, bounds, mean_trials=8.0, per_trial_mu=1.0, loss_clip=1.0)
            counts.append(sum(rows))
            noises.append(res.released_score - float(res.theta.clamp(0.0, 1.0).sum()))
    assert min(counts) >= 1 and len(set(counts)) > 1, counts
    assert len(set(noises)) == len(noises)


@pytest.mark.privacy_fast
def test_one_audit_row_of_its_score_is_sound_and_catches_halved_noise(monkeypatch):
    # the fast twin of tests/audit/test_rows.py (a slow path; issue 40 item 6): the empirical audit of the
    # private random search score (300 runs per side, seed 0) stays below its claim, and with every
    # Gaussian privacy draw at half its scale (the true mu doubles) its lower bound exceeds the claim
    from botorch_dp.audit import registered_rows
    from botorch_dp.privacy.mechanisms import _noise
    from botorch_dp.utils import torch_threads

    row = next(r for r in registered_rows() if r.name == "private_random_search_score")
    with torch_threads(1):
        honest = row(seed=0, num_runs=300)
        assert honest.empirical_mu_lower <= honest.claimed_mu and honest.empirical_mu > 0.5, honest
        release = _noise.release_gaussian  # every Gaussian release goes through it (the discrete grid)
        monkeypatch.setattr(
            _noise, "release_gaussian", lambda statistic, *, mu, **kw: release(statistic, mu=2 * mu, **kw)
        )
        leaky = row(seed=0, num_runs=300)
    assert leaky.empirical_mu_lower > leaky.claimed_mu, leaky
