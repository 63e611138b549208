r"""Selection rules (botorch_dp/optim/options/selection.py): the free rules return the last iterate or the
first smallest released norm (brute force); the evaluated rules charge their closed form
(``2Φ⁻¹(e^ε/(1 + e^ε))`` for the exponential mechanism, ``μ_sel`` for noisy losses), record it as
``"select"`` when they choose, and with negligible noise choose the smallest mean loss; each rule is
rebuilt from its ``spec()`` and bad settings are refused naming the field."""

import json
import math

import pytest
import torch
from scipy.special import ndtri

from botorch_dp.optim.options import Exponential, Last, MinNoisyNorm, NoisyLoss, from_spec
from botorch_dp.privacy.ledger import PrivacyLedger, PureDP


@pytest.mark.parametrize("rule", [Last(), MinNoisyNorm(), Exponential(0.7, 2.0), NoisyLoss(0.4, 3.0)])
def test_a_rule_is_rebuilt_from_its_spec(rule):
    assert from_spec("selection", json.loads(json.dumps(rule.spec()))) == rule


def test_the_free_rules_pick_the_last_iterate_or_the_first_smallest_norm():
    norms = (0.5, 0.2, 0.9, 0.2)
    assert Last().index(5, norms) == 4 and Last().charge == 0.0 and not Last().evaluated
    first_min = min(range(len(norms)), key=lambda i: (norms[i], i))
    assert MinNoisyNorm().index(5, norms) == first_min == 1
    assert MinNoisyNorm().index(5, ()) == 4
    assert MinNoisyNorm().requires == {"noisy_norms"}


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_the_evaluated_rules_charge_their_closed_form(epsilon):
    expected = 2.0 * ndtri(math.exp(epsilon) / (1.0 + math.exp(epsilon)))
    assert Exponential(epsilon).charge == pytest.approx(expected, rel=1e-12)
    assert Exponential(epsilon).event() == PureDP(epsilon)
    assert NoisyLoss(epsilon).charge == epsilon and NoisyLoss(epsilon).event().mu == epsilon


@pytest.mark.parametrize("rule", [Exponential(200.0, 1.0), NoisyLoss(1e6, 1.0)])
def test_with_negligible_noise_the_smallest_mean_loss_is_chosen_and_recorded(rule):
    n = 100
    sums = torch.tensor([60.0, 20.0, 45.0, 90.0], dtype=torch.float64)  # clamped loss sums over n users
    ledger = PrivacyLedger()
    with ledger.charge({"select": rule.event()}, run_id="run") as meter:
        chosen = rule.release(sums, n, meter, torch.Generator().manual_seed(0))
    assert chosen.index == 1
    assert list(ledger.validation.steps()) == [("run", "select")]
    assert ledger.validation.mu() == pytest.approx(rule.charge, rel=1e-12)


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: Exponential(epsilon=0.0), "selection_epsilon"),
        (lambda: Exponential(epsilon=math.inf), "selection_epsilon"),
        (lambda: Exponential(loss_clip=-1.0), "loss_clip"),
        (lambda: NoisyLoss(mu=0.0), "selection_mu"),
        (lambda: NoisyLoss(loss_clip=math.inf), "loss_clip"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(make, named):
    with pytest.raises(ValueError, match=named):
        make()
