r"""tune(strategy="sample") (botorch_dp.methods.sampled), issue 40 item 6: each trial runs at the stated
per-trial μ (its DP-GIBO run at μ₀√(1 − f), its score at μ₀√f, never the full μ), the number of
trials K is random with the stated truncated negative binomial (η = 1: geometric with mean E[K]),
drawn from OS entropy without a seed, and the released trial is the one with the best released
score, not the last. K and the trials are read by counting calls (of a wrapped objective, of the
trial runner, of the score mechanism), never from the result, which keeps them hidden."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from botorch_dp import tune
from botorch_dp.methods import sampled as sampled_method
from botorch_dp.optim import DPGIBO, DPGIBOConfig
from botorch_dp.privacy.analysis.gdp import gdp_mu
from botorch_dp.privacy.analysis.private_selection import per_trial_mu_for_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS, PrivacyLedger
from botorch_dp.privacy.mechanisms import GaussianScoreMechanism
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import Categorical, Hyperparameter, SearchSpace, sampled
from botorch_dp.tuning.tune_result import ConfigurationRun

pytestmark = pytest.mark.privacy_fast  # the fast version of privacy properties (tests/conftest.py)

SPACE = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Categorical("arm", tuple(range(6)))])
N = 40
_USERS = torch.linspace(-0.2, 0.2, N, dtype=torch.float64)


def _losses(configs):
    r"""``q x N`` losses: each arm its own level (clip 3 leaves them unclipped)."""
    return torch.stack([1.0 + 0.2 * c["arm"] + 0.1 * (math.log10(c["lr"]) + 2.5) ** 2 + _USERS for c in configs])


class _Recorder:
    r"""Wraps ``GaussianScoreMechanism``: the μ₀ of each scorer and every score it releases."""

    def __init__(self, monkeypatch):
        self.mus: list[float] = []
        self.scores: list[float] = []
        recorder, original = self, GaussianScoreMechanism.release_means

        def release_means(mechanism, means, num_users, **kw):
            out = original(mechanism, means, num_users, **kw)
            recorder.mus.append(mechanism.per_trial_mu)
            recorder.scores.extend(out.scores.tolist())
            return out

        monkeypatch.setattr(GaussianScoreMechanism, "release_means", release_means)


def test_each_trial_runs_at_the_per_trial_mu_and_the_best_released_score_wins(monkeypatch):
    epsilon, delta, share, mean_trials = 3.0, 1e-5, 0.1, 3.0
    mu0 = per_trial_mu_for_epsilon(
        target_epsilon=epsilon,
        target_delta=delta,
        mean_trials=mean_trials,
        distribution="truncated_negative_binomial",
        orders=TRAINING_RDP_ORDERS,
    )
    assert mu0 < gdp_mu(epsilon, delta)  # a trial gets less than the whole procedure's μ
    run_mus: list[float] = []

    class RecordingDPGIBO(DPGIBO):
        def __init__(self, config, **kw):
            run_mus.append(config.privacy_mu)
            super().__init__(config, **kw)

    monkeypatch.setattr(sampled_method, "DPGIBO", RecordingDPGIBO)
    finals: list[dict] = []

    def objective(configs):
        if len(configs) == 1:  # a trial's scored final point (the batches have 2 rows)
            finals.append(configs[0])
        return _losses(configs)

    recorder = _Recorder(monkeypatch)
    last_was_not_best = 0
    for seed in (3, 5):
        for seen in (run_mus, finals, recorder.mus, recorder.scores):
            seen.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            result = tune(
                objective,
                SPACE,
                epsilon=epsilon,
                delta=delta,
                seed=seed,
                strategy="sample",
                mean_trials=mean_trials,
                selection_share=share,
                progress=False,
                num_iterations=1,
                batch_size=2,
                raw_samples=16,
                num_restarts=1,
            )
        K = len(finals)
        assert K >= 1 and len(run_mus) == K and len(recorder.scores) == K
        assert run_mus == pytest.approx([mu0 * math.sqrt(1 - share)] * K, rel=1e-12)
        assert recorder.mus == pytest.approx([mu0 * math.sqrt(share)] * K, rel=1e-12)
        best = int(np.argmin(recorder.scores))
        assert result.runs[0].noisy_score == recorder.scores[best]
        assert result.hyperparameters["arm"] == finals[best]["arm"]
        assert result.hyperparameters["lr"] == pytest.approx(finals[best]["lr"], rel=1e-12)
        last_was_not_best += best != K - 1
    assert last_was_not_best  # the comparison with "release the last trial" is not vacuous


_CONFIG = DPGIBOConfig(bounds=SPACE.bounds, kernel=SPACE.recommended_kernel(), privacy_mu=1.0)


def _fake_runs(calls):
    r"""A trial runner that records each call and returns a run at the centre of the cube (no DP-GIBO)."""

    def run_one(choice, run_mu, seed, ledger, quiet=False):
        calls.append((choice, run_mu))
        theta = torch.full((SPACE.dim,), 0.5, dtype=torch.float64)
        release = types.SimpleNamespace(release=types.SimpleNamespace(theta=theta))
        return ConfigurationRun(choice, release, "r", N, _CONFIG)

    return run_one


def _sample(run_one, seed, mean_trials=3.0):
    return sampled.sample_configurations(
        _losses,
        SPACE,
        run_one,
        epsilon=3.0,
        delta=1e-5,
        ledger=PrivacyLedger(),
        mean_trials=mean_trials,
        selection_share=0.1,
        loss_clip=3.0,
        seed=seed,
        progress=False,
    )


def test_the_number_of_trials_has_the_stated_truncated_negative_binomial_distribution(monkeypatch):
    # η = 1: P[K = k] = γ(1 − γ)^{k−1}, γ = 1/E[K]; K counted over 300 seeded calls, chi-square on 7 cells
    monkeypatch.setattr(
        sampled_method, "per_trial_mu_for_epsilon", lambda **kw: 0.5
    )  # the calibration is not under test
    mean_trials, runs = 3.0, 300
    counts = []
    for seed in range(runs):
        calls: list = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            _sample(_fake_runs(calls), seed, mean_trials)
        counts.append(len(calls))
    gamma = 1.0 / mean_trials
    cells = np.arange(1, 7)
    pmf = gamma * (1 - gamma) ** (cells - 1)
    expected = runs * np.append(pmf, 1.0 - pmf.sum())  # the last cell: K >= 7
    observed = np.array([counts.count(int(k)) for k in cells] + [sum(k >= 7 for k in counts)])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.ppf(1 - 1e-4, len(cells)), (observed, expected)
    assert min(counts) >= 1 and np.mean(counts) == pytest.approx(mean_trials, abs=0.6)


def test_without_a_seed_the_number_of_trials_and_the_noise_come_from_os_entropy(monkeypatch):
    # 20 unseeded calls: K is not one fixed value (all equal has probability below 1e-9 for a geometric
    # of mean 3) and no two calls' score noise is the same
    monkeypatch.setattr(sampled_method, "per_trial_mu_for_epsilon", lambda **kw: 0.5)
    recorder = _Recorder(monkeypatch)
    counts, noises = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns about a seed
        for _ in range(20):
            calls: list = []
            start = len(recorder.scores)
            _sample(_fake_runs(calls), None)
            counts.append(len(calls))
            first_choice = calls[0][0]
            at = SPACE.to_natural(torch.full((1, SPACE.dim), 0.5, dtype=torch.float64), choice=first_choice)
            noises.append(recorder.scores[start] - float(_losses(at).mean()))
    assert len(set(counts)) > 1, counts
    assert len(set(noises)) == len(noises)
