r"""Noisy GD with ``noise_schedule="adaptive_norm"`` and private selection (Menart et al., spec §2.7).

Oracle: linear per-user losses with the same gradient ``a`` for every user, so the clipped
mean is ``a`` exactly; the number of steps and the noise per step then have closed forms.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch

from botorch_dp.baselines import noisy_gradient_descent
from botorch_dp.optim.options.noise import default_snr_factor
from botorch_dp.privacy.analysis.gdp import compose_gdp, gdp_epsilon, pure_dp_to_gdp_mu
from botorch_dp.problems import NormalLocation

N, D, B = 800, 64, 2.0
A_VEC = torch.zeros(D, dtype=torch.float64)
A_VEC[0] = 1.0  # ‖a‖ = 1 < B: never clipped
BOUNDS = torch.tensor([[-1e6] * D, [1e6] * D], dtype=torch.float64)


def _constant(X: torch.Tensor) -> torch.Tensor:
    return A_VEC.expand(X.shape[0], N, D)


def _run(seed: int, **kwargs):
    settings: dict[str, Any] = dict(
        num_iterations=60,
        clip_bound=B,
        step_size=1e-3,
        privacy_mu=1.0,
        seed=seed,
        noise_schedule="adaptive_norm",
        norm_mu_fraction=0.5,
    )
    settings.update(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise warns
        return noisy_gradient_descent(_constant, BOUNDS, **settings)


def test_constant_gradient_oracle_steps_noise_and_accounting():
    r"""Spec §2.7.3: about ``μ²/(μ_N² + (c√d Δ/N)²)`` steps (here 43), per-step noise norm
    ``≈ N/c``, every step charged ``Δ/σ_t``, and the run spends exactly ``μ``."""
    delta = 2 * B / N
    c = default_snr_factor(N, 1.0)
    mu_n = math.sqrt(0.5 / 60)
    mu_t = c * math.sqrt(D) * delta / 1.0
    expected_steps = 1.0 / (mu_n**2 + mu_t**2)
    counts, noise_norms = [], []
    for seed in range(4):
        res = _run(seed)
        x = res.history.extras
        steps = res.history.iterates.shape[0] - 1
        counts.append(steps)
        assert len(x["step_mus"]) == len(x["noisy_norms"]) == len(x["noise_stds"]) == steps
        assert x["norm_mus"] == [pytest.approx(mu_n, rel=1e-15)] * steps
        for m, s in zip(x["step_mus"], x["noise_stds"], strict=True):
            assert s == pytest.approx(delta / m, rel=1e-15)  # charged from the realised σ_t
        assert compose_gdp(x["norm_mus"] + x["step_mus"]) == pytest.approx(1.0, rel=1e-9)  # exactly the budget
        assert res.guarantee.mu == pytest.approx(1.0, rel=1e-9)
        assert res.guarantee.epsilon == pytest.approx(gdp_epsilon(1.0, 1e-5), rel=1e-8)
        noise = res.history.extras["released_gradients"][:-1] - A_VEC  # non-final steps
        noise_norms += noise.norm(dim=-1).tolist()
        assert all(m == pytest.approx(mu_t, rel=0.25) for m in x["step_mus"][:-1])
        assert res.num_evaluations == steps and x["selected_index"] == steps
    assert sum(counts) / len(counts) == pytest.approx(expected_steps, rel=0.05)
    # σ_t √d = N_t/c with N_t = ‖a‖ + N(0, (Δ/μ_N)²), Δ/μ_N ≈ 0.055: mean noise norm ≈ 1/c
    assert sum(noise_norms) / len(noise_norms) == pytest.approx(1.0 / c, rel=0.03)


def test_min_noisy_norm_is_free_and_returns_the_argmin_iterate():
    last = _run(3)
    chosen = _run(3, selection="min_noisy_norm")
    assert torch.equal(chosen.history.iterates, last.history.iterates)  # same releases
    assert chosen.guarantee.mu == last.guarantee.mu  # nothing more spent
    norms = chosen.history.extras["noisy_norms"]
    index = chosen.history.extras["selected_index"]
    assert norms[index] == min(norms) and torch.equal(chosen.theta, chosen.history.iterates[index])


@pytest.mark.parametrize("selection", ["exponential", "noisy_loss"])
def test_evaluated_selection_is_charged_and_the_split_is_exact(selection):
    problem = NormalLocation(dim=3, num_users=40, seed=0)
    extra = {"selection_epsilon": 0.5} if selection == "exponential" else {"selection_mu": 0.4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = noisy_gradient_descent(
            problem,
            problem.bounds,
            num_iterations=12,
            clip_bound=1.0,
            step_size=0.3,
            privacy_mu=1.0,
            seed=1,
            theta0=problem.default_theta0(),
            selection=selection,
            loss_clip=5.0,
            **extra,
        )
    mu_sel = pure_dp_to_gdp_mu(0.5) if selection == "exponential" else 0.4
    x = res.history.extras
    steps = res.history.iterates.shape[0] - 1
    assert steps == 12 and res.num_evaluations == 12 + 13
    # fixed schedule at μ_steps = √(1 − μ_sel²): the noise is 2B√T/(n μ_steps)
    assert x["noise_std"] == pytest.approx(2 * 1.0 * math.sqrt(12) / (40 * math.sqrt(1 - mu_sel**2)), rel=1e-12)
    assert res.guarantee.mu == pytest.approx(1.0, rel=1e-12)
    assert torch.equal(res.theta, res.history.iterates[x["selected_index"]])
    if selection == "noisy_loss":
        assert x["selection_scores"].shape == (13,) and x["selected_index"] == int(torch.argmin(x["selection_scores"]))
    else:
        assert x["selection_scores"] is None


def test_fixed_schedule_result_is_unchanged_by_the_new_options():
    problem = NormalLocation(dim=3, num_users=40, seed=0)
    kwargs = dict(
        num_iterations=5, clip_bound=1.0, step_size=0.3, privacy_mu=1.0, seed=2, theta0=problem.default_theta0()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = noisy_gradient_descent(problem, problem.bounds, **kwargs)
        b = noisy_gradient_descent(problem, problem.bounds, noise_schedule="fixed", selection="last", **kwargs)
    assert torch.equal(a.history.extras["released_gradients"], b.history.extras["released_gradients"])
    assert set(a.history.extras) == {"released_gradients", "noise_std"}
    assert a.guarantee == b.guarantee


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"selection": "min_noisy_norm"}, "only noise_schedule='adaptive_norm'"),
        ({"noise_schedule": "adaptive_norm", "privacy_mu": math.inf}, "finite privacy_mu"),
        ({"noise_schedule": "sometimes"}, "noise_schedule must be one of"),
        ({"selection": "exponential", "selection_epsilon": 0.5, "loss_clip": 1.0}, "pass loss_oracle"),
        ({"noise_schedule": "adaptive_norm", "norm_mu_fraction": 0.0}, "norm_mu_fraction"),
        ({"noise_schedule": "adaptive_norm", "snr_factor": math.nan}, "snr_factor"),
        ({"noise_schedule": "adaptive_norm", "max_step_mu": -1.0}, "max_step_mu"),
    ],
)
def test_bad_options_are_refused_before_any_gradient_is_evaluated(kwargs, match):
    calls = []

    def oracle(X):
        calls.append(1)
        return _constant(X)

    settings = dict(num_iterations=5, clip_bound=B, step_size=1e-3, privacy_mu=1.0)
    settings.update(kwargs)
    with pytest.raises(ValueError, match=match):
        noisy_gradient_descent(oracle, BOUNDS, **settings)
    assert calls == []


def _spread(X: torch.Tensor) -> torch.Tensor:
    r"""User ``i``'s gradient is ``(i + 1)/N · 10 · e_0`` at every θ: norms uniform on (0, 10], median 5."""
    norms = 10.0 * torch.arange(1, N + 1, dtype=torch.float64) / N
    return (norms[:, None] * A_VEC).expand(X.shape[0], N, D)


