r"""The audit designs of Kairouz et al.'s releases (``audit.subspace``). Without noise, the projected
release's neighbours give the released coordinate ``∓B/n``, exactly the sensitivity ``2B/n`` apart,
and the preconditioner's statistic is ``∓‖G′ − G‖_F/2`` with ``‖G′ − G‖_F`` within 2% of its bound
``√2 Δ`` (the rank-one worst case); the claims are the ledger's. The rows' soundness and leak
detection are tested in test_rows.py."""

import math

import torch

from botorch_dp.audit import subspace


def test_without_noise_the_projected_neighbours_are_the_sensitivity_apart(noiseless_design):
    n, B = 5, 1.0  # audit_config's clip bound
    stat_d, stat_d_prime, claims = noiseless_design(subspace, subspace.audit_projected_release, num_users=n)
    torch.testing.assert_close(stat_d, torch.full((4,), -B / n, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(stat_d_prime, torch.full((4,), B / n, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    assert torch.equal(claims, torch.ones(8, dtype=torch.float64))  # the whole run's μ = 1


def test_without_noise_the_preconditioner_statistic_is_half_the_near_worst_case_gap(noiseless_design):
    n, B = 100, 1.0
    stat_d, stat_d_prime, claims = noiseless_design(subspace, subspace.audit_private_preconditioner, num_users=n)
    # each run sits at ∓‖G′(X) − G(X)‖_F/2 on its own public batch X
    gap = 2 * torch.cat([-stat_d, stat_d_prime])
    bound = math.sqrt(2) * 2 * B / n
    assert bool((gap <= bound * (1 + 1e-9)).all()) and bool((gap >= 0.98 * bound).all()), (gap, bound)
    torch.testing.assert_close(claims, torch.ones(8, dtype=torch.float64), rtol=1e-12, atol=0.0)  # μ_H/√T = 1
