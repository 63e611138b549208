r"""Step rules (botorch_dp/optim/options/steps.py): SGD and AdaGrad release nothing of their own and step
as ``θ − ηg`` (SGD, closed form); full-matrix AdaGrad's private preconditioner takes ``f_H`` of the
steps' budget, charges ``μ_H/√T`` per step under ``step-t/precond`` and conflicts with a moving bound
or budget; each rule is rebuilt from its ``spec()`` and bad settings are refused naming the field.
The optimizers: SGD and AdaGrad steps match hand computations, project once and resume identically
from a ``state_dict``; full-matrix AdaGrad (Kairouz et al., spec A3, §1.7 items 4–5) matches a numpy
SVD reference with and without a fixed subspace, its preconditioner policies (``Noisy``,
``NoisyDebiased``, ``PrivateGOE``) are floored as the spec says, and AdaGrad's lemmas B.3 and C.4
hold for the square roots."""

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
import torch

from botorch_dp.optim import DPGIBO
from botorch_dp.optim.legacy_options import strategies_from_flat
from botorch_dp.optim.options import (
    SGD,
    AdaGrad,
    FullMatrixAdaGrad,
    Noisy,
    PreconditionerRecord,
    PrivateGOE,
    StepPolicy,
    from_spec,
    lookup,
    register,
    registered,
)
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.steps import (
    ADAGRAD_EPS,
    FullMatrixAdagrad,
    debiased_floor,
    floored_solve,
    preconditioner_floor,
    projected_step,
    psd_sqrt,
)
from botorch_dp.optim.subspace import orthonormal_basis
from tests.optim.options.plugin import UserStrategy, assert_not_checkpointed, run_and_resume
from tests.optim.options.strategy_config import config_with
from tests.test_option_pins import _objective, _settings


@pytest.mark.parametrize(
    "rule",
    [SGD(), AdaGrad(), FullMatrixAdaGrad(), FullMatrixAdaGrad("noisy_debiased"), FullMatrixAdaGrad(PrivateGOE(0.3))],
)
def test_a_rule_is_rebuilt_from_its_spec(rule):
    assert from_spec("step_rule", json.loads(json.dumps(rule.spec()))) == rule


def test_the_string_private_is_the_default_private_preconditioner():
    rule = FullMatrixAdaGrad("private")
    assert rule.private == PrivateGOE(0.5) and rule.kind == "private" and rule.mu_fraction == 0.5
    assert rule.requires == {"fixed_basis", "fixed_clip_bound"} and set(rule.conflicts()) == {
        "clip:adaptive",
        "noise:adaptive_norm",
    }
    assert FullMatrixAdaGrad("noisy").conflicts() == {} and FullMatrixAdaGrad("noisy").mu_fraction is None


def test_sgd_steps_theta_minus_eta_g_and_releases_nothing():
    theta = torch.tensor([0.5, -1.0], dtype=torch.float64)
    g = torch.tensor([2.0, -4.0], dtype=torch.float64)
    optimizer = SGD().make_optimizer(theta, 0.25)
    param = optimizer.param_groups[0]["params"][0]
    param.grad = g.clone()
    optimizer.step()
    torch.testing.assert_close(param.detach(), theta - 0.25 * g, rtol=0, atol=0)
    plan = RunPlan(4, 4, 2, 10, BudgetSplit(1.0))
    for rule in (SGD(), AdaGrad(), FullMatrixAdaGrad()):
        assert rule.bound_parts(plan) == {}


def test_the_private_preconditioner_charges_its_share_per_step():
    rule = FullMatrixAdaGrad(PrivateGOE(0.36))
    plan = RunPlan(9, 9, 2, 10, BudgetSplit(2.0, precond_fraction=0.36))
    parts = rule.bound_parts(plan)
    assert list(parts) == ["precond"]
    assert parts["precond"].mu == pytest.approx(2.0 * math.sqrt(0.36) / math.sqrt(9), rel=1e-12)  # μ_H/√T


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FullMatrixAdaGrad("exact"), "preconditioner must be one of"),
        (lambda: FullMatrixAdaGrad(0.5), "preconditioner must be one of"),  # type: ignore[arg-type]
        (lambda: PrivateGOE(1.0), r"preconditioner_mu_fraction must lie in \(0, 1\), got 1.0"),
        (lambda: PrivateGOE(0.0), "preconditioner_mu_fraction"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


# ------------------------------------------------ the optimizers: SGD and AdaGrad
BOUNDS = torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)


