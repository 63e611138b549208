"""The private AdaGrad preconditioner release (botorch_dp/privacy/mechanisms/preconditioner.py; Kairouz et al., spec A3,
E2.1–E2.3, §1.7 items 1–3)."""

import math

import numpy as np
import pytest
import torch

from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.ledger import Gaussian, PrivacyLedger
from botorch_dp.privacy.mechanisms import (
    GaussianGradientMechanism,
    GOEPreconditionerMechanism,
    PrivacyCost,
    gram_sqrt,
    sample_goe,
)
from botorch_dp.privacy.mechanisms._noise import release_goe
from botorch_dp.utils import torch_threads

F64 = torch.float64


def ratio(X, E):
    """‖G(X + E) − G(X)‖_F / ‖E‖_F for G(X) = (X Xᵀ)^{1/2}, batched."""
    return (gram_sqrt(X + E) - gram_sqrt(X)).flatten(-2).norm(dim=-1) / E.flatten(-2).norm(dim=-1)


# ------------------------------------------------------------------------- sensitivity (E2.1)
def test_gram_sqrt_is_the_square_root_and_matches_an_eigendecomposition():
    X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    G = gram_sqrt(X)
    assert torch.equal(G, G.T)
    torch.testing.assert_close(G @ G, X @ X.T, rtol=1e-12, atol=1e-12)
    eigenvalues, Q = np.linalg.eigh((X @ X.T).numpy())  # well conditioned: eigh is fine here
    torch.testing.assert_close(G, torch.from_numpy((Q * np.sqrt(eigenvalues)) @ Q.T), rtol=1e-10, atol=1e-12)
    assert torch.equal(gram_sqrt(X[:, :0]), torch.zeros(4, 4, dtype=F64))


@pytest.mark.parametrize("t", [1, 2, 5, 25])
def test_rank_one_example_attains_the_corrected_sensitivity_sqrt2(t):
    # gradients c·e₁ at all t steps, perturbed by Δ·e₂: ‖ΔG‖_F / ‖ΔX‖_F = √(2c² + Δ² − 2c³/r)/Δ → √2
    c, delta = 1.0, 1e-4
    X = torch.zeros(3, t, dtype=F64)
    X[0] = c
    E = torch.zeros(3, t, dtype=F64)
    E[1] = delta
    assert abs(float(ratio(X, E)) - math.sqrt(2)) < 1e-6
    # the paper's claim Δ_F(G_t) ≤ √t Δ (ratio 1) is violated; √(2t) Δ is what the mechanism uses
    mech = GOEPreconditionerMechanism(sensitivity=delta, privacy_mu=1.0, num_steps=25)
    difference = float((gram_sqrt(X + E) - gram_sqrt(X)).norm())
    assert difference > math.sqrt(t) * delta * 1.4
    assert difference <= mech.frobenius_sensitivity(t) * (1 + 1e-9)


def test_random_pairs_never_exceed_sqrt2_and_projection_does_not_increase_it():
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for k, t in [(2, 1), (3, 2), (3, 5), (5, 3), (4, 25)]:
        X = torch.randn(2000, k, t, generator=g, dtype=F64)
        X = X * torch.rand(2000, 1, 1, generator=g, dtype=F64) ** 3  # include near-singular X
        E = 10 ** (-4 * torch.rand(2000, 1, 1, generator=g, dtype=F64)) * torch.randn(
            2000, k, t, generator=g, dtype=F64
        )
        worst = max(worst, float(ratio(X, E).max()))
        # ṼᵀGṼ for an orthonormal Ṽ: the Frobenius change is no larger than that of G
        V = torch.linalg.qr(torch.randn(k, max(k - 1, 1), generator=g, dtype=F64)).Q
        dG = gram_sqrt(X + E) - gram_sqrt(X)
        assert bool(((V.T @ dG @ V).flatten(-2).norm(dim=-1) <= dG.flatten(-2).norm(dim=-1) * (1 + 1e-12)).all())
    assert worst <= math.sqrt(2) + 1e-9
    assert worst > 1.2  # the pairs reach close to the bound: the check has power


# ------------------------------------------------------------------------- GOE (E2.3)
def test_goe_moments_fixed_seed():
    k, draws = 4, 4000
    g = torch.Generator().manual_seed(2)
    M = torch.stack([sample_goe(k, generator=g) for _ in range(draws)])
    assert torch.equal(M, M.transpose(-1, -2))
    diag = M.diagonal(dim1=-2, dim2=-1)
    upper = torch.triu_indices(k, k, 1)
    off = M[:, upper[0], upper[1]]
    # tolerances ≈ 5 standard errors: a variance from 16000 (24000) normal draws ≈ 1.1% (0.9%)
    assert abs(float(diag.var()) / 2 - 1) < 0.06
    assert abs(float(off.var()) - 1) < 0.05
    assert abs(float(M.pow(2).sum((-1, -2)).mean()) / (k * (k + 1)) - 1) < 0.04  # E‖M‖_F² = k(k+1)
    assert abs(float(diag.mean())) < 0.06 and abs(float(off.mean())) < 0.04
    # distinct upper entries are uncorrelated
    entries = torch.cat([diag, off], dim=1)
    corr = torch.corrcoef(entries.T) - torch.eye(entries.shape[1], dtype=F64)
    assert float(corr.abs().max()) < 0.08
    # ṼᵀMṼ for an orthonormal 6 x 3 Ṽ is GOE_3: the same moments
    V = torch.linalg.qr(torch.randn(6, 3, generator=g, dtype=F64)).Q
    P = torch.stack([V.T @ sample_goe(6, generator=g) @ V for _ in range(draws)])
    assert abs(float(P.diagonal(dim1=-2, dim2=-1).var()) / 2 - 1) < 0.07
    assert abs(float(P[:, 0, 1].var()) - 1) < 0.11 and abs(float(P[:, 1, 2].var()) - 1) < 0.11
    assert abs(float(P.pow(2).sum((-1, -2)).mean()) / 12 - 1) < 0.05


