r"""Noise schedules (botorch_dp/optim/options/noise.py): the fixed schedule makes every one of the ``T``
steps ``μ_g/√T``-GDP with noise ``σ = 2B√T/(nμ_g)`` (Sopa et al., Thm. 3.1), charged as ``"grad"``, and
its record follows from the config; the adaptive schedule's step bound holds a norm and a gradient,
it refuses to start a step the budget cannot pay for, and its record is the stored one; each
schedule is rebuilt from its ``spec()`` and bad settings are refused naming the field."""

import json
import math

import pytest
import torch

from botorch_dp.optim.options import AdaptiveNorm, FixedNoise, from_spec
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.noise import NoiseState
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger

N, T, B, MU = 50, 4, 2.0, 1.5


def _plan(cap=T):
    return RunPlan(T, cap, 2, N, BudgetSplit(MU), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("schedule", [FixedNoise(), AdaptiveNorm(), AdaptiveNorm(0.2, 2.0, 0.5, 9)])
def test_a_schedule_is_rebuilt_from_its_spec(schedule):
    assert from_spec("noise", json.loads(json.dumps(schedule.spec()))) == schedule


def test_the_fixed_schedule_releases_each_step_at_its_closed_form_and_charges_it():
    plan, noise = _plan(), FixedNoise()
    sigma = 2.0 * B * math.sqrt(T) / (N * MU)
    std, multiplier = noise.noise(plan, NoiseState(), B)
    assert std == pytest.approx(sigma, rel=1e-12) and multiplier == pytest.approx(sigma / (2.0 * B / N), rel=1e-12)
    assert noise.bound(plan, NoiseState(), [], math.inf)["grad"].mu == pytest.approx(MU / math.sqrt(T), rel=1e-12)
    g = torch.Generator().manual_seed(1)
    users = InMemoryUsers((torch.randn(3, N, generator=g, dtype=torch.float64),))
    summed = users.clipped_sum(torch.randn(2, 3, generator=g, dtype=torch.float64), B)
    ledger, state = PrivacyLedger(), NoiseState()
    for step in range(2):
        with ledger.charge(noise.bound(plan, state, [], math.inf), run_id="run", step=step) as meter:
            _, state = noise.release(summed, plan, state, meter, step=step, dim=2, spent=[], room=math.inf)
    assert state.step_mus == pytest.approx([MU / math.sqrt(T)] * 2, rel=1e-12)
    assert state.noise_stds == pytest.approx([sigma] * 2, rel=1e-12)
    assert ledger.validation.mu() == pytest.approx(MU * math.sqrt(2 / T), rel=1e-12)
    assert noise.restored(plan, NoiseState(), [B, B]) == NoiseState(state.step_mus, state.noise_stds)
    assert noise.iteration_cap(T) == T


def test_the_adaptive_schedule_bounds_a_norm_and_a_gradient_and_refuses_a_step_it_cannot_pay():
    noise = AdaptiveNorm(max_iterations=6)
    assert noise.iteration_cap(T) == 6 and noise.provides == {"noisy_norms"}
    plan = _plan(cap=noise.iteration_cap(T))  # the run's plan carries the schedule's T_max
    bound = noise.bound(plan, NoiseState(), [], math.inf)
    assert set(bound) == {"norm", "grad"}
    assert bound["norm"].mu == pytest.approx(MU * math.sqrt(noise.norm_mu_fraction / 6), rel=1e-12)  # μ_N
    with pytest.raises(PrivacyBudgetExceeded, match="the ledger has mu=0.001 left.*Nothing was released"):
        noise.bound(plan, NoiseState(), [], 1e-3)
    stored = NoiseState((0.3,), (1.0,), (0.2,), (0.1,), False)
    assert noise.restored(plan, stored, [B]) is stored


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: AdaptiveNorm(norm_mu_fraction=1.0), r"norm_mu_fraction \(f_N\)"),
        (lambda: AdaptiveNorm(snr_factor=0.0), r"snr_factor \(c_snr\)"),
        (lambda: AdaptiveNorm(max_step_mu=math.inf), r"max_step_mu \(μ_max\)"),
        (lambda: AdaptiveNorm(max_iterations=0), r"max_iterations \(T_max\)"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()