def test_sgd_step_is_theta_minus_eta_g_then_projected():
    theta = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64)
    g = torch.tensor([1.0, -2.0, -3.0], dtype=torch.float64)
    opt = SGD().make_optimizer(theta, 0.25)
    new = projected_step(opt, g, BOUNDS)
    # θ − η g = (-0.05, 0.0, 1.65): the last coordinate leaves the box and is projected to 1
    torch.testing.assert_close(new, torch.tensor([-0.05, 0.0, 1.0], dtype=torch.float64), rtol=0, atol=1e-15)
    # the optimizer holds the projected iterate, so the next step starts from it
    torch.testing.assert_close(opt.param_groups[0]["params"][0], new, rtol=0, atol=0)
    assert theta.tolist() == [0.2, -0.5, 0.9]  # the caller's tensor is not modified


def test_adagrad_steps_match_a_hand_computation():
    theta = torch.zeros(3, dtype=torch.float64)
    g1 = torch.tensor([0.3, -4.0, 0.0], dtype=torch.float64)
    g2 = torch.tensor([0.4, 3.0, 1.0], dtype=torch.float64)
    eta = 0.1
    opt = AdaGrad().make_optimizer(theta, eta)
    # step 1: Σg² = g1², so each nonzero coordinate moves by η·sign(g) (up to Adagrad's eps)
    step1 = projected_step(opt, g1, BOUNDS)
    expected1 = -eta * g1 / (g1.abs() + ADAGRAD_EPS)
    torch.testing.assert_close(step1, expected1, rtol=1e-14, atol=1e-15)
    # step 2: Σg² = (0.09 + 0.16, 16 + 9, 0 + 1) = (0.25, 25, 1), √ = (0.5, 5, 1)
    step2 = projected_step(opt, g2, BOUNDS)
    root = torch.tensor([0.5, 5.0, 1.0], dtype=torch.float64)
    expected2 = expected1 - eta * g2 / (root + ADAGRAD_EPS)
    torch.testing.assert_close(step2, expected2, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(opt.state_dict()["state"][0]["sum"], g1**2 + g2**2, rtol=0, atol=0)


def test_adagrad_projection_does_not_reset_the_accumulated_sum():
    opt = AdaGrad().make_optimizer(torch.zeros(1, dtype=torch.float64), 5.0)
    box = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    assert projected_step(opt, torch.tensor([-1.0], dtype=torch.float64), box).item() == 1.0  # 0 + 5, clipped
    # second step: 1 − 5·1/√2 ≈ −2.54, projected to −1; the sum counts both gradients
    assert projected_step(opt, torch.tensor([1.0], dtype=torch.float64), box).item() == -1.0
    assert opt.state_dict()["state"][0]["sum"].item() == 2.0


@pytest.mark.parametrize("rule", [cls() for cls in registered("step_rule").values()])
def test_state_dict_round_trip_continues_identically(rule):
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, generator=gen, dtype=torch.float64) for _ in range(6)]
    theta0 = torch.tensor([0.1, 0.2, -0.3], dtype=torch.float64)
    full = rule.make_optimizer(theta0, 0.2)
    path = [projected_step(full, g, BOUNDS) for g in grads]

    first = rule.make_optimizer(theta0, 0.2)
    for g in grads[:3]:
        theta = projected_step(first, g, BOUNDS)
    state = first.state_dict()
    restored = rule.make_optimizer(theta, 0.2)  # as DPGIBO.load_state_dict rebuilds it
    restored.load_state_dict(state)
    resumed = [projected_step(restored, g, BOUNDS) for g in grads[3:]]
    assert all(torch.equal(a, b) for a, b in zip(resumed, path[3:], strict=True))


def test_unknown_step_rule_is_refused():
    with pytest.raises(ValueError, match="step_rule must be one of"):
        lookup("step_rule", "adam", "step_rule")
    with pytest.raises(ValueError, match="step_rule must be one of"):
        strategies_from_flat({"preconditioner": None}, {"step_rule": "adam"})  # the old keywords