@pytest.mark.parametrize("schedule", ["fixed", "adaptive_norm"])
def test_quantile_clipping_tracks_the_median_norm_through_the_same_strategy_as_dp_gibo(schedule):
    r"""``clip_bound=QuantileClip(...)`` (the clip policy of ``optim.options``): the bound moves
    geometrically from ``B₀ = 1`` to the median gradient norm 5 (``log 5/(η_C γ) ≈ 16`` steps at
    least), each step charges a count as part ``"clip"``, and the run spends exactly ``μ``
    (``μ_g² + μ_C² = μ²``; the adaptive schedule's filter spends the gradients' share to the end)."""
    from botorch_dp.optim.options import QuantileClip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded noise warns
        res = noisy_gradient_descent(
            _spread,
            BOUNDS,
            num_iterations=60,
            step_size=1e-3,
            privacy_mu=50.0,
            seed=0,
            noise_schedule=schedule,
            clip_bound=QuantileClip(bound=1.0, quantile=0.5, learning_rate=0.2, fraction=0.1),
        )
    x = res.history.extras
    steps = res.history.iterates.shape[0] - 1
    assert len(x["clip_bounds"]) == steps + 1 and len(x["clip_counts"]) == steps
    assert x["clip_bounds"][0] == 1.0 and x["clip_bounds"][-1] == pytest.approx(5.0, rel=0.25)
    assert all(
        b1 > b0 for b0, b1 in zip(x["clip_bounds"][:12], x["clip_bounds"][1:13], strict=True)
    )  # below the median: up
    assert res.guarantee.mu == pytest.approx(50.0, rel=1e-9)


@pytest.mark.parametrize(
    ("argument", "make"),
    [("clip_bound", "SGD"), ("noise_schedule", "FixedClip"), ("step_rule", "Last"), ("selection", "FixedNoise")],
)
def test_noisy_gd_refuses_a_strategy_of_another_family(argument, make):
    r"""A strategy object given for the wrong option is refused with a ValueError naming the
    argument and the strategy's family, before anything is charged."""
    from botorch_dp.optim import options
    from botorch_dp.privacy.ledger import PrivacyLedger

    strategy = getattr(options, make)()
    problem = NormalLocation(dim=2, num_users=10, seed=0)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=rf"^{argument} must be .* got {make}\(.*\) \(a {strategy.family} strategy\)"):
        noisy_gradient_descent(
            problem,
            problem.bounds,
            num_iterations=3,
            step_size=0.1,
            privacy_mu=1.0,
            theta0=problem.default_theta0(),
            ledger=ledger,
            **{"clip_bound": 1.0, argument: strategy},
        )
    assert ledger.state_dict() == PrivacyLedger().state_dict()  # nothing recorded or reserved
