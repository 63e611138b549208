"""Full-matrix AdaGrad on released gradients (Kairouz et al., spec A3, §1.7 items 4–5)."""

import math

import numpy as np
import pytest
import torch

from botorch_dp.optim.step_rules import (
    ADAGRAD_EPS,
    PRECONDITIONERS,
    FullMatrixAdagrad,
    debiased_floor,
    floored_solve,
    make_step_optimizer,
    preconditioner_floor,
    projected_step,
    psd_sqrt,
)
from botorch_dp.optim.subspace import orthonormal_basis

F64 = torch.float64


def wide(d):
    """An inactive box."""
    return torch.tensor([[-1e6] * d, [1e6] * d], dtype=F64)


def gradients(num, d, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(d, generator=g, dtype=F64) for _ in range(num)]


def pinv_root(X):
    """G⁺ for G = (X Xᵀ)^{1/2}, from numpy's SVD X = U S Wᵀ: G⁺ = U S⁻¹ Uᵀ on S > 0 (no eigh)."""
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    keep = s > 1e-10 * s.max()
    return (U[:, keep] / s[keep]) @ U[:, keep].T


def reference_full_adagrad(theta0, grads, eta):
    """θ ← θ − η G_t⁺ g_t with G_t = (Σ_{s≤t} g_s g_sᵀ)^{1/2}."""
    theta = theta0.numpy().copy()
    path = []
    for t, g in enumerate(grads):
        X = np.stack([h.numpy() for h in grads[: t + 1]], axis=1)  # d x t
        theta = theta - eta * pinv_root(X) @ g.numpy()
        path.append(theta.copy())
    return torch.from_numpy(np.array(path))


def test_no_subspace_no_noise_is_exact_full_matrix_adagrad():
    # g_t lies in the range of S_t, so the floored inverse acts as the pseudo-inverse there
    grads = gradients(7, 4, 0)
    theta0 = torch.tensor([0.1, -0.2, 0.3, 0.4], dtype=F64)
    opt = make_step_optimizer(theta0, "adagrad_full", 0.3)
    assert isinstance(opt, FullMatrixAdagrad) and opt.preconditioner == "noisy"
    path = torch.stack([projected_step(opt, g, wide(4)) for g in grads])
    torch.testing.assert_close(path, reference_full_adagrad(theta0, grads, 0.3), rtol=0, atol=1e-7)
    # first step: G₁ = g₁g₁ᵀ/‖g₁‖, so θ₁ = θ₀ − η g₁/‖g₁‖ (a normalised step, as AdaGrad's)
    torch.testing.assert_close(path[0], theta0 - 0.3 * grads[0] / grads[0].norm(), rtol=0, atol=1e-7)


def test_fixed_subspace_equals_the_k_coordinate_formula():
    d, k = 4, 2
    V = orthonormal_basis(torch.randn(d, k, generator=torch.Generator().manual_seed(1), dtype=F64))
    coords = gradients(5, k, 2)
    theta0 = torch.zeros(d, dtype=F64)
    opt = make_step_optimizer(theta0, "adagrad_full", 0.5)
    path = torch.stack([projected_step(opt, V @ u, wide(4), basis=V) for u in coords])
    # the spec's version: Ĝ_t = (Σ ũ_s ũ_sᵀ)^{1/2} in k coordinates, step Ṽ Ĝ_t⁺ ũ_t
    expected = theta0.numpy().copy()
    for t, u in enumerate(coords):
        X = np.stack([c.numpy() for c in coords[: t + 1]], axis=1)  # k x t
        expected = expected - 0.5 * V.numpy() @ pinv_root(X) @ u.numpy()
        torch.testing.assert_close(path[t], torch.from_numpy(expected), rtol=0, atol=1e-7)
    # every step stays in span(Ṽ)
    torch.testing.assert_close(V @ V.T @ path[-1], path[-1], rtol=0, atol=1e-12)


