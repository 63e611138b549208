"""botorch_dp.optim.projected: the projected release (identity basis = the plain mechanism bit for
bit, projection before clipping, noise energy kσ² instead of dσ²)."""

import math

import pytest
import torch

from botorch_dp.optim.projected import projected_release
from botorch_dp.optim.subspace import orthonormal_basis
from botorch_dp.privacy.mechanisms import GaussianGradientMechanism, clip_rows

F64 = torch.float64


def projector(V):
    return V @ V.T


def _mechanism(seed, **kw):
    base = dict(
        clip_bound=1.0, num_users=30, privacy_mu=1.0, num_steps=4, generator=torch.Generator().manual_seed(seed)
    )
    base.update(kw)
    return GaussianGradientMechanism(**base)


def test_identity_basis_releases_the_same_bits_as_the_plain_mechanism():
    g = torch.Generator().manual_seed(6)
    A, Y = torch.randn(5, 9, generator=g, dtype=F64), torch.randn(9, 30, generator=g, dtype=F64)
    plain = _mechanism(0).release(A, Y, diagnostics=True)
    projected = projected_release(_mechanism(0), torch.eye(5, dtype=F64), A, Y, diagnostics=True)
    assert torch.equal(projected.release.gradient, plain.gradient)
    assert torch.equal(projected.coordinates, plain.gradient)
    assert projected.release.cost == plain.cost
    assert torch.equal(projected.release.diagnostics.unnoised_gradient, plain.diagnostics.unnoised_gradient)
    assert projected.unnoised_coordinates is None


def test_projection_happens_before_clipping_and_the_step_lives_in_the_span():
    g = torch.Generator().manual_seed(7)
    d, k, N, n = 6, 2, 8, 30
    V = orthonormal_basis(torch.randn(d, k, generator=g, dtype=F64))
    A, Y = torch.randn(d, N, generator=g, dtype=F64), 5 * torch.randn(N, n, generator=g, dtype=F64)
    out = projected_release(_mechanism(1, privacy_mu=math.inf), V, A, Y, diagnostics=True, keep_unnoised=True)
    # brute force: clip each user's projected estimate Ṽᵀ A y_i to B = 1 in k dimensions
    U = (V.T @ A @ Y).T  # n x k
    clipped, _ = clip_rows(U, 1.0)
    torch.testing.assert_close(out.unnoised_coordinates, clipped.mean(0), rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(out.coordinates, clipped.mean(0), rtol=1e-13, atol=1e-15)  # μ = inf: no noise
    # projecting after clipping in d dims would give a different (smaller) mean
    clipped_d, _ = clip_rows((A @ Y).T, 1.0)
    assert not torch.allclose(V.T @ clipped_d.mean(0), clipped.mean(0), atol=1e-3)
    # θ-space release Ṽ ũ lies in span(Ṽ); diagnostics are in θ-space
    torch.testing.assert_close(projector(V) @ out.release.gradient, out.release.gradient, rtol=0, atol=1e-14)
    torch.testing.assert_close(out.release.diagnostics.unnoised_gradient, V @ clipped.mean(0), rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="d x k"):
        projected_release(_mechanism(1), V[:5], A, Y)


def test_noise_energy_is_k_sigma_squared_instead_of_d_sigma_squared():
    d, k, reps = 400, 100, 50
    V = orthonormal_basis(torch.eye(d, dtype=F64)[:, :k] + 0.01)
    A, Y = torch.zeros(d, 1, dtype=F64), torch.zeros(1, 30, dtype=F64)  # ū = 0: the release is pure noise
    mech = _mechanism(8)
    sigma2 = mech.noise_std**2
    projected = torch.stack([projected_release(mech, V, A, Y).release.gradient for _ in range(reps)])
    full = torch.stack([mech.release(A, Y).gradient for _ in range(reps)])
    # E‖Ṽw‖² = kσ², E‖w‖² = dσ²; relative standard errors √(2/(k·reps)) = 2%, √(2/(d·reps)) = 1%
    assert abs(projected.pow(2).sum(-1).mean() / (k * sigma2) - 1) < 0.1
    assert abs(full.pow(2).sum(-1).mean() / (d * sigma2) - 1) < 0.05
