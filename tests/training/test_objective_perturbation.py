"""AMP training (Redberg et al., Alg. 1): the features, the τ test, refusals, noise, oracles. The config,
the clipped losses and the objective are tested in test_amp_objective.py, the mechanism's two draws in
tests/privacy/mechanisms/test_objective_perturbation.py."""

import math
import warnings

import numpy as np
import pytest
import torch

from botorch_dp.privacy.mechanisms import AMPNotConvergedError
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import AMPConfig, AMPResult, fit_amp
from botorch_dp.training.objective_perturbation import amp_features, perturbed_objective


def _quiet_fit(*args, **kwargs) -> AMPResult:
    """``fit_amp`` with a seeded generator, its (expected) PrivacyWarning silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return fit_amp(*args, **kwargs)


def _logistic_data(n=300, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w = 3.0 * rng.normal(size=p)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))).astype(float)
    return torch.tensor(X), torch.tensor(y)


def test_amp_features_rescale_rows_to_the_bound_and_append_the_bias():
    config = AMPConfig(lam=30.0, sigma=1.0, feature_bound=2.0)
    X = torch.tensor([[3.0, 4.0], [0.6, 0.8], [1e300, -1e300], [0.0, 0.0]], dtype=torch.float64)
    features = amp_features(X, config)
    expected = torch.tensor(
        [[1.2, 1.6, 1.0], [0.6, 0.8, 1.0], [math.sqrt(2.0), -math.sqrt(2.0), 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64
    )
    torch.testing.assert_close(features, expected, rtol=1e-15, atol=1e-15)
    no_bias = amp_features(X, AMPConfig(lam=30.0, sigma=1.0, feature_bound=2.0, fit_intercept=False))
    torch.testing.assert_close(no_bias, expected[:, :2], rtol=1e-15, atol=1e-15)


# --- the τ test and refusals ---------------------------------------------------------------


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_returned_minimiser_passes_the_tau_test_in_float64(loss):
    X, y = _logistic_data(n=400, p=5, seed=4)
    if loss == "squared":
        y = 2.0 * y - 1.0
    config = AMPConfig(lam=3.0, sigma=3.0, loss=loss, clip=0.8, tau=1e-6)
    result = _quiet_fit(X, y, config, generator=5, nonprivate_diagnostics=True)
    diag = result.nonprivate_diagnostics
    features = amp_features(X, config)
    # an independent gradient: autograd of the objective at θ̃
    theta = diag.theta_tilde.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(perturbed_objective(theta, features, y, diag.perturbation, config)[0], theta)
    assert grad.dtype == torch.float64 and float(grad.norm()) <= config.tau
    assert diag.gradient_norm <= config.tau and diag.iterations >= 1
    assert result.theta.dtype == torch.float64 and result.theta.shape == (6,)
    assert not torch.equal(result.theta, diag.theta_tilde)  # the output noise was added


def test_release_refused_when_the_solver_is_capped_below_convergence():
    X, y = _logistic_data(n=300, p=5, seed=6)
    config = AMPConfig(lam=1.0, sigma=1.0, tau=1e-9, max_iter=2)
    with pytest.raises(AMPNotConvergedError, match="nothing was released"):
        _quiet_fit(X, y, config, generator=0)
    # the same data converges when the cap is lifted
    assert _quiet_fit(X, y, AMPConfig(lam=1.0, sigma=1.0, tau=1e-9), generator=0).theta.shape == (6,)


# --- oracles -------------------------------------------------------------------------------


def test_unperturbed_logistic_minimiser_matches_sklearn():
    from sklearn.linear_model import LogisticRegression

    X, y = _logistic_data(n=2000, p=5, seed=0)
    lam = 2.0
    config = AMPConfig(lam=lam, sigma=1e-12, sigma_out=1e-12, tau=1e-9)  # C = √2 = max ‖x̃‖: no clipping
    result = _quiet_fit(X, y, config, generator=0)
    # the intercept is penalised like the weights: give sklearn the bias as a feature column
    features = np.hstack([X.numpy(), np.ones((2000, 1))])
    sk = LogisticRegression(C=1.0 / lam, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(features, y.numpy())
    np.testing.assert_allclose(result.theta.numpy(), sk.coef_[0], rtol=0, atol=1e-5)


def test_unperturbed_unclipped_squared_loss_is_ridge_regression():
    gen = torch.Generator().manual_seed(7)
    X = torch.rand(500, 3, generator=gen, dtype=torch.float64) / 2.0  # ‖x‖ < 1
    y = (X @ torch.tensor([1.0, -0.5, 0.3], dtype=torch.float64) - 0.2).clamp(-1, 1)
    config = AMPConfig(lam=3.0, sigma=1e-12, sigma_out=1e-12, tau=1e-10, loss="squared", clip=10.0)
    result = _quiet_fit(X, y, config, generator=0)
    Xt = torch.cat([X, torch.ones(500, 1, dtype=torch.float64)], dim=1)
    ridge = torch.linalg.solve(Xt.T @ Xt + 3.0 * torch.eye(4, dtype=torch.float64), Xt.T @ y)
    torch.testing.assert_close(result.theta, ridge, rtol=0, atol=1e-9)


def test_linear_regime_output_is_the_exact_objpert_gaussian():
    """Huber with tiny C: one record stays on the linear piece, so L^P is linear + ridge and
    θ̃ = (k x̃ − b)/λ exactly (k = C/‖x̃‖); released θ ~ N(k x̃/λ, (σ²/λ² + σ_out²) I)."""
    config = AMPConfig(lam=10.0, sigma=0.5, sigma_out=0.02, tau=1e-10, loss="squared", clip=0.1)
    X = torch.tensor([[0.6, 0.0]], dtype=torch.float64)
    y = torch.tensor([1.0], dtype=torch.float64)
    x_tilde = torch.tensor([0.6, 0.0, 1.0], dtype=torch.float64)
    k = config.clip / float(x_tilde.norm())
    gen = torch.Generator().manual_seed(8)
    m = 400
    released, b_draws, out_noise = [], [], []
    for _ in range(m):
        result = _quiet_fit(X, y, config, generator=gen, nonprivate_diagnostics=True)
        diag = result.nonprivate_diagnostics
        torch.testing.assert_close(diag.theta_tilde, (k * x_tilde - diag.perturbation) / config.lam, rtol=0, atol=1e-10)
        released.append(result.theta)
        b_draws.append(diag.perturbation)
        out_noise.append(result.theta - diag.theta_tilde)
    released, b_draws, out_noise = torch.stack(released), torch.stack(b_draws), torch.stack(out_noise)
    var = config.sigma**2 / config.lam**2 + config.sigma_out**2
    mean = k * x_tilde / config.lam
    assert ((released.mean(0) - mean).abs() <= 4.0 * math.sqrt(var / m)).all()
    # sample variances: 4.5 standard errors of a chi-square/m (sd ≈ var·√(2/m)); correlations small
    for draws, v in ((released, var), (b_draws, config.sigma**2), (out_noise, config.sigma_out**2)):
        cov = torch.cov(draws.T)
        assert ((cov.diagonal() - v).abs() <= 4.5 * v * math.sqrt(2.0 / m)).all(), (cov.diagonal(), v)
        corr = cov / torch.outer(cov.diagonal().sqrt(), cov.diagonal().sqrt())
        assert (corr - torch.eye(3, dtype=torch.float64)).abs().max() <= 4.5 / math.sqrt(m)


# --- inputs, randomness --------------------------------------------------------------------


@pytest.mark.parametrize(
    "X, y, config, name",
    [
        (torch.tensor([[0.1, math.nan]]), torch.tensor([1.0]), None, "X"),
        (torch.tensor([0.1, 0.2]), torch.tensor([1.0, 0.0]), None, "X"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([1.0, 0.0]), None, "y"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([math.inf]), None, "y"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([2.0]), None, "y"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([-1.0]), None, "y"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([1.5]), "squared", "y"),
        (torch.zeros(0, 2), torch.zeros(0), None, "X"),
        (torch.tensor([[0.1, 0.2]]), torch.tensor([1.0]), "not a config", "config"),
    ],
)
def test_input_errors_name_the_argument_before_any_noise(X, y, config, name):
    if config is None or config == "squared":
        config = AMPConfig(lam=3.0, sigma=1.0, loss=config or "logistic")
    gen = torch.Generator().manual_seed(9)
    state = gen.get_state()
    with pytest.raises(ValueError, match=rf"^{name} "):
        _quiet_fit(X, y, config, generator=gen)
    assert torch.equal(gen.get_state(), state)  # nothing was drawn


def test_noise_comes_from_os_entropy_by_default_and_a_seed_warns():
    X, y = _logistic_data(n=50, p=2, seed=10)
    config = AMPConfig(lam=2.0, sigma=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # no warning without a seed
        first, second = fit_amp(X, y, config), fit_amp(X, y, config)
    assert not torch.equal(first.theta, second.theta)
    with pytest.warns(PrivacyWarning):
        seeded = fit_amp(X, y, config, generator=11)
    with pytest.warns(PrivacyWarning):
        again = fit_amp(X, y, config, generator=11)
    torch.testing.assert_close(seeded.theta, again.theta, rtol=0, atol=0)  # reproducible from the seed
    with pytest.warns(PrivacyWarning):
        fit_amp(X, y, config, generator=torch.Generator().manual_seed(11))
    with pytest.raises(ValueError, match="generator"):
        _quiet_fit(X, y, config, generator="11")
    assert first.nonprivate_diagnostics is None and "AMP" in first.cost.description


def test_predict_helpers():
    config = AMPConfig(lam=1.0, sigma=1.0, feature_bound=1.0)
    result = AMPResult(theta=torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64), config=config)
    X = torch.tensor([[3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)  # row 1 is rescaled to (0.6, 0.8)
    scores = torch.tensor([2.0 * 0.6 - 0.8 + 0.5, -1.0 + 0.5], dtype=torch.float64)
    torch.testing.assert_close(result.decision_function(X), scores)
    torch.testing.assert_close(result.predict_proba(X), torch.sigmoid(scores))
    torch.testing.assert_close(result.predict(X), torch.tensor([1.0, 0.0], dtype=torch.float64))
    squared = AMPResult(theta=result.theta, config=AMPConfig(lam=3.0, sigma=1.0, loss="squared"))
    torch.testing.assert_close(squared.predict(X), torch.tensor([1.0, -1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="predict_proba"):
        squared.predict_proba(X)


def test_breast_cancer_smoke_at_the_calibrated_epsilon_one_setting():
    from botorch_dp.privacy.analysis.objective_perturbation import calibrate_amp
    from botorch_dp.tuning import load_sklearn_classification

    sigma, lam = calibrate_amp(1.0, 1e-5, clip=math.sqrt(2.0), beta=0.5, sigma_out=0.15, tau=5e-4)
    assert sigma == pytest.approx(6.852, abs=1e-3) and lam == pytest.approx(1.05**27, rel=1e-12)  # spec §3.8
    config = AMPConfig(lam=lam, sigma=sigma)  # logistic, C = √2, unit rows + bias: β = 0.5
    data = load_sklearn_classification("breast_cancer", seed=0)
    X = torch.cat([data.X_train, data.X_val]).double()
    y = torch.cat([data.y_train, data.y_val]).double()
    result = _quiet_fit(X, y, config, generator=0)
    accuracy = float((result.predict(data.X_test) == data.y_test.double()).double().mean())
    majority = max(float(data.y_test.double().mean()), 1.0 - float(data.y_test.double().mean()))
    assert majority < 0.65 and accuracy >= 0.85
    assert result.rdp_epsilon(1e-5) <= 1.0 + 1e-9  # what the RDP ledger charges
    assert 0.9 < result.epsilon(1e-5) < result.rdp_epsilon(1e-5)  # the profile is tighter


def test_guarantee_is_the_amp_curve_of_the_config():
    from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp

    # squared loss, R = 1, no intercept: β = 1; ObjPert part at the spec's (L, σ, β, λ) = (1, 5, 1, 20)
    config = AMPConfig(lam=20.0, sigma=5.0, loss="squared", clip=1.0, fit_intercept=False, tau=0.05, sigma_out=0.1)
    X, y = _logistic_data(n=40, p=2, seed=13)
    result = _quiet_fit(X, 2.0 * y - 1.0, config, generator=0)
    # spec §3.8: ε_OP(2) = 0.2384361, plus α s_g²/2 with the output grid's s_g = (2τ/(λσ_out) + 2⁻¹⁴)(1 + 2⁻²⁷)
    s_g = (0.05 + 2.0**-14) * (1.0 + 2.0**-27)
    assert result.rdp(2.0) == pytest.approx(0.2384361 + s_g**2, abs=1e-7)
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    expected = amp_rdp(orders, clip=1.0, beta=1.0, lam=20.0, sigma=5.0, tau=0.05, sigma_out=0.1)
    np.testing.assert_allclose(result.rdp(orders), expected, rtol=1e-15)
    np.testing.assert_allclose([result.cost.rdp(a) for a in orders], expected, rtol=1e-15)
    # spec §3.8 (P3, Monte Carlo-checked, continuous output): δ_AMP(0.5) = 0.0026836, δ_AMP(0.2) = 0.061006
    assert result.epsilon(0.0026836) == pytest.approx(0.5, abs=2e-3)
    assert result.epsilon(0.061006) == pytest.approx(0.2, abs=2e-3)
    assert result.description == result.cost.description and "tau=0.05" in result.description