# ------------------------------------------------ full-matrix AdaGrad and its preconditioner policies
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
    opt = FullMatrixAdaGrad().make_optimizer(theta0, 0.3)
    assert isinstance(opt, FullMatrixAdagrad) and opt.preconditioner == Noisy()
    path = torch.stack([projected_step(opt, g, wide(4)) for g in grads])
    torch.testing.assert_close(path, reference_full_adagrad(theta0, grads, 0.3), rtol=0, atol=1e-7)
    # first step: G₁ = g₁g₁ᵀ/‖g₁‖, so θ₁ = θ₀ − η g₁/‖g₁‖ (a normalised step, as AdaGrad's)
    torch.testing.assert_close(path[0], theta0 - 0.3 * grads[0] / grads[0].norm(), rtol=0, atol=1e-7)


def test_fixed_subspace_equals_the_k_coordinate_formula():
    d, k = 4, 2
    V = orthonormal_basis(torch.randn(d, k, generator=torch.Generator().manual_seed(1), dtype=F64))
    coords = gradients(5, k, 2)
    theta0 = torch.zeros(d, dtype=F64)
    opt = FullMatrixAdaGrad().make_optimizer(theta0, 0.5)
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
    opt = FullMatrixAdaGrad("noisy_debiased").make_optimizer(torch.zeros(2, dtype=F64), 1.0)
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
    noisy = FullMatrixAdaGrad().make_optimizer(torch.zeros(2, dtype=F64), 1.0)
    projected_step(noisy, u1, wide(2), noise_std=sigma)
    torch.testing.assert_close(
        projected_step(noisy, u2, wide(2), noise_std=sigma), -u1 / 2 - u2 / 1, rtol=1e-12, atol=1e-12
    )


def test_debiased_floor_keeps_a_pure_noise_step_bounded():
    # ũ smaller than its noise: PSD(ũũᵀ − σ²I) = 0, so without the floor the step would be ũ/eps ~ 1e7
    u = torch.tensor([0.1, 0.1], dtype=F64)
    opt = FullMatrixAdaGrad("noisy_debiased").make_optimizer(torch.zeros(2, dtype=F64), 1.0)
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
    opt = FullMatrixAdaGrad("private").make_optimizer(torch.zeros(3, dtype=F64), 1.0)
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


@pytest.mark.parametrize("preconditioner", sorted(registered("preconditioner")))
def test_state_round_trip_continues_identically(preconditioner):
    grads = gradients(6, 3, 4)
    extra = dict(noise_std=0.3)
    if preconditioner == "private":
        extra = dict(released_preconditioner=torch.eye(3, dtype=F64) * 2, preconditioner_noise_std=0.1)
    theta0 = torch.tensor([0.1, 0.2, -0.3], dtype=F64)
    box = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=F64)
    full = FullMatrixAdaGrad(preconditioner).make_optimizer(theta0, 0.2)
    path = [projected_step(full, g, box, **extra) for g in grads]
    first = FullMatrixAdaGrad(preconditioner).make_optimizer(theta0, 0.2)
    for g in grads[:3]:
        theta = projected_step(first, g, box, **extra)
    restored = FullMatrixAdaGrad(preconditioner).make_optimizer(theta, 0.2)
    restored.load_state_dict(first.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip([projected_step(restored, g, box, **extra) for g in grads[3:]], path[3:], strict=True)
    )


def test_bad_settings_and_states_are_refused():
    theta = torch.zeros(2, dtype=F64)
    with pytest.raises(ValueError, match="only used with step_rule='adagrad_full'"):
        strategies_from_flat({"preconditioner": "noisy"}, {"step_rule": "adagrad"})
    for bad in ("exact", 0.5):
        with pytest.raises(ValueError, match="preconditioner must be one of"):
            FullMatrixAdagrad([theta.clone()], lr=0.1, preconditioner=bad)
    opt = FullMatrixAdaGrad().make_optimizer(theta, 0.1)
    projected_step(opt, torch.ones(2, dtype=F64), wide(2))
    state = opt.state_dict()
    state["state"][0]["sum_outer"] = torch.full((2, 2), float("nan"), dtype=F64)
    with pytest.raises(ValueError, match="sum_outer"):
        FullMatrixAdaGrad().make_optimizer(theta, 0.1).load_state_dict(state)
    state["state"][0] = {"step": torch.tensor(1.0), "sum": torch.ones(2, dtype=F64)}  # an Adagrad state
    with pytest.raises(ValueError, match="noise_fourth"):
        FullMatrixAdaGrad().make_optimizer(theta, 0.1).load_state_dict(state)
    with pytest.raises(ValueError, match="basis"):
        projected_step(opt, torch.ones(2, dtype=F64), wide(2), basis=torch.eye(3, dtype=F64))


