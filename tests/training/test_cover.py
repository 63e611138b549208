r"""The charge that covers a private selection's trials (``training.cover``): ``TrainingCover.check_trial``
refuses every trial the recorded charge does not cover (a closed cover, a missing or smaller record,
a run above the reference curve, a shape the profile bound was not computed over) and accepts the
rest, against curves computed here with Opacus's accountant; ``same_event`` compares runs up to
rounding; and ``train_planned_run`` returns a model only when Opacus accounted the planned run.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from botorch_dp.privacy.accountants import dp_sgd_rdp
from botorch_dp.privacy.ledger import ApproximateDP, DPSGDRun, PrivacyLedger, TrainingMechanism
from botorch_dp.privacy.ledger.events import TRAINING_RDP_ORDERS
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.training import DPSGDConfig, TrainingConfig
from botorch_dp.training.cover import TrainingCover, same_event, train_planned_run
from botorch_dp.training.dp_sgd import planned_dp_run

SHAPE = (0.1, 20)  # (sample rate, steps) of the reference trial


@functools.cache
def _curve(sigma: float, q: float, steps: int) -> np.ndarray:
    r"""One DP-SGD run's RDP curve on the ledger's grid, from Opacus's accountant."""
    orders = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)
    return np.asarray(dp_sgd_rdp(noise_multiplier=sigma, sample_rate=q, steps=steps, orders=orders), dtype=np.float64)


def _ledger_with(run_id: str, event) -> PrivacyLedger:
    ledger = PrivacyLedger()
    with ledger.charge_training({run_id: event}) as meter:
        meter.record(run_id)
    return ledger


REFERENCE = tuple(_curve(1.0, *SHAPE).tolist())


def test_a_run_at_or_below_the_reference_is_covered_and_one_above_it_is_not():
    ledger = _ledger_with("sel", TrainingMechanism("a selection", tuple(2 * v for v in REFERENCE)))
    cover = TrainingCover(ledger, "sel", REFERENCE, 1.0)
    cover.check_trial(ledger, DPSGDRun(1.0, *SHAPE))  # the reference run itself
    cover.check_trial(ledger, DPSGDRun(1.5, 0.1, 20))  # noisier
    cover.check_trial(ledger, DPSGDRun(1.0, 0.1, 12))  # fewer steps
    for above in (DPSGDRun(0.9, 0.1, 20), DPSGDRun(1.0, 0.1, 21), DPSGDRun(1.0, 0.11, 20)):
        assert np.any(_curve(*above) > np.asarray(REFERENCE))  # Opacus's curve: above the reference somewhere
        with pytest.raises(RuntimeError, match="lies above the cover's reference curve"):
            cover.check_trial(ledger, above)
    cover.close()
    assert not cover.is_open
    with pytest.raises(RuntimeError, match="open TrainingCover"):
        cover.check_trial(ledger, DPSGDRun(1.0, *SHAPE))


def test_the_record_must_be_in_the_ledger_and_cover_the_reference_at_every_order():
    smaller = list(2 * v for v in REFERENCE)
    smaller[3] = REFERENCE[3] * (1 - 1e-6)  # below the reference at one order only
    ledger = _ledger_with("sel", TrainingMechanism("a selection", tuple(smaller)))
    with pytest.raises(RuntimeError, match="no training record 'sel' that covers a trial"):
        TrainingCover(ledger, "sel", REFERENCE, 1.0).check_trial(ledger, DPSGDRun(1.0, *SHAPE))
    with pytest.raises(RuntimeError, match="no training record 'other'"):
        TrainingCover(ledger, "other", REFERENCE, 1.0).check_trial(ledger, DPSGDRun(1.0, *SHAPE))


