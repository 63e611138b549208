"""The adaptive-schedule rows (botorch_dp/audit/adaptive_norm.py): the likelihood-ratio statistic
and a claim read from the run."""

import math

import pytest
import torch

from botorch_dp.audit.adaptive_norm import audit_noisy_gd_adaptive_norm, release_llr


def test_release_llr_weights_each_release_by_its_mu_squared():
    llr = release_llr([0.5, -1.0], [0.3, 0.4], torch.tensor([[2.0], [1.0]], dtype=torch.float64), [0.5, 0.6])
    assert llr == pytest.approx(0.09 * 0.5 - 0.16 + 0.25 * 2.0 + 0.36)
    assert release_llr([], [], torch.empty(0, 1, dtype=torch.float64), []) == 0.0


def test_noisy_gd_row_reads_its_claim_and_spends_it():
    # the filter spends exactly μ on every run, so the statistic is Gaussian with shift μ: tight at any μ
    result = audit_noisy_gd_adaptive_norm(num_runs=1000, privacy_mu=2.0, seed=1)
    assert result.claimed_mu == pytest.approx(2.0, rel=1e-12)
    assert result.empirical_mu_lower <= 2.0
    assert abs(result.empirical_mu - 2.0) < 0.5
    assert math.isfinite(result.empirical_mu)