def test_goe_spectral_edge_is_two_sqrt_k():
    M = sample_goe(400, generator=torch.Generator().manual_seed(3))
    with torch_threads(1):  # one thread: a shared 2-core machine makes LAPACK's threads crawl
        edge = float(torch.linalg.eigvalsh(M).abs().max()) / math.sqrt(400)
    assert abs(edge - 2) < 0.06  # within 3% (finite-k edge is slightly below 2)


# ------------------------------------------------------------------------- the mechanism
def test_noise_calibration_gives_mu_h_over_sqrt_t_per_release():
    delta, mu_h, T = 0.02, 0.7, 25
    mech = GOEPreconditionerMechanism(sensitivity=delta, privacy_mu=mu_h, num_steps=T)
    for t in (1, 4, 25):
        assert mech.noise_std(t) == pytest.approx(math.sqrt(t * T) * delta / mu_h, rel=1e-14)
        # GOE noise has std √2 σ_B along any Frobenius direction: μ = Δ_F / (√2 σ_B)
        assert mech.frobenius_sensitivity(t) / (math.sqrt(2) * mech.noise_std(t)) == pytest.approx(mu_h / 5, rel=1e-14)
    assert mech.step_mu == pytest.approx(mu_h / 5)


def test_release_is_the_root_plus_scaled_goe_noise_and_returns_its_cost():
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(4), dtype=F64)
    mech = GOEPreconditionerMechanism(
        sensitivity=0.1, privacy_mu=2.0, num_steps=9, generator=torch.Generator().manual_seed(5)
    )
    out = mech.release(X)
    # the grid release of G = (X Xᵀ)^{1/2} with w = (G_ii/√2, G_ij)'s sensitivity √t Δ at μ_H/√T
    expected, noise = release_goe(
        gram_sqrt(X), sensitivity=2 * 0.1, mu=2.0 / 3, generator=torch.Generator().manual_seed(5), secure_rng=False
    )
    assert torch.equal(out.matrix, expected) and torch.equal(out.matrix, out.matrix.T)
    assert noise is not None and noise.noise_std >= mech.noise_std(4)
    assert torch.equal(out.matrix / noise.grid, (out.matrix / noise.grid).round())
    torch.testing.assert_close(out.matrix, gram_sqrt(X), rtol=0, atol=10 * mech.noise_std(4))
    assert out.cost == PrivacyCost(mu=2.0 / 3) and out.noise_std == mech.noise_std(4)


def test_no_noise_at_infinite_mu_and_refusals_draw_nothing():
    g = torch.Generator().manual_seed(6)
    before = g.get_state()
    X = torch.randn(2, 3, dtype=F64)
    clean = GOEPreconditionerMechanism(sensitivity=0.1, privacy_mu=math.inf, num_steps=3, generator=g).release(X)
    assert torch.equal(clean.matrix, gram_sqrt(X)) and clean.noise_std == 0.0 and clean.cost.mu == math.inf
    mech = GOEPreconditionerMechanism(sensitivity=0.1, privacy_mu=1.0, num_steps=3, generator=g)
    for bad, match in [
        (torch.tensor([[1.0, float("nan")]], dtype=F64), "not finite"),
        (torch.ones(2, 4, dtype=F64), "t <= T"),
        (torch.ones(2, 0, dtype=F64), "t <= T"),
        (torch.ones(3, dtype=F64), "k x t"),
    ]:
        with pytest.raises(ValueError, match=match):
            mech.release(bad)
    assert torch.equal(g.get_state(), before)
    for kwargs, match in [
        (dict(sensitivity=0.0), "sensitivity"),
        (dict(privacy_mu=-1.0), "μ_H"),
        (dict(num_steps=0), "T"),
    ]:
        with pytest.raises(ValueError, match=match):
            GOEPreconditionerMechanism(**{**dict(sensitivity=0.1, privacy_mu=1.0, num_steps=3), **kwargs})


def test_accounting_two_releases_per_step_compose_to_mu_one():
    # T = 25 steps, each a gradient release (μ_g = 1/√2 over T) and a preconditioner (μ_H = 1/√2)
    T, n, B = 25, 100, 1.0
    grad = GaussianGradientMechanism(clip_bound=B, num_users=n, privacy_mu=1 / math.sqrt(2), num_steps=T)
    precond = GOEPreconditionerMechanism(sensitivity=grad.sensitivity, privacy_mu=1 / math.sqrt(2), num_steps=T)
    ledger = PrivacyLedger(validation_mu_budget=1.0 + 1e-12)
    for t in range(T):
        ledger.external.check(Gaussian(math.hypot(grad.step_mu, precond.step_mu)))
        ledger.external.record(Gaussian(grad.step_mu), run_id="run", key=f"step-{t:04d}")
        ledger.external.record(Gaussian(precond.step_mu), run_id="run", key=f"step-{t:04d}/precond")
    assert ledger.validation.mu() == pytest.approx(1.0, rel=1e-12)
    assert ledger.validation.epsilon(1e-5) == pytest.approx(4.3772, abs=5e-5)
    assert gdp_epsilon(math.hypot(1 / math.sqrt(2), 1 / math.sqrt(2)), 1e-5) == pytest.approx(4.3772, abs=5e-5)
