r"""Clip policies (botorch_dp/optim/options/clip.py): a fixed bound clips every step at ``B`` and keeps no
record; ``QuantileClip`` starts at ``B₀``, charges one count of ``μ_C/√T_max`` per step under the key
``step-t/clip`` and moves to ``B_{t+1} = B_t exp(−η_C(b̃_t/n − γ))`` from the released count (closed
form); ``QuantileClip`` wraps a ``FixedClip`` that makes the sum at the bound the state holds; each
strategy's ``spec()`` rebuilds it through the registry, and bad settings are refused naming the field."""

import json
import math

import pytest
import torch

from botorch_dp.optim.options import FixedClip, QuantileClip, from_spec
from botorch_dp.optim.options.base import RunPlan
from botorch_dp.optim.options.budget import BudgetSplit
from botorch_dp.optim.options.clip import ClipState
from botorch_dp.optim.users import InMemoryUsers
from botorch_dp.privacy.ledger import PrivacyLedger


@pytest.mark.parametrize("strategy", [FixedClip(2.5), QuantileClip(2.0, 0.7, 0.1, 0.2), QuantileClip()])
def test_a_clip_policy_is_rebuilt_from_its_spec(strategy):
    assert from_spec("clip", json.loads(json.dumps(strategy.spec()))) == strategy
    assert strategy.key == f"clip:{strategy.name}"


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FixedClip(0.0), r"clip_bound \(B\)"),
        (lambda: FixedClip(math.inf), r"clip_bound \(B\)"),
        (lambda: QuantileClip(bound=-1.0), r"clip_init \(B₀\)"),
        (lambda: QuantileClip(quantile=1.0), r"clip_quantile \(γ\)"),
        (lambda: QuantileClip(learning_rate=0.0), r"clip_learning_rate \(η_C\)"),
        (lambda: QuantileClip(fraction=0.0), r"clip_mu_fraction \(f_C\)"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def _users_and_weights(n=40):
    g = torch.Generator().manual_seed(3)
    losses = torch.randn(4, n, generator=g, dtype=torch.float64)
    W = torch.randn(2, 4, generator=g, dtype=torch.float64)
    return InMemoryUsers((losses,)), W


def test_a_fixed_bound_clips_every_step_at_b_and_keeps_no_record():
    users, W = _users_and_weights()
    clip = FixedClip(1.5)
    state = clip.initial_state()
    assert state == ClipState() and clip.current(state) == 1.5 and clip.mu_fraction is None
    summed = clip.aggregate(users, W, state)
    expected = users.clipped_sum(W, 1.5)
    assert torch.equal(summed.total, expected.total) and summed.bound == 1.5
    plan = RunPlan(num_iterations=4, iteration_cap=4, dim=2, num_users=40, split=BudgetSplit(1.0))
    assert clip.bound_parts(plan) == {} and clip.update(summed, plan, state, meter=None) is state


def test_a_quantile_clip_charges_its_count_and_moves_the_bound_in_closed_form():
    users, W = _users_and_weights()
    clip = QuantileClip(1.0, quantile=0.5, learning_rate=0.2, fraction=0.2)
    split = BudgetSplit(2.0, clip_fraction=0.2)
    plan = RunPlan(4, 4, 2, 40, split, generator=torch.Generator().manual_seed(0))
    count_mu = 2.0 * math.sqrt(0.2) / math.sqrt(4)
    parts = clip.bound_parts(plan)
    assert set(parts) == {"clip"} and parts["clip"].mu == pytest.approx(count_mu, rel=1e-12)
    ledger, state = PrivacyLedger(), clip.initial_state()
    for step in range(2):
        summed = clip.aggregate(users, W, state)
        assert summed.bound == state.bounds[-1]
        with ledger.charge(clip.bound_parts(plan), run_id="run", step=step) as meter:
            state = clip.update(summed, plan, state, meter)
        b, count = state.bounds[-2], state.counts[-1]
        assert state.bounds[-1] == pytest.approx(b * math.exp(-0.2 * (count / 40 - 0.5)), rel=1e-12)
    assert len(state.bounds) == 3 and len(state.counts) == 2
    assert ledger.validation.steps() == {
        ("run", "step-0000/clip"): pytest.approx(count_mu, rel=1e-12),
        ("run", "step-0001/clip"): pytest.approx(count_mu, rel=1e-12),
    }
    with pytest.raises(ValueError, match="needs a BudgetSplit with a clip_fraction"):
        clip.count_mu(RunPlan(4, 4, 2, 40, BudgetSplit(2.0)))


def test_a_quantile_clip_wraps_a_fixed_clip_that_sums_at_the_states_bound():
    users, W = _users_and_weights()
    clip = QuantileClip(1.0, quantile=0.5, learning_rate=0.2, fraction=0.2)
    assert not isinstance(clip, FixedClip) and clip.base == FixedClip(1.0)
    assert clip.initial_state() == ClipState(bounds=(1.0,))
    state = ClipState(bounds=(1.0, 0.4), counts=(12.0,))
    summed, expected = clip.aggregate(users, W, state), users.clipped_sum(W, 0.4)
    assert summed.bound == 0.4 == clip.current(state) == clip.base.current(state)
    assert torch.equal(summed.total, expected.total) and summed.within == expected.within