# ----------------------------------------------------------------- a user's step rule plugs in (issue 42)
@register("step_rule", "test_heavy_ball")
class HeavyBall(UserStrategy):
    r"""A user's step rule (no class of the package): SGD with momentum on the released gradients,
    ``v_t = m v_{t−1} + g_t``, ``θ_{t+1} = Π_Θ(θ_t − η v_t)`` (post-processing, releases nothing)."""

    mu_fraction = None
    keeps_coordinates = False
    stateless = True  # its momentum is the optimizer's state, which the checkpoint keeps

    def __init__(self, momentum: float = 0.5) -> None:
        self.momentum = float(momentum)

    def params(self) -> dict[str, Any]:
        return {"momentum": self.momentum}

    def make_optimizer(self, theta: torch.Tensor, step_size: float) -> torch.optim.Optimizer:
        return torch.optim.SGD([theta.detach().clone()], lr=step_size, momentum=self.momentum)

    def bound_parts(self, plan: RunPlan) -> dict[str, Any]:
        return {}

    def observe(self, summed: Any, plan: RunPlan, track: Any, meter: Any) -> Any:
        return track

    def extras(self, basis: torch.Tensor | None, noise_std: float, track: Any) -> dict[str, Any]:
        return {}

    def record(self, plan: RunPlan, track: Any) -> PreconditionerRecord:
        return PreconditionerRecord()


def test_a_users_step_rule_runs_in_closed_form_and_resumes_bit_identically(tmp_path):
    rule: StepPolicy = HeavyBall(0.5)  # mypy checks the protocol's signatures here
    assert type(rule).__mro__ == (HeavyBall, UserStrategy, object)
    config = config_with(_settings({"num_iterations": 4, "search_radius": 0.2}), step_rule=rule)
    assert config.step_rule is rule
    whole, resumed, opt = run_and_resume(config, tmp_path, stop_after=2)  # the momentum resumes too
    assert resumed == whole and type(opt.config.step_rule) is HeavyBall  # rebuilt from its spec
    # the iterates follow the heavy-ball recurrence on the released gradients (box projection included)
    g = _decoded(whole["released_gradients"]).reshape(4, -1)
    low, high = config.bounds
    theta, v = torch.zeros(g.shape[1], dtype=torch.float64), torch.zeros(g.shape[1], dtype=torch.float64)
    expected = [theta]
    for t in range(4):
        v = 0.5 * v + g[t] if t else g[t].clone()
        theta = torch.clamp(theta - 0.3 * v, low, high)
        expected.append(theta)
    iterates = _decoded(whole["iterates"]).reshape(5, -1)
    assert torch.allclose(iterates, torch.stack(expected), rtol=0, atol=1e-14)
    assert not torch.allclose(iterates, _sgd(g, low, high), rtol=0, atol=1e-6)  # the momentum acts


def test_a_users_step_rule_without_the_state_pair_is_refused_a_checkpoint_and_a_resume(tmp_path, monkeypatch):
    r"""Issue 42 item 3: a step rule (a family that writes run records) with neither ``state_json``/
    ``restore_state`` nor ``stateless = True`` could lose its records on resume: it is refused a checkpoint
    before anything is written, and a resume of a checkpoint made with it, which is left as it was."""
    config = config_with(_settings({"num_iterations": 3, "search_radius": 0.2}), step_rule=HeavyBall(0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = DPGIBO(config, checkpoint_dir=tmp_path / "ck")
        opt.run(_objective, progress=False, callback=lambda info: info.iteration == 1)
        opt.close()
    written = (tmp_path / "ck" / "state.json").read_bytes()
    monkeypatch.delattr(HeavyBall, "stateless")
    message = r"HeavyBall \(step_rule\) cannot be checkpointed: it lacks restore_state, state_json \(KeepsRunState\)"
    assert_not_checkpointed(config, tmp_path, message)
    with pytest.raises(TypeError, match=message):
        DPGIBO.resume(tmp_path / "ck")
    assert (tmp_path / "ck" / "state.json").read_bytes() == written


def _decoded(hexes: list[str]) -> torch.Tensor:
    return torch.tensor([float.fromhex(h) for h in hexes], dtype=torch.float64)


def _sgd(g: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    theta = torch.zeros(g.shape[1], dtype=torch.float64)
    out = [theta]
    for t in range(g.shape[0]):
        theta = torch.clamp(theta - 0.3 * g[t], low, high)
        out.append(theta)
    return torch.stack(out)
