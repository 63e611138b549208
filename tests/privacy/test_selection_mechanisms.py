r"""Menart et al.'s releases in ``privacy.mechanisms``: the per-release-μ gradient and norm releases,
the exponential mechanism (Gumbel-max) and the Gaussian noisy-loss selection.

Oracles: ``clipped_mean_gradient`` (the one clipped mean), noise standard deviations
``Δ/μ`` (fixed-seed statistics), the exponential mechanism's closed-form probabilities
(χ² goodness of fit of the sampler), its ε by brute force over neighbouring datasets, and
the spec's ε → μ values.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from botorch_dp.privacy.mechanisms import (
    AdaptiveGaussianGradientMechanism,
    ExponentialLossSelection,
    GaussianGradientMechanism,
    NoisyLossSelection,
    PrivacyCost,
    PureDPCost,
    clipped_mean_gradient,
    exponential_mechanism_log_probabilities,
    gumbel_max_index,
    os_entropy_uniform,
)
from botorch_dp.privacy.mechanisms._noise import release_gaussian


def _data(seed: int = 0, d: int = 3, N: int = 5, n: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d, N, generator=g, dtype=torch.float64), 3 * torch.randn(N, n, generator=g, dtype=torch.float64)


# ------------------------------------------------------------------ adaptive gradient releases
def test_clipped_mean_is_the_modules_clipped_mean_and_infinite_mu_releases_it_exactly():
    A, Y = _data()
    mech = AdaptiveGaussianGradientMechanism(clip_bound=0.7, num_users=30)
    assert mech.sensitivity == pytest.approx(2 * 0.7 / 30)
    step = mech.clipped_mean(A, Y)
    mean, _ = clipped_mean_gradient(A, Y, 0.7)
    norm = step.release_norm(math.inf)
    grad = step.release_gradient(math.inf, diagnostics=True)
    assert norm.norm == float(mean.norm()) and norm.noise_std == 0.0
    assert torch.equal(grad.gradient, mean) and torch.equal(grad.diagnostics.unnoised_gradient, mean)
    assert norm.cost == PrivacyCost(mu=math.inf) and grad.cost == PrivacyCost(mu=math.inf)


def test_each_step_releases_its_norm_and_gradient_at_most_once():
    A, Y = _data()
    step = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30).clipped_mean(A, Y)
    step.release_norm(0.5)
    step.release_gradient(0.5)
    with pytest.raises(RuntimeError, match="norm was already released"):
        step.release_norm(0.5)
    with pytest.raises(RuntimeError, match="gradient was already released"):
        step.release_gradient(0.5)


def test_noise_is_the_generators_grid_release_at_sensitivity_and_mu():
    r"""Exact: the norm is ``release_gaussian(‖ḡ‖, Δ, μ_N)`` and the gradient
    ``release_gaussian(ḡ, Δ, μ)`` on the generator's draws (norm first, then gradient)."""
    A, Y = _data(d=4)
    mean, _ = clipped_mean_gradient(A, Y, 1.0)
    delta, norm_mu, grad_mu = 2.0 / 30, 0.3, 1.7
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(3))
    step = mech.clipped_mean(A, Y)
    norm, grad = step.release_norm(norm_mu), step.release_gradient(grad_mu)
    g = torch.Generator().manual_seed(3)
    common = dict(sensitivity=delta, generator=g, secure_rng=False, magnitude_bound=1.0)
    norm_expected, _ = release_gaussian(mean.norm().reshape(1), mu=norm_mu, **common)
    grad_expected, _ = release_gaussian(mean, mu=grad_mu, **common)
    assert norm.noise_std == pytest.approx(delta / norm_mu, rel=1e-15) and mech.noise_std(grad_mu) == delta / grad_mu
    assert norm.norm == float(norm_expected[0]) and torch.equal(grad.gradient, grad_expected)


def test_noise_std_is_sensitivity_over_mu_statistically():
    A, Y = _data(d=50, N=3)
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(3))
    mean, _ = clipped_mean_gradient(A, Y, 1.0)
    norm_mu, grad_mu = 0.3, 1.7
    norms, grads = [], []
    for _ in range(600):
        step = mech.clipped_mean(A, Y)
        r, g = step.release_norm(norm_mu), step.release_gradient(grad_mu)
        assert r.cost.mu == norm_mu and g.cost.mu == grad_mu
        norms.append(r.norm)
        grads.append(g.gradient - mean)
    delta = 2.0 / 30
    norms_t, noise = torch.tensor(norms), torch.stack(grads)
    # 600 scalars and 30 000 coordinates: relative s.e. of a sample std ≈ 2.9% and 0.4%
    assert float(norms_t.std()) == pytest.approx(delta / norm_mu, rel=0.12)
    assert float(norms_t.mean()) == pytest.approx(float(mean.norm()), abs=4 * delta / norm_mu / math.sqrt(600))
    assert float(noise.std()) == pytest.approx(delta / grad_mu, rel=0.02)