def test_under_a_profile_charge_a_trial_must_be_one_of_the_run_shapes():
    ledger = _ledger_with("sel", ApproximateDP("a selection at its profile bound", 2.0, 1e-5))
    run = DPSGDRun(1.0, *SHAPE)
    with pytest.raises(RuntimeError, match="no training record"):  # an (ε, δ) record without run shapes
        TrainingCover(ledger, "sel", REFERENCE, 1.0).check_trial(ledger, run)
    TrainingCover(ledger, "sel", REFERENCE, 1.0, (SHAPE,)).check_trial(ledger, run)
    TrainingCover(ledger, "sel", REFERENCE, 1.0, ((0.05, 40), SHAPE)).check_trial(ledger, DPSGDRun(1.0, 0.1, 15))
    with pytest.raises(RuntimeError, match="dominated by none of the run shapes"):
        TrainingCover(ledger, "sel", REFERENCE, 1.0, ((0.1, 19),)).check_trial(ledger, run)
    with pytest.raises(ValueError, match="noise_multiplier"):
        TrainingCover(ledger, "sel", REFERENCE, 0.0)


def test_a_trial_noisier_than_the_cover_is_checked_at_the_covers_sigma(monkeypatch):
    import botorch_dp.training.selection_accounting as accounting

    ledger = _ledger_with("sel", TrainingMechanism("a selection", tuple(2 * v for v in REFERENCE)))
    cover = TrainingCover(ledger, "sel", REFERENCE, 1.0)
    real = accounting.trial_rdp_curve
    seen = []

    def overflowing(sigma, shapes):  # compute_rdp overflowing to inf at a larger σ: no bound of the run there
        seen.append(sigma)
        return real(sigma, shapes) if sigma <= 1.0 else np.full(len(TRAINING_RDP_ORDERS), np.inf)

    monkeypatch.setattr(accounting, "trial_rdp_curve", overflowing)
    cover.check_trial(ledger, DPSGDRun(4.0, *SHAPE))  # the run at σ = 1 plus noise: covered by post-processing
    assert seen == [1.0]
    with pytest.raises(RuntimeError, match="lies above the cover's reference curve"):
        cover.check_trial(ledger, DPSGDRun(4.0, 0.1, 21))  # noisier, but one step more than the reference


def test_under_a_profile_charge_a_trial_must_have_at_least_the_covers_sigma():
    ledger = _ledger_with("sel", ApproximateDP("a selection at its profile bound", 2.0, 1e-5))
    loose = tuple(_curve(0.5, *SHAPE).tolist())  # a reference the RDP check passes at σ = 0.8
    cover = TrainingCover(ledger, "sel", loose, 1.0, (SHAPE,))
    cover.check_trial(ledger, DPSGDRun(1.0, *SHAPE))
    cover.check_trial(ledger, DPSGDRun(3.0, *SHAPE))  # more noise: a profile no larger
    with pytest.raises(RuntimeError, match=r"dominated by none of the run shapes .*at noise_multiplier >= 1"):
        cover.check_trial(ledger, DPSGDRun(0.8, *SHAPE))  # the profile bound was computed at σ = 1


def test_another_mechanisms_trial_is_covered_only_below_the_reference_by_an_rdp_record():
    r"""``check_mechanism`` (an AMP trial's ``TrainingMechanism``): covered at or below the reference at every
    order, refused above it at one order, under a closed cover, or when the record is an ``(ε, δ)`` entry."""
    ledger = _ledger_with("sel", TrainingMechanism("a selection", tuple(2 * v for v in REFERENCE)))
    cover = TrainingCover(ledger, "sel", REFERENCE, 1.0)
    cover.check_mechanism(ledger, TrainingMechanism("a trial", REFERENCE))
    above = list(0.5 * v for v in REFERENCE)
    above[7] = REFERENCE[7] * (1 + 1e-6)
    with pytest.raises(RuntimeError, match="lies above the cover's reference curve"):
        cover.check_mechanism(ledger, TrainingMechanism("a trial", tuple(above)))
    profile = _ledger_with("sel", ApproximateDP("a selection at its profile bound", 2.0, 1e-5))
    with pytest.raises(RuntimeError, match="not an RDP record"):
        TrainingCover(profile, "sel", REFERENCE, 1.0, (SHAPE,)).check_mechanism(
            profile, TrainingMechanism("t", REFERENCE)
        )
    cover.close()
    with pytest.raises(RuntimeError, match="open TrainingCover"):
        cover.check_mechanism(ledger, TrainingMechanism("a trial", REFERENCE))


