r"""The audit design of ``tune``'s private choice (``audit.one_call``): without noise the first
configuration's released score is the clipped mean loss, 0 on ``D`` and ``C/n`` on ``D′`` (the score's
sensitivity), and the claim is the ``μ_score`` the call reports, set to 1 by the target ``(ε, δ)``
the row computes. The row's soundness and leak detection are tested in test_rows.py."""

import torch

from botorch_dp.audit import one_call


def test_without_noise_the_first_score_moves_by_the_sensitivity_and_the_claim_is_one(noiseless_design):
    n, clip = 10, 1.0
    stat_d, stat_d_prime, claims = noiseless_design(one_call, one_call.audit_tune_score, num_users=n, loss_clip=clip)
    assert torch.equal(stat_d, torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(stat_d_prime, torch.full((4,), clip / n, dtype=torch.float64), rtol=1e-12, atol=0.0)
    torch.testing.assert_close(claims, torch.ones(8, dtype=torch.float64), rtol=1e-6, atol=0.0)