def test_debiased_preconditioner_subtracts_the_noise_energy():
    sigma = 0.5
    u1, u2 = torch.tensor([2.0, 0.0], dtype=F64), torch.tensor([0.0, 1.0], dtype=F64)
    opt = make_step_optimizer(torch.zeros(2, dtype=F64), "adagrad_full", 1.0, preconditioner="noisy_debiased")
    projected_step(opt, u1, wide(2), noise_std=sigma)
    theta = projected_step(opt, u2, wide(2), noise_std=sigma)
    # step 1: PSD(diag(4 − 0.25, −0.25))^{1/2} = diag(√3.75, 0), floor (4·2·σ⁴)^{1/4} = 0.84: u1 sees √3.75
    # step 2: diag(4 − 0.5, 1 − 0.5)^{1/2} = diag(√3.5, √0.5), floor (4·2·2σ⁴)^{1/4} = 1 > √0.5: u2 sees 1
    assert debiased_floor(2, 2 * sigma**4) == pytest.approx(1.0)
    torch.testing.assert_close(theta, -u1 / math.sqrt(3.75) - u2 / 1.0, rtol=1e-12, atol=1e-12)
    state = opt.state_dict()["state"][0]
    torch.testing.assert_close(state["noise_outer"], 2 * sigma**2 * torch.eye(2, dtype=F64), rtol=0, atol=0)
    assert float(state["noise_fourth"]) == 2 * sigma**4
    # the plain "noisy" preconditioner would have used diag(4, 1)
    noisy = make_step_optimizer(torch.zeros(2, dtype=F64), "adagrad_full", 1.0)
    projected_step(noisy, u1, wide(2), noise_std=sigma)
    torch.testing.assert_close(
        projected_step(noisy, u2, wide(2), noise_std=sigma), -u1 / 2 - u2 / 1, rtol=1e-12, atol=1e-12
    )


def test_debiased_floor_keeps_a_pure_noise_step_bounded():
    # ũ smaller than its noise: PSD(ũũᵀ − σ²I) = 0, so without the floor the step would be ũ/eps ~ 1e7
    u = torch.tensor([0.1, 0.1], dtype=F64)
    opt = make_step_optimizer(torch.zeros(2, dtype=F64), "adagrad_full", 1.0, preconditioner="noisy_debiased")
    theta = projected_step(opt, u, wide(2), noise_std=1.0)
    floor = (4 * 2 * 1.0) ** 0.25
    torch.testing.assert_close(theta, -u / floor, rtol=1e-12, atol=1e-15)
    assert debiased_floor(2, 0.0) == ADAGRAD_EPS  # no noise: the plain eps floor


def test_private_preconditioner_is_floored_at_the_goe_edge_and_descends():
    k, sigma_b = 3, 0.2
    floor = preconditioner_floor(k, sigma_b)
    assert floor == pytest.approx(2 * math.sqrt(3) * 0.2)
    assert preconditioner_floor(k, 0.0) == ADAGRAD_EPS
    Q = orthonormal_basis(torch.randn(3, 3, generator=torch.Generator().manual_seed(3), dtype=F64))
    H = Q @ torch.diag(torch.tensor([2.0, 0.1, -1.0], dtype=F64)) @ Q.T  # indefinite, as GOE noise makes it
    H_asym = H + torch.triu(torch.ones(3, 3, dtype=F64), 1) * 1e-3  # not symmetric: symmetrised first
    u = torch.tensor([1.0, -2.0, 0.5], dtype=F64)
    opt = make_step_optimizer(torch.zeros(3, dtype=F64), "adagrad_full", 1.0, preconditioner="private")
    theta = projected_step(opt, u, wide(3), released_preconditioner=H, preconditioner_noise_std=sigma_b)
    expected = -(Q @ torch.diag(1 / torch.tensor([2.0, floor, floor], dtype=F64)) @ Q.T @ u)
    torch.testing.assert_close(theta, expected, rtol=1e-12, atol=1e-12)
    assert float(u @ (-theta)) > 0  # a descent direction although H is indefinite
    sym = (H_asym + H_asym.T) / 2
    torch.testing.assert_close(floored_solve(H_asym, u, floor), floored_solve(sym, u, floor), rtol=0, atol=0)
    with pytest.raises(ValueError, match="released 3 x 3"):
        projected_step(opt, u, wide(3))