def test_a_release_at_step_mu_has_the_fixed_mechanisms_noise():
    r"""With the same generator state, a release at ``μ/√T`` draws the same normal vector
    as the fixed schedule's mechanism (same noise path, same scale)."""
    A, Y = _data()
    fixed = GaussianGradientMechanism(
        clip_bound=1.0, num_users=30, privacy_mu=2.0, num_steps=9, generator=torch.Generator().manual_seed(5)
    ).release(A, Y)
    adaptive = AdaptiveGaussianGradientMechanism(
        clip_bound=1.0, num_users=30, generator=torch.Generator().manual_seed(5)
    )
    released = adaptive.clipped_mean(A, Y).release_gradient(2.0 / 3.0)
    torch.testing.assert_close(released.gradient, fixed.gradient, rtol=1e-15, atol=1e-15)
    assert released.cost.mu == pytest.approx(fixed.cost.mu, rel=1e-15)


def test_bad_input_is_refused_before_any_noise_is_drawn():
    A, Y = _data()
    gen = torch.Generator().manual_seed(1)
    mech = AdaptiveGaussianGradientMechanism(clip_bound=1.0, num_users=30, generator=gen)
    state = gen.get_state()
    with pytest.raises(ValueError, match="Expected 30 users"):
        mech.clipped_mean(A, Y[:, :5])
    bad = Y.clone()
    bad[0, 3] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        mech.clipped_mean(A, bad)
    step = mech.clipped_mean(A, Y)
    for mu in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="mu"):
            step.release_norm(mu)
    assert torch.equal(gen.get_state(), state)
    with pytest.raises(ValueError, match="clip_bound"):
        AdaptiveGaussianGradientMechanism(clip_bound=math.inf, num_users=3)


def test_norm_release_sensitivity_is_at_most_2B_over_n():
    r"""Replacing one user's losses arbitrarily moves ``‖ḡ‖`` by at most ``2B/n``."""
    g = torch.Generator().manual_seed(2)
    B, n = 0.8, 12
    mech = AdaptiveGaussianGradientMechanism(clip_bound=B, num_users=n)
    worst = 0.0
    for _ in range(150):
        A = torch.randn(3, 4, generator=g, dtype=torch.float64)
        Y = 4 * torch.randn(4, n, generator=g, dtype=torch.float64)
        Y2 = Y.clone()
        Y2[:, 0] = 50 * torch.randn(4, generator=g, dtype=torch.float64)
        a = mech.clipped_mean(A, Y).release_norm(math.inf).norm
        b = mech.clipped_mean(A, Y2).release_norm(math.inf).norm
        worst = max(worst, abs(a - b))
    assert worst <= 2 * B / n * (1 + 1e-12)
    assert worst > 1.5 * B / n  # the search comes near the bound


# ----------------------------------------------------------------------- exponential mechanism
@pytest.mark.parametrize("epsilon, value", [(0.1, 0.12531), (0.5, 0.62389), (1.0, 1.23204), (2.0, 2.35796)])
def test_pure_cost_converts_to_the_spec_gdp_values(epsilon, value):
    assert PureDPCost(epsilon).mu == pytest.approx(value, abs=5e-6)


