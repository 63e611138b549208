r"""The adaptive clip count's audit design (``audit.adaptive_clip``): without noise its neighbours'
released counts are ``n − 1`` and ``n``, one apart (the count's sensitivity, the largest change one
user can make), and the claim it reads is the count's ledger entry ``μ_C/√T = μ √f_C = 1``. The
row's soundness and leak detection are tested in test_rows.py."""

import math

import torch

from botorch_dp.audit import adaptive_clip


def test_without_noise_the_neighbours_counts_are_n_minus_1_and_n(noiseless_design):
    stat_d, stat_d_prime, claims = noiseless_design(adaptive_clip, adaptive_clip.audit_clip_count_release, num_users=5)
    assert torch.equal(stat_d, torch.full((4,), 4.0, dtype=torch.float64))
    assert torch.equal(stat_d_prime, torch.full((4,), 5.0, dtype=torch.float64))
    assert torch.allclose(claims, torch.full((8,), math.sqrt(2.0) * math.sqrt(0.5), dtype=torch.float64), rtol=1e-12)
