"""The fixed-schedule rows (botorch_dp/audit/gradient.py): the overflow row catches the old
clipping rule, and the claim is the ledger's."""

import pytest
import torch

from botorch_dp.audit.gradient import audit_gradient_release
from botorch_dp.optim import users
from botorch_dp.privacy.mechanisms.sums import ClippedSum


def test_the_overflow_row_catches_the_old_clipping_rule(monkeypatch):
    def unsafe(W, blocks, bound, chunk_size=None, *, nonfinite="refuse"):
        """The pre-fix rule: W @ y overflows to inf on D′, and inf · (B/inf) = NaN."""
        G = (W @ torch.cat(list(blocks))).transpose(0, 1)
        scale = (bound / G.norm(dim=-1, keepdim=True)).clamp(max=1.0)
        return ClippedSum(
            total=(G * scale).sum(0), bound=float(bound), num_users=G.shape[0], num_clipped=int((scale < 1).sum())
        )

    monkeypatch.setattr(users, "clipped_sum", unsafe)  # where the in-memory users look it up
    # the grid release (issue 40) refuses a non-finite statistic before drawing anything, so the old rule's NaN
    # on D′ is stopped at the boundary instead of released (which the audit caught before: every D′ run NaN)
    with pytest.raises(ValueError, match="not finite; nothing was released"):
        audit_gradient_release(num_runs=300, overflow=True, seed=0)


def test_the_claim_is_what_the_ledger_reports():
    result = audit_gradient_release(num_runs=100, privacy_mu=2.0, num_steps=2, seed=3)
    assert result.claimed_mu == pytest.approx(2.0, rel=1e-12)  # T = 2 steps of μ/√2 composed on the ledger
    assert result.empirical_mu_lower <= result.claimed_mu
