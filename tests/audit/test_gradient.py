"""The fixed-schedule rows (botorch_dp/audit/gradient.py): the overflow row catches the old
clipping rule, and the claim is the ledger's."""

import pytest
import torch

from botorch_dp.audit.gradient import audit_gradient_release
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism


def test_the_overflow_row_catches_the_old_clipping_rule(monkeypatch):
    release = GaussianGradientMechanism.release

    def unsafe(self, A, Y, *, diagnostics=False, nonfinite="refuse", **kwargs):
        """The pre-fix rule: A @ y overflows to inf on D′, and inf · (B/inf) = NaN."""
        Y = Y if isinstance(Y, torch.Tensor) else torch.cat(list(Y))
        G = (A @ Y).transpose(0, 1)
        mean = (G * (self.clip_bound / G.norm(dim=-1, keepdim=True)).clamp(max=1.0)).sum(0) / self.num_users
        out = release(self, A, torch.zeros_like(Y))
        out.gradient = mean + self.sample_noise(mean.shape[0], dtype=mean.dtype)
        return out

    monkeypatch.setattr(GaussianGradientMechanism, "release", unsafe)
    broken = audit_gradient_release(num_runs=300, overflow=True, seed=0)
    assert broken.false_negative_rate == 0.0  # every D′ run releases NaN
    assert broken.empirical_mu_lower > broken.claimed_mu


def test_the_claim_is_what_the_ledger_reports():
    result = audit_gradient_release(num_runs=100, privacy_mu=2.0, num_steps=2, seed=3)
    assert result.claimed_mu == pytest.approx(2.0, rel=1e-12)  # T = 2 steps of μ/√2 composed on the ledger
    assert result.empirical_mu_lower <= result.claimed_mu
