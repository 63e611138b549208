r"""Tests of ``optim.selection``: refusals, the explicit budget split, the free argmin of
released norms and the ledger records of a selection (pure ε converted to μ, idempotent)."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_dp.optim.selection import (
    SELECTION_KEY,
    check_selection,
    min_noisy_norm_index,
    release_selection,
    selection_mechanism,
    selection_mu_of,
    steps_mu,
)
from botorch_dp.privacy.analysis.gdp import compose_gdp, pure_dp_to_gdp_mu
from botorch_dp.privacy.ledger import PrivacyBudgetExceeded, PrivacyLedger, PureDP
from botorch_dp.privacy.mechanisms import ExponentialLossSelection, NoisyLossSelection

RUN = "0" * 32


def _check(selection="last", schedule="fixed", mu=1.0, **kw):
    given = dict(selection_epsilon=None, selection_mu=None, loss_clip=None)
    given.update(kw)
    return check_selection(selection, noise_schedule=schedule, privacy_mu=mu, **given)


def test_valid_choices_pass_and_return_floats():
    assert _check() == (None, None, None)
    assert _check("min_noisy_norm", "adaptive_norm") == (None, None, None)
    assert _check("exponential", selection_epsilon=0.5, loss_clip=2) == (0.5, None, 2.0)
    assert _check("noisy_loss", "adaptive_norm", selection_mu=0.3, loss_clip=1.0) == (None, 0.3, 1.0)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("best",), {}, "selection must be one of"),
        (("min_noisy_norm", "fixed"), {}, "only noise_schedule='adaptive_norm' releases"),
        (("exponential",), {"loss_clip": 1.0}, "needs selection_epsilon"),
        (("exponential",), {"selection_epsilon": 1.0}, "needs loss_clip"),
        (("noisy_loss",), {"loss_clip": 1.0}, "needs selection_mu"),
        (("last",), {"loss_clip": 1.0}, "loss_clip is only used"),
        (
            ("exponential",),
            {"selection_epsilon": 1.0, "selection_mu": 0.1, "loss_clip": 1.0},
            "selection_mu is only used",
        ),
        (
            ("noisy_loss",),
            {"selection_epsilon": 1.0, "selection_mu": 0.1, "loss_clip": 1.0},
            "selection_epsilon is only",
        ),
        (("exponential",), {"selection_epsilon": -1.0, "loss_clip": 1.0}, "selection_epsilon must be positive"),
        (("noisy_loss",), {"selection_mu": 0.1, "loss_clip": math.inf}, "loss_clip must be positive and finite"),
        (("noisy_loss",), {"selection_mu": 1.0, "loss_clip": 1.0}, "must be below privacy_mu"),
        (("exponential",), {"selection_epsilon": 0.9, "loss_clip": 1.0}, "must be below privacy_mu"),  # μ_sel = 1.11
        (("noisy_loss", "fixed", math.inf), {"selection_mu": 0.1, "loss_clip": 1.0}, "finite privacy_mu"),
    ],
)
def test_inconsistent_choices_are_refused_naming_the_argument(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _check(*args, **kwargs)


def test_budget_split_is_explicit_and_exact():
    assert selection_mu_of("last", None, None) == 0.0 and selection_mu_of("min_noisy_norm", None, None) == 0.0
    assert selection_mu_of("exponential", 0.5, None) == pure_dp_to_gdp_mu(0.5)
    assert selection_mu_of("noisy_loss", None, 0.4) == 0.4
    assert steps_mu(1.0, 0.0) == 1.0 and steps_mu(math.inf, 0.0) == math.inf  # unchanged bits without a selection
    assert steps_mu(1.0, 0.6) == pytest.approx(0.8, rel=1e-15)
    assert compose_gdp([steps_mu(2.0, 0.7), 0.7]) == pytest.approx(2.0, rel=1e-15)


def test_min_noisy_norm_index_is_the_first_argmin():
    assert min_noisy_norm_index([0.3, -0.2, 5.0, -0.2]) == 1
    assert min_noisy_norm_index([1e300]) == 0
    with pytest.raises(ValueError, match="No noisy norms"):
        min_noisy_norm_index([])


def test_selection_mechanisms_and_ledger_records():
    losses = torch.tensor([[0.1, 0.2, 0.3], [0.9, 0.8, 0.7]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    em = selection_mechanism("exponential", selection_epsilon=0.5, selection_mu=None, loss_clip=1.0, generator=gen)
    nl = selection_mechanism("noisy_loss", selection_epsilon=None, selection_mu=0.3, loss_clip=1.0, generator=gen)
    assert isinstance(em, ExponentialLossSelection) and isinstance(nl, NoisyLossSelection)
    with pytest.raises(ValueError, match="needs no mechanism"):
        selection_mechanism("last", selection_epsilon=None, selection_mu=None, loss_clip=None, generator=None)

    ledger = PrivacyLedger(validation_mu_budget=1.0)
    common = dict(selection_epsilon=0.5, selection_mu=None, loss_clip=1.0, generator=gen)
    release_selection("exponential", losses, ledger=ledger, run_id=RUN, **common)
    assert [(r.run_id, r.key, r.event) for r in ledger.validation.records()] == [(RUN, SELECTION_KEY, PureDP(0.5))]
    assert ledger.validation.mu() == pytest.approx(pure_dp_to_gdp_mu(0.5))
    report = ledger.report(1e-5)["validation"]["pure_releases"]
    assert report == [{"run_id": RUN, "key": SELECTION_KEY, "epsilon": 0.5, "mu": pure_dp_to_gdp_mu(0.5)}]
    release_selection("exponential", losses, ledger=ledger, run_id=RUN, **common)  # a second release: charged again
    assert len(ledger.validation.records(RUN)) == 2
    assert ledger.validation.mu() == pytest.approx(math.sqrt(2) * pure_dp_to_gdp_mu(0.5))

    other = PrivacyLedger(validation_mu_budget=0.3)
    noisy = dict(selection_epsilon=None, selection_mu=0.3, loss_clip=1.0, generator=gen)
    release_selection("noisy_loss", losses, ledger=other, run_id=RUN, **noisy)
    assert other.validation.steps() == {(RUN, SELECTION_KEY): pytest.approx(0.3, rel=1e-15)}
    state = gen.get_state()
    with pytest.raises(PrivacyBudgetExceeded, match="Nothing was released"):  # refused before its draw
        release_selection("noisy_loss", losses, ledger=other, run_id="1" * 32, **noisy)
    assert torch.equal(gen.get_state(), state) and len(other.validation.records()) == 1


def test_missing_selection_fields_and_run_id_are_refused_by_name_before_any_draw():
    losses = torch.tensor([[0.1, 0.2, 0.3], [0.9, 0.8, 0.7]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    with pytest.raises(ValueError, match=r"selection='exponential' needs selection_epsilon, got None"):
        selection_mechanism("exponential", selection_epsilon=None, selection_mu=None, loss_clip=1.0, generator=gen)
    with pytest.raises(ValueError, match=r"selection='noisy_loss' needs loss_clip, got None"):
        selection_mechanism("noisy_loss", selection_epsilon=None, selection_mu=0.3, loss_clip=None, generator=gen)
    ledger = PrivacyLedger(validation_mu_budget=1.0)
    with pytest.raises(ValueError, match=r"needs run_id .*got None"):
        release_selection(
            "exponential", losses, selection_epsilon=0.5, selection_mu=None, loss_clip=1.0, generator=gen, ledger=ledger
        )
    assert torch.equal(gen.get_state(), state) and ledger.validation.records() == []
