"""Every quick audit row (botorch_dp.audit's registry): sound on today's library, and able to
catch the library's Gaussian noise at half its scale.

Each row drives the library as a user does and reads its claim from what the library
reported, so these tests run the real code paths. The seeded rows are deterministic (seed 0,
the quick run counts, as ``audit_all(quick=True)`` runs them). ``gradient_release_os_entropy``
draws its noise from OS entropy, so its outcome is random: its soundness is checked at 99%
confidence (a false alarm has probability at most 1%; none in 300 simulated audits of exactly
Gaussian releases of this size) and its leak detection at the row's 95% (300 simulated audits
of a 2× leak at this size missed it twice).

The 2× leak is made at the places every Gaussian privacy draw goes through,
``privacy.mechanisms._noise.release_gaussian`` and ``release_goe`` (each released at twice its
``μ``, i.e. half its noise) and ``_noise.draw_gaussian`` (AMP's perturbation, at half its std), so it
halves the noise of every release (gradient, norm, count, preconditioner, scores, both AMP
draws) whichever caller asks for it. Rows left out of the leak test, and why:
``exponential_selection`` (no Gaussian noise; its Gumbel fault is tested in
``test_selection.py``) and ``adaptive_norm_tight_ledger`` (its own file: it reports a leak on
today's library without any fault, and once the ledger refuses that step before drawing
noise it releases nothing, so there is no noise to halve).
"""

import dataclasses

import pytest

from botorch_dp.audit import registered_rows
from botorch_dp.privacy.mechanisms import _noise

ROWS = {row.name: row for row in registered_rows()}
#: Rows whose noise does not come from OS entropy on purpose (reproducible).
UNSEEDED = {"gradient_release_os_entropy", "adaptive_norm_tight_ledger"}
#: The μ each honest design really spends (its point estimate should be near it): the claim
#: for the tight designs, less where the claim is an upper bound the design cannot reach.
TRUE_MU = {
    "gradient_release": 1.0,
    "gradient_release_overflow": 1.0,
    "gradient_release_os_entropy": 1.0,
    "dp_gibo_loop": 1.0,
    "adaptive_norm_release": 1.0,
    "noisy_gd_adaptive_norm": 1.0,
    "exponential_selection": 0.6180,  # two candidates: randomized response at ε/2 = 0.5
    "projected_gradient_release": 1.0,
    "private_preconditioner": 1.0,  # μ_H/√T with μ_H = μ/√2 = 1, T = 1; the design is within 1% of its bound
    "adaptive_clip_count": 1.0,
    "private_random_search_score": 1.0,
    "dp_hypo_score": 1.0,
    "amp_release": 0.6971,  # μ_lin = C/√(σ² + λ²σ_out²) at ε = 4; the claimed curve lies above it
    "tune_choice_score": 1.0,  # one Gaussian score at μ_score = 1 (the target set for it)
    # the least of K scores, each μ₀-GDP with μ₀ = 0.434 (the profile's calibration at ε = 2, δ = 1e-5, E[K] = 2),
    # all shifted by C/n; the claim is an (ε, δ) pair, compared as its trade-off curve
    "training_selection_score": 0.434,
}
SOUND = [name for name in ROWS if name != "adaptive_norm_tight_ledger"]
LEAK = [name for name in SOUND if name != "exponential_selection"]


def test_the_registry_lists_every_row_in_order():
    assert list(ROWS) == [
        "gradient_release",
        "gradient_release_overflow",
        "gradient_release_os_entropy",
        "dp_gibo_loop",
        "adaptive_norm_release",
        "noisy_gd_adaptive_norm",
        "adaptive_norm_tight_ledger",
        "exponential_selection",
        "projected_gradient_release",
        "private_preconditioner",
        "adaptive_clip_count",
        "private_random_search_score",
        "dp_hypo_score",
        "amp_release",
        "tune_choice_score",
        "training_selection_score",
    ]
    assert set(TRUE_MU) == set(SOUND)
    assert all(4 <= row.quick_runs < row.full_runs for row in ROWS.values())


@pytest.mark.parametrize("name", SOUND)
def test_quick_row_is_sound_and_its_design_separates(name):
    confidence = 0.99 if name in UNSEEDED else 0.95
    result = ROWS[name](quick=True, seed=0, confidence=confidence)
    assert result.mechanism == name
    assert result.empirical_mu_lower <= result.claimed_mu, result
    # the neighbours are worst cases: the point estimate is near what the design spends (a design
    # that failed to separate D from D′ would sit near 0); 150-2500 counted runs per side. The
    # OS-entropy row's estimate is random: only its lower side is checked (separation), since its
    # upper side is the soundness check above, at 99% (a run gave 1.47 for a true 1.0)
    if name in UNSEEDED:
        assert result.empirical_mu > 0.55 * TRUE_MU[name], result
    else:
        assert abs(result.empirical_mu - TRUE_MU[name]) < 0.45 * TRUE_MU[name], result


def halve_gaussian_noise(monkeypatch):
    """Every Gaussian privacy draw at half its standard deviation (the true μ doubles): the continuous
    draws, and the grid releases (``release_on_grid``, which ``release_gaussian`` and AMP's output
    call) at half the integer scale."""
    draw, on_grid, goe = _noise.draw_gaussian, _noise.release_on_grid, _noise.release_goe

    def halved(size, std, generator, secure_rng, dtype, device, **kwargs):
        return draw(size, std / 2, generator, secure_rng, dtype, device, **kwargs)

    def halved_on_grid(statistic, noise, **kwargs):
        return on_grid(statistic, dataclasses.replace(noise, scale=max(1, noise.scale // 2)), **kwargs)

    monkeypatch.setattr(_noise, "draw_gaussian", halved)
    monkeypatch.setattr(_noise, "release_on_grid", halved_on_grid)
    monkeypatch.setattr(_noise, "release_goe", lambda G, *, mu, **kw: goe(G, mu=2 * mu, **kw))


@pytest.mark.parametrize("name", LEAK)
def test_quick_row_catches_halved_gaussian_noise(name, monkeypatch):
    halve_gaussian_noise(monkeypatch)
    result = ROWS[name](quick=True, seed=0)
    assert result.empirical_mu_lower > result.claimed_mu, result
