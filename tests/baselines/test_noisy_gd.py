"""Tests for botorch_dp.baselines.noisy_gd against closed-form optima and the noise calibration."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from botorch_dp.baselines import noisy_gradient_descent
from botorch_dp.optim.options import AdaGrad, AdaptiveNorm, Exponential, FullMatrixAdaGrad, NoisyLoss
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import HuberRegression, NormalLocation


def test_noisy_gd_without_noise_converges_to_sample_mean():
    problem = NormalLocation(dim=3, num_users=30, seed=0)
    res = noisy_gradient_descent(
        problem,
        problem.bounds,
        num_iterations=60,
        clip_bound=100.0,
        step_size=0.5,
        privacy_mu=math.inf,
        theta0=problem.default_theta0(),
    )
    assert res.guarantee is None
    # f(θ) = ½‖θ − x̄‖² + c, so each step halves the error: 2^-60 after 60 steps
    torch.testing.assert_close(res.theta, problem.optimum, atol=1e-12, rtol=0)
    assert res.history.iterates.shape == (61, 3) and res.num_evaluations == 60


def test_noisy_gd_without_noise_finds_huber_optimum():
    problem = HuberRegression(seed=0)
    # per-user gradients have norm <= c·sqrt(2), so B = 1.5 clips nothing
    res = noisy_gradient_descent(
        problem,
        problem.bounds,
        num_iterations=400,
        clip_bound=1.5,
        step_size=0.5,
        privacy_mu=math.inf,
        theta0=problem.default_theta0(),
    )
    torch.testing.assert_close(res.theta, problem.optimum, atol=1e-6, rtol=0)


def test_noisy_gd_noise_std_matches_2B_sqrtT_over_n_mu():
    n, d, T, B, mu = 50, 5, 400, 1.0, 2.0
    zero = lambda X: torch.zeros(X.shape[0], n, d, dtype=torch.float64)
    bounds = torch.tensor([[-1e6] * d, [1e6] * d], dtype=torch.float64)
    res = noisy_gradient_descent(zero, bounds, num_iterations=T, clip_bound=B, step_size=1e-3, privacy_mu=mu, seed=0)
    expected = 2 * B * math.sqrt(T) / (n * mu)  # = 0.4
    g = res.history.extras["released_gradients"]  # pure noise: T x d = 2000 draws
    assert res.history.extras["noise_std"] == pytest.approx(expected)
    # sample std of 2000 normals: standard error ≈ 0.4 / sqrt(4000) ≈ 0.0063
    assert float(g.std()) == pytest.approx(expected, rel=0.05)
    assert abs(float(g.mean())) < 4 * expected / math.sqrt(g.numel())
    assert res.guarantee.mu == mu
    assert res.guarantee.epsilon == pytest.approx(gdp_epsilon(mu, 1e-5))
    assert res.history.public


def test_noisy_gd_clips_per_user_gradients():
    n, d = 7, 3
    big = torch.tensor([10.0, 0.0, 0.0], dtype=torch.float64)
    oracle = lambda X: big.expand(X.shape[0], n, d)
    bounds = torch.tensor([[-100.0] * d, [100.0] * d], dtype=torch.float64)
    res = noisy_gradient_descent(
        oracle,
        bounds,
        num_iterations=2,
        clip_bound=0.5,
        step_size=1.0,
        privacy_mu=math.inf,
        theta0=torch.zeros(d, dtype=torch.float64),
    )
    torch.testing.assert_close(
        res.history.extras["released_gradients"][0], torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64)
    )
    torch.testing.assert_close(res.theta, torch.tensor([-1.0, 0.0, 0.0], dtype=torch.float64))


def test_noisy_gd_noise_is_from_os_entropy_unless_seeded():
    n, d = 10, 2
    zero = lambda X: torch.zeros(X.shape[0], n, d, dtype=torch.float64)
    bounds = torch.tensor([[-1e6] * d, [1e6] * d], dtype=torch.float64)
    kwargs = dict(num_iterations=5, clip_bound=1.0, step_size=1e-3, privacy_mu=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)  # the default never warns
        a = noisy_gradient_descent(zero, bounds, **kwargs)
        b = noisy_gradient_descent(zero, bounds, **kwargs)
    assert not torch.equal(a.history.extras["released_gradients"], b.history.extras["released_gradients"])
    with pytest.warns(PrivacyWarning, match="reproducible"):
        c = noisy_gradient_descent(zero, bounds, seed=11, **kwargs)
    with pytest.warns(PrivacyWarning):
        e = noisy_gradient_descent(zero, bounds, seed=11, **kwargs)
    assert torch.equal(c.history.extras["released_gradients"], e.history.extras["released_gradients"])
    with pytest.raises(TypeError, match="secure_rng"):
        noisy_gradient_descent(zero, bounds, secure_rng=True, **kwargs)


# ------------------------------------------------- options: strategy objects, names resolved once
def _descend(**options):
    problem = NormalLocation(dim=2, num_users=20, seed=1)
    settings = dict(num_iterations=4, clip_bound=2.0, step_size=0.3, privacy_mu=1.0, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded noise warns
        return noisy_gradient_descent(problem, problem.bounds, **{**settings, **options})


@pytest.mark.parametrize(
    ("names", "objects"),
    [
        ({"noise_schedule": "adaptive_norm", "norm_mu_fraction": 0.2}, {"noise_schedule": AdaptiveNorm(0.2)}),
        (
            {"selection": "noisy_loss", "selection_mu": 0.3, "loss_clip": 20.0},
            {"selection": NoisyLoss(mu=0.3, loss_clip=20.0)},
        ),
        (
            {"selection": "exponential", "selection_epsilon": 0.5, "loss_clip": 20.0},
            {"selection": Exponential(epsilon=0.5, loss_clip=20.0)},
        ),
        ({"step_rule": "adagrad"}, {"step_rule": AdaGrad()}),
        ({"step_rule": "adagrad_full"}, {"step_rule": FullMatrixAdaGrad()}),
    ],
)
def test_an_option_name_and_its_strategy_object_release_the_same_values_bit_for_bit(names, objects):
    r"""The keyword strings resolve through the registry to the strategy the object spells out: the
    same releases, iterates, choice and guarantee, bit for bit."""
    by_name, by_object = _descend(**names), _descend(**objects)
    for key in ("released_gradients", "noisy_norms", "step_mus", "selection_scores"):
        a, b = by_name.history.extras.get(key), by_object.history.extras.get(key)
        assert (a is None and b is None) or torch.equal(torch.as_tensor(a), torch.as_tensor(b)), key
    assert torch.equal(by_name.history.iterates, by_object.history.iterates)
    assert torch.equal(by_name.theta, by_object.theta) and by_name.guarantee == by_object.guarantee


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"selection": "exponential", "loss_clip": 1.0}, "selection='exponential' needs selection_epsilon."),
        (
            {"selection": "exponential", "selection_epsilon": 0.5, "selection_mu": 0.2, "loss_clip": 1.0},
            "selection_mu is only used by selection in ('noisy_loss',), not by selection='exponential'.",
        ),
        (
            {"loss_clip": 1.0},
            "loss_clip is only used by selection in ('exponential', 'noisy_loss'), not by selection='last'.",
        ),
        ({"selection": "best"}, "selection must be one of"),
        ({"step_rule": "adam"}, "step_rule must be one of"),
    ],
)
def test_option_keywords_are_checked_against_the_registered_strategy_before_any_gradient(options, message):
    calls = []

    def oracle(X):
        calls.append(1)
        return torch.zeros(1, 5, 2, dtype=torch.float64)

    bounds = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    settings = dict(num_iterations=2, clip_bound=1.0, step_size=0.1, privacy_mu=1.0, loss_oracle=oracle)
    with pytest.raises(ValueError) as raised:
        noisy_gradient_descent(oracle, bounds, **{**settings, **options})
    assert str(raised.value).startswith(message) and calls == []


def test_noisy_gd_compares_no_option_name():
    r"""The option strings resolve once through the registry: no comparison in the module involves a
    registered option name, and the old translation ``_options`` is gone."""
    import ast
    from pathlib import Path

    from botorch_dp.baselines import noisy_gd
    from botorch_dp.optim.options import registered

    names = {
        name for family in ("clip", "noise", "projection", "step_rule", "selection") for name in registered(family)
    }
    tree = ast.parse(Path(noisy_gd.__file__).read_text())
    compared = [
        (node.lineno, sub.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and sub.value in names
    ]
    assert compared == []
    assert not hasattr(noisy_gd, "_options")
