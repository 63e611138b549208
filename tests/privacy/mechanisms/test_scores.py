r"""Scores and selections (``privacy.mechanisms.scores``): private random search's Gaussian trial
scores, the exponential mechanism (Gumbel-max) and the Gaussian noisy-loss selection.

Oracles: noise standard deviations ``Δ/μ`` (fixed-seed statistics), the exponential
mechanism's closed-form probabilities (χ² goodness of fit of the sampler), and its ε by brute
force over neighbouring datasets.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from botorch_dp.privacy.mechanisms import (
    ExponentialLossSelection,
    GaussianScoreMechanism,
    NoisyLossSelection,
    PrivacyCost,
    PureDPCost,
    exponential_mechanism_log_probabilities,
    gumbel_max_index,
)

# ----------------------------------------------------------------------- exponential mechanism


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


def test_score_mechanism_closed_form_and_noise_scale():
    g = torch.Generator().manual_seed(5)
    mech = GaussianScoreMechanism(loss_clip=2.0, per_trial_mu=0.5, generator=g)
    losses = torch.tensor([[-1.0, 1.0, 5.0, 0.5]] * 4000, dtype=torch.float64)  # clipped mean 0.875
    rel = mech.release(losses)
    assert rel.noise_std == pytest.approx(2.0 / (4 * 0.5))
    assert rel.cost.mu == 0.5 and rel.cost.count == 4000
    m = rel.scores.numel()
    assert abs(float(rel.scores.mean()) - 0.875) < 5 * rel.noise_std / math.sqrt(m)
    assert abs(float(rel.scores.std()) / rel.noise_std - 1) < 5 / math.sqrt(2 * m)
    with pytest.raises(ValueError, match="loss_clip"):
        GaussianScoreMechanism(loss_clip=math.inf, per_trial_mu=1.0)
    with pytest.raises(ValueError, match="per_trial_mu"):
        GaussianScoreMechanism(loss_clip=1.0, per_trial_mu=0.0)