def test_adagrad_lemma_b3_and_c4_hold_for_the_square_roots():
    # Σ_t ‖g_t‖²_{G_t⁺} ≤ 2 Tr(G_T) (Lemma B.3) and Σ a_i/√(Σ_{j≤i} a_j) ≤ 2√(Σ a_i) (Lemma C.4)
    for seed in range(5):
        grads = gradients(12, 4, 10 + seed)
        S = torch.zeros(4, 4, dtype=F64)
        total = 0.0
        for g in grads:
            S = S + torch.outer(g, g)
            G = psd_sqrt(S)
            torch.testing.assert_close(G @ G, S, rtol=1e-10, atol=1e-10)
            total += float(g @ torch.linalg.pinv(G, hermitian=True, rtol=1e-10) @ g)
        assert total <= 2 * float(torch.trace(psd_sqrt(S))) + 1e-9
        a = torch.rand(30, generator=torch.Generator().manual_seed(seed), dtype=F64)
        assert float((a / a.cumsum(0).sqrt()).sum()) <= 2 * math.sqrt(float(a.sum())) + 1e-12


def test_psd_sqrt_clips_negative_eigenvalues():
    M = torch.diag(torch.tensor([4.0, -1.0], dtype=F64))
    assert torch.equal(psd_sqrt(M), torch.diag(torch.tensor([2.0, 0.0], dtype=F64)))


@pytest.mark.parametrize("preconditioner", PRECONDITIONERS)
def test_state_round_trip_continues_identically(preconditioner):
    grads = gradients(6, 3, 4)
    extra = dict(noise_std=0.3)
    if preconditioner == "private":
        extra = dict(released_preconditioner=torch.eye(3, dtype=F64) * 2, preconditioner_noise_std=0.1)
    theta0 = torch.tensor([0.1, 0.2, -0.3], dtype=F64)
    box = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=F64)
    full = make_step_optimizer(theta0, "adagrad_full", 0.2, preconditioner=preconditioner)
    path = [projected_step(full, g, box, **extra) for g in grads]
    first = make_step_optimizer(theta0, "adagrad_full", 0.2, preconditioner=preconditioner)
    for g in grads[:3]:
        theta = projected_step(first, g, box, **extra)
    restored = make_step_optimizer(theta, "adagrad_full", 0.2, preconditioner=preconditioner)
    restored.load_state_dict(first.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip([projected_step(restored, g, box, **extra) for g in grads[3:]], path[3:], strict=True)
    )


def test_bad_settings_and_states_are_refused():
    theta = torch.zeros(2, dtype=F64)
    with pytest.raises(ValueError, match="only used with step_rule='adagrad_full'"):
        make_step_optimizer(theta, "adagrad", 0.1, preconditioner="noisy")
    with pytest.raises(ValueError, match="preconditioner must be one of"):
        make_step_optimizer(theta, "adagrad_full", 0.1, preconditioner="exact")
    opt = make_step_optimizer(theta, "adagrad_full", 0.1)
    projected_step(opt, torch.ones(2, dtype=F64), wide(2))
    state = opt.state_dict()
    state["state"][0]["sum_outer"] = torch.full((2, 2), float("nan"), dtype=F64)
    with pytest.raises(ValueError, match="sum_outer"):
        make_step_optimizer(theta, "adagrad_full", 0.1).load_state_dict(state)
    state["state"][0] = {"step": torch.tensor(1.0), "sum": torch.ones(2, dtype=F64)}  # an Adagrad state
    with pytest.raises(ValueError, match="noise_fourth"):
        make_step_optimizer(theta, "adagrad_full", 0.1).load_state_dict(state)
    with pytest.raises(ValueError, match="basis"):
        projected_step(opt, torch.ones(2, dtype=F64), wide(2), basis=torch.eye(3, dtype=F64))