def test_uniforms_are_in_the_open_unit_interval_and_os_entropy_is_not_reproducible():
    u = os_entropy_uniform(100_000)
    assert u.dtype == torch.float64 and bool((u > 0).all() and (u < 1).all())
    assert abs(float(u.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / 100_000)
    assert not torch.equal(os_entropy_uniform(8), os_entropy_uniform(8))
    assert os_entropy_uniform(0).shape == (0,)


def _chi2_pvalue(draws: list[int], probabilities: torch.Tensor) -> float:
    counts = torch.bincount(torch.tensor(draws), minlength=probabilities.numel()).double()
    return float(chisquare(counts.numpy(), (probabilities * len(draws)).numpy()).pvalue)


def test_gumbel_max_frequencies_match_the_exponential_mechanism_chi_square():
    r"""5 000 selections with a fixed seed: the frequencies fit ``exp(−εu/(2Δ))``
    normalised (χ², p > 0.001), and clearly reject a mechanism at 1.5 times the ε (power)."""
    n, C, epsilon = 10, 1.0, 1.0
    g = torch.Generator().manual_seed(7)
    losses = torch.rand(5, n, generator=g, dtype=torch.float64) * 1.4 - 0.2  # some outside [0, C]
    scores = losses.clamp(0.0, C).mean(-1)
    mech = ExponentialLossSelection(epsilon=epsilon, loss_clip=C, generator=torch.Generator().manual_seed(11))
    draws = [mech.release(losses).index for _ in range(5_000)]
    probs = exponential_mechanism_log_probabilities(scores, epsilon=epsilon, sensitivity=C / n).exp()
    assert probs.max() < 0.5 and probs.min() > 0.03  # a non-trivial distribution
    assert _chi2_pvalue(draws, probs) > 1e-3
    wrong = exponential_mechanism_log_probabilities(scores, epsilon=1.5 * epsilon, sensitivity=C / n).exp()
    assert _chi2_pvalue(draws, wrong) < 1e-6


def test_gumbel_max_samples_any_categorical():
    log_w = torch.tensor([0.0, math.log(3.0), -50.0, math.log(6.0)], dtype=torch.float64)
    gen = torch.Generator().manual_seed(4)
    draws = [gumbel_max_index(log_w, generator=gen) for _ in range(5_000)]
    probs = torch.softmax(log_w, 0)
    assert 2 not in draws
    assert _chi2_pvalue(draws, probs) > 1e-3
    with pytest.raises(ValueError, match="finite"):
        gumbel_max_index(torch.tensor([0.0, math.nan]))


def test_exponential_mechanism_epsilon_by_brute_force_over_neighbours():
    r"""For datasets of ``n = 3`` users and ``q = 3`` candidates, every replacement of one
    user's column by one of 4⁴ extreme/inner columns changes no log-probability by more
    than ``ε``; the worst case found comes close to ``ε``."""
    n, q, C, epsilon = 3, 3, 1.0, 1.3
    values = [-0.5, 0.0, 0.4, 1.0, 2.0]  # clamped to {0, 0, 0.4, 1, 1}
    columns = torch.tensor(list(itertools.product(values, repeat=q)), dtype=torch.float64)  # 125 x q
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for _ in range(40):
        base = columns[torch.randint(len(columns), (n,), generator=g)].T.clone()  # q x n
        log_p = exponential_mechanism_log_probabilities(base.clamp(0, C).mean(-1), epsilon=epsilon, sensitivity=C / n)
        for user in range(n):
            neighbours = base.unsqueeze(0).repeat(len(columns), 1, 1)
            neighbours[:, :, user] = columns
            scores = neighbours.clamp(0, C).mean(-1)  # 125 x q
            log_p2 = exponential_mechanism_log_probabilities(scores, epsilon=epsilon, sensitivity=C / n)
            worst = max(worst, float((log_p2 - log_p).abs().max()))
    assert worst <= epsilon * (1 + 1e-12)
    assert worst > 0.7 * epsilon


def test_exponential_selection_refuses_nan_and_zero_user_counts_it_as_zero():
    losses = torch.tensor([[0.5, math.nan], [0.2, 0.1]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    mech = ExponentialLossSelection(epsilon=1.0, loss_clip=1.0, generator=gen)
    state = gen.get_state()
    with pytest.raises(ValueError, match="non-finite"):
        mech.release(losses)
    assert torch.equal(gen.get_state(), state)  # nothing drawn
    release = mech.release(losses, nonfinite="zero_user")
    assert release.cost == PureDPCost(1.0) and release.scores is None and release.index in (0, 1)
    assert release.mu == pytest.approx(PureDPCost(1.0).mu)
    with pytest.raises(ValueError, match="epsilon"):
        ExponentialLossSelection(epsilon=math.inf, loss_clip=1.0)
    with pytest.raises(ValueError, match="q x n"):
        mech.release(torch.zeros(3))


# ------------------------------------------------------------------------- noisy loss selection
def test_noisy_loss_scores_are_calibrated_to_sqrt_q_C_over_n_mu():
    q, n, C, mu = 4, 20, 2.0, 0.5
    g = torch.Generator().manual_seed(1)
    losses = torch.rand(q, n, generator=g, dtype=torch.float64) * 3 - 0.5
    clean = losses.clamp(0, C).mean(-1)
    mech = NoisyLossSelection(total_mu=mu, loss_clip=C, generator=torch.Generator().manual_seed(2))
    expected = math.sqrt(q) * C / (n * mu)
    assert mech.noise_std(q, n) == pytest.approx(expected)
    noise, indices = [], []
    for _ in range(1000):
        r = mech.release(losses)
        noise.append(r.scores - clean)
        indices.append(r.index)
        assert r.index == int(torch.argmin(r.scores))
    noise_t = torch.stack(noise)  # 4 000 draws: relative s.e. of the std ≈ 1.1%
    assert float(noise_t.std()) == pytest.approx(expected, rel=0.05)
    assert abs(float(noise_t.mean())) < 4 * expected / math.sqrt(noise_t.numel())
    assert r.cost == PrivacyCost(mu=mu / 2.0, count=4) and r.mu == pytest.approx(mu, rel=1e-15)
    # the argmin prefers the candidate of smallest clean score
    assert max(set(indices), key=indices.count) == int(torch.argmin(clean))
