import pytest
import torch

from botorch_dp.optim.step_rules import ADAGRAD_EPS, STEP_RULES, make_step_optimizer, projected_step

BOUNDS = torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)


def test_sgd_step_is_theta_minus_eta_g_then_projected():
    theta = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64)
    g = torch.tensor([1.0, -2.0, -3.0], dtype=torch.float64)
    opt = make_step_optimizer(theta, "sgd", 0.25)
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
    opt = make_step_optimizer(theta, "adagrad", eta)
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
    opt = make_step_optimizer(torch.zeros(1, dtype=torch.float64), "adagrad", 5.0)
    box = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    assert projected_step(opt, torch.tensor([-1.0], dtype=torch.float64), box).item() == 1.0  # 0 + 5, clipped
    # second step: 1 − 5·1/√2 ≈ −2.54, projected to −1; the sum counts both gradients
    assert projected_step(opt, torch.tensor([1.0], dtype=torch.float64), box).item() == -1.0
    assert opt.state_dict()["state"][0]["sum"].item() == 2.0


@pytest.mark.parametrize("rule", STEP_RULES)
def test_state_dict_round_trip_continues_identically(rule):
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, generator=gen, dtype=torch.float64) for _ in range(6)]
    theta0 = torch.tensor([0.1, 0.2, -0.3], dtype=torch.float64)
    full = make_step_optimizer(theta0, rule, 0.2)
    path = [projected_step(full, g, BOUNDS) for g in grads]

    first = make_step_optimizer(theta0, rule, 0.2)
    for g in grads[:3]:
        theta = projected_step(first, g, BOUNDS)
    state = first.state_dict()
    restored = make_step_optimizer(theta, rule, 0.2)  # as DPGIBO.load_state_dict rebuilds it
    restored.load_state_dict(state)
    resumed = [projected_step(restored, g, BOUNDS) for g in grads[3:]]
    assert all(torch.equal(a, b) for a, b in zip(resumed, path[3:], strict=True))


def test_unknown_step_rule_is_refused():
    with pytest.raises(ValueError, match="step_rule"):
        make_step_optimizer(torch.zeros(2, dtype=torch.float64), "adam", 0.1)