def test_same_event_compares_runs_up_to_rounding_of_the_rate():
    run = DPSGDRun(1.2, 0.1, 30)
    assert same_event(run, DPSGDRun(1.2, 0.1 * (1 + 1e-12), 30)) and same_event(None, None)
    assert not same_event(run, DPSGDRun(1.2, 0.1 * (1 + 1e-6), 30))
    assert not same_event(run, DPSGDRun(1.2, 0.1, 31)) and not same_event(run, DPSGDRun(1.3, 0.1, 30))
    curve = np.asarray(REFERENCE)
    amp = TrainingMechanism("AMP", tuple(curve))
    assert same_event(amp, TrainingMechanism("AMP", tuple(curve * (1 + 1e-12))))
    assert not same_event(amp, TrainingMechanism("AMP", tuple(curve * (1 + 1e-6))))
    assert not same_event(amp, TrainingMechanism("AMP, λ = 2", tuple(curve))) and not same_event(amp, run)
    assert not same_event(run, None) and not same_event(None, amp)


@pytest.fixture(scope="module")
def rows(toy_rows):
    return toy_rows(torch.Generator().manual_seed(0), 40)


TRAINING = TrainingConfig(epochs=1, batch_size=10, seed=0, num_threads=1)
DP = DPSGDConfig(noise_multiplier=1.1, max_grad_norm=1.0)


def test_a_model_is_returned_only_when_opacus_accounted_the_planned_run(rows):
    X, y = rows
    planned = DPSGDRun(*planned_dp_run(len(y), TRAINING, DP))
    model_fn = functools.partial(nn.Linear, 3, 2)
    kwargs = dict(dp_sgd=DP, noise_seed=4, optimizer_kwargs={"lr": 0.1}, seed_warned=True)
    model = train_planned_run(model_fn, X, y, TRAINING, planned=planned, charged_as="run 'a'", **kwargs)
    assert isinstance(model, nn.Linear) and not model.training
    for other in (DPSGDRun(1.1, planned.sample_rate, planned.steps + 1), DPSGDRun(1.0, planned.sample_rate, 4)):
        with pytest.raises(RuntimeError, match=r"Opacus accounted \(1\.1, .*, 4\) for run 'a', charged as"):
            train_planned_run(model_fn, X, y, TRAINING, planned=other, charged_as="run 'a', charged as x", **kwargs)
    # non-private training: no history, and none planned
    plain = dict(optimizer_kwargs={"lr": 0.1})
    assert isinstance(
        train_planned_run(model_fn, X, y, TRAINING, dp_sgd=None, planned=None, charged_as="-", **plain), nn.Linear
    )
    with pytest.raises(RuntimeError, match="Opacus accounted None for a run planned as"):
        train_planned_run(
            model_fn, X, y, TRAINING, dp_sgd=None, planned=planned, charged_as="a run planned as", **plain
        )
    # a DP-SGD run planned as nothing (uncharged) is refused too
    with pytest.raises(RuntimeError, match=r"Opacus accounted \(1\.1, .*, 4\) for a run planned as none"):
        train_planned_run(model_fn, X, y, TRAINING, planned=None, charged_as="a run planned as none", **kwargs)


def test_an_explicit_seed_warns_unless_the_caller_warned_already(rows):
    X, y = rows
    planned = DPSGDRun(*planned_dp_run(len(y), TRAINING, DP))
    args = (functools.partial(nn.Linear, 3, 2), X, y, TRAINING)
    kwargs = dict(dp_sgd=DP, planned=planned, charged_as="-", noise_seed=4, optimizer_kwargs={"lr": 0.1})
    with pytest.warns(PrivacyWarning):
        train_planned_run(*args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        a = train_planned_run(*args, seed_warned=True, **kwargs)
        b = train_planned_run(*args, seed_warned=True, **kwargs)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))  # the seed reproduces
    assert math.isfinite(float(a.weight.detach().sum()))
