"""The AMP training problem (botorch_dp/training/amp_objective.py): the config's smoothness β
and its refusals, the clipped GLM losses against Huber and an independent breakpoint formula
(per-example gradients bounded by C), the exact gradient of the perturbed objective against
autograd, and the Newton refinement reaching round-off without function values."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from botorch_dp.training.amp_objective import AMPConfig, _newton_step, _Objective, clipped_glm_loss, perturbed_objective
from botorch_dp.training.objective_perturbation import amp_features

# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss, feature_bound, fit_intercept, beta",
    [
        ("logistic", 1.0, True, 0.5),
        ("logistic", 1.0, False, 0.25),
        ("squared", 1.0, True, 2.0),
        ("squared", 2.0, True, 5.0),
        ("squared", 1.0, False, 1.0),
        ("logistic", 3.0, False, 2.25),
    ],
)
def test_beta_is_sup_curvature_times_squared_row_bound(loss, feature_bound, fit_intercept, beta):
    config = AMPConfig(lam=10.0, sigma=1.0, loss=loss, feature_bound=feature_bound, fit_intercept=fit_intercept)
    assert config.beta == pytest.approx(beta, rel=1e-15)
    assert config.row_bound == pytest.approx(math.sqrt(feature_bound**2 + fit_intercept), rel=1e-15)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"loss": "hinge"}, "loss"),
        ({"clip": 0.0}, "clip"),
        ({"clip": math.inf}, "clip"),
        ({"feature_bound": -1.0}, "feature_bound"),
        ({"fit_intercept": 1}, "fit_intercept"),
        ({"lam": 0.5}, "lam"),
        ({"lam": 0.4}, "lam"),
        ({"lam": math.nan}, "lam"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma_out": -1.0}, "sigma_out"),
        ({"tau": math.inf}, "tau"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
    ],
)
def test_config_errors_name_the_field(kwargs, name):
    args = {"lam": 4.0, "sigma": 1.0, **kwargs}  # logistic with unit rows and a bias: β = 0.5
    with pytest.raises(ValueError, match=rf"AMPConfig\.{name}"):
        AMPConfig(**args)
    with pytest.raises(dataclasses.FrozenInstanceError):  # frozen
        AMPConfig(lam=4.0, sigma=1.0).lam = 1.0


# --- clipped losses -------------------------------------------------------------------------


def test_clipped_squared_loss_is_huber_with_threshold_clip_over_row_norm():
    gen = torch.Generator().manual_seed(0)
    C = 0.7
    norms = torch.tensor([0.3, 1.0, 1.5, 2.8], dtype=torch.float64).repeat_interleave(50)
    u = 4.0 * torch.rand(200, generator=gen, dtype=torch.float64) - 2.0
    y = 2.0 * torch.rand(200, generator=gen, dtype=torch.float64) - 1.0
    value, slope = clipped_glm_loss(u, y, norms, loss="squared", clip=C)
    u_ref = u.clone().requires_grad_(True)
    ref = torch.cat(
        [  # torch's Huber loss, one threshold C/‖x‖ per block of equal row norm
            F.huber_loss(u_ref[i : i + 50], y[i : i + 50], reduction="none", delta=C / float(norms[i]))
            for i in range(0, 200, 50)
        ]
    )
    (grad,) = torch.autograd.grad(ref.sum(), u_ref)
    assert ((u - y).abs() > C / norms).sum() > 50  # the linear pieces are exercised
    torch.testing.assert_close(value, ref.detach(), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(slope, grad, rtol=1e-14, atol=1e-14)


def _reference_clipped_logistic(u: float | torch.Tensor, y: float, row_norm: float, C: float) -> torch.Tensor:
    """Independent scalar version: BCE-with-logits, linear beyond logit(y ∓ C/‖x‖) (autograd-able)."""
    u = torch.as_tensor(u, dtype=torch.float64)
    target = torch.tensor(y, dtype=torch.float64)
    k = C / row_norm

    def base(v):
        return F.binary_cross_entropy_with_logits(torch.as_tensor(v, dtype=torch.float64), target)

    if 0.0 < y - k < 1.0:
        z1 = math.log((y - k) / (1.0 - (y - k)))
        if u < z1:
            return -k * (u - z1) + base(z1)
    if 0.0 < y + k < 1.0:
        z2 = math.log((y + k) / (1.0 - (y + k)))
        if u > z2:
            return k * (u - z2) + base(z2)
    return base(u)


def test_clipped_logistic_loss_matches_an_independent_breakpoint_formula():
    gen = torch.Generator().manual_seed(1)
    C = 0.9
    n = 160
    norms = torch.tensor([0.5, 1.2, 2.0, 4.0], dtype=torch.float64).repeat(n // 4)  # k = 1.8, .75, .45, .225
    u = 16.0 * torch.rand(n, generator=gen, dtype=torch.float64) - 8.0
    y = torch.randint(0, 2, (n,), generator=gen).to(torch.float64)
    value, slope = clipped_glm_loss(u, y, norms, loss="logistic", clip=C)
    ref_values, ref_grads = [], []
    for i in range(n):
        u_i = u[i].clone().requires_grad_(True)
        ref = _reference_clipped_logistic(u_i, float(y[i]), float(norms[i]), C)
        (g,) = torch.autograd.grad(ref, u_i)
        ref_values.append(ref.detach())
        ref_grads.append(g)
    torch.testing.assert_close(value, torch.stack(ref_values), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(slope, torch.stack(ref_grads), rtol=1e-13, atol=1e-13)
    unclipped = torch.sigmoid(u) - y
    assert (slope != unclipped).sum() > 20  # clipping is active on part of the sample
    # C ≥ ‖x‖: no clipping at all, the plain BCE loss
    value, slope = clipped_glm_loss(u, y, norms, loss="logistic", clip=4.0)
    torch.testing.assert_close(value, F.binary_cross_entropy_with_logits(u, y, reduction="none"))
    torch.testing.assert_close(slope, unclipped)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_clipped_per_example_gradient_norm_is_at_most_clip(loss):
    gen = torch.Generator().manual_seed(2)
    config = AMPConfig(lam=50.0, sigma=1.0, loss=loss, clip=0.6, feature_bound=3.0)
    X = 4.0 * torch.randn(500, 6, generator=gen, dtype=torch.float64)
    X[:5] = 0.0  # zero rows (the bias still gives ‖x̃‖ = 1)
    features = amp_features(X, config)
    y = torch.randint(0, 2, (500,), generator=gen).to(torch.float64)
    if loss == "squared":
        y = 2.0 * y - 1.0
    norms = torch.linalg.vector_norm(features, dim=1)
    for scale in (0.1, 1.0, 30.0):
        theta = scale * torch.randn(7, generator=gen, dtype=torch.float64)
        _, slope = clipped_glm_loss(features @ theta, y, norms, loss=loss, clip=config.clip)
        per_example = torch.linalg.vector_norm(slope.unsqueeze(-1) * features, dim=1)
        assert per_example.max() <= config.clip * (1 + 1e-12)
    assert per_example.max() >= 0.99 * config.clip  # the bound is reached: clipping acts


def test_zero_row_contributes_a_constant():
    u = torch.zeros(2, dtype=torch.float64)
    y = torch.tensor([1.0, 0.0], dtype=torch.float64)
    value, slope = clipped_glm_loss(u, y, torch.zeros(2, dtype=torch.float64), loss="logistic", clip=0.1)
    torch.testing.assert_close(value, torch.full((2,), math.log(2.0), dtype=torch.float64))
    assert torch.isfinite(slope).all()
    config = AMPConfig(lam=2.0, sigma=1.0, fit_intercept=False, clip=0.1)
    features = torch.tensor([[0.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    b = torch.zeros(2, dtype=torch.float64)
    for theta in (torch.tensor([3.0, -1.0]), torch.tensor([-7.0, 2.0])):
        with_zero = perturbed_objective(theta.double(), features, y, b, config)
        alone = perturbed_objective(theta.double(), features[1:], y[1:], b, config)
        torch.testing.assert_close(with_zero[0] - alone[0], torch.tensor(math.log(2.0), dtype=torch.float64))
        torch.testing.assert_close(with_zero[1], alone[1])


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_perturbed_objective_gradient_matches_autograd(loss):
    gen = torch.Generator().manual_seed(3)
    config = AMPConfig(lam=3.0, sigma=1.0, loss=loss, clip=0.5)
    features = amp_features(2.0 * torch.randn(40, 3, generator=gen, dtype=torch.float64), config)
    y = torch.randint(0, 2, (40,), generator=gen).to(torch.float64)
    b = torch.randn(4, generator=gen, dtype=torch.float64)
    theta = 2.0 * torch.randn(4, generator=gen, dtype=torch.float64)
    value, grad = perturbed_objective(theta, features, y, b, config)
    theta_ad = theta.clone().requires_grad_(True)
    (grad_ad,) = torch.autograd.grad(perturbed_objective(theta_ad, features, y, b, config)[0], theta_ad)
    torch.testing.assert_close(grad, grad_ad, rtol=1e-12, atol=1e-12)


def test_newton_refinement_needs_no_function_values():
    gen = torch.Generator().manual_seed(12)
    X = torch.rand(300, 3, generator=gen, dtype=torch.float64) / 2.0
    b = torch.randn(4, generator=gen, dtype=torch.float64)
    # an unclipped quadratic: one step from anywhere lands on the minimiser
    config = AMPConfig(lam=3.0, sigma=1.0, loss="squared", clip=10.0)
    features = amp_features(X, config)
    y = (X.sum(1) - 0.7).clamp(-1, 1)
    objective = _Objective(features, y, b, config)
    theta = 5.0 * torch.randn(4, generator=gen, dtype=torch.float64)
    theta = _newton_step(objective, theta, objective.gradient(theta))
    assert float(objective.gradient(theta).norm()) < 1e-10
    # logistic with active clipping, started far away: the gradient norm falls to round-off
    config = AMPConfig(lam=3.0, sigma=1.0, clip=0.3)
    y = (X[:, 0] > 0.25).to(torch.float64)
    objective = _Objective(amp_features(X, config), y, b, config)
    theta = torch.full((4,), 20.0, dtype=torch.float64)
    for _ in range(30):
        theta = _newton_step(objective, theta, objective.gradient(theta))
    assert float(objective.gradient(theta).norm()) < 1e-10
