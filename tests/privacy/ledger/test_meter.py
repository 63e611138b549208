r"""Meters (botorch_dp/privacy/ledger/meter.py): a charged step records each release at most once and
within its part's bound, and every refusal comes before the ledger's append is called (so before the
draw); what a charge holds is the closed-form composition of its bound (``√Σμ²`` while all is GDP,
the summed RDP curve otherwise), and what is left after a release is ``√(μ_held² − μ_used²)``."""

import math

import numpy as np
import pytest

from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PureDP,
    TrainingMechanism,
    ValidationMechanism,
)
from botorch_dp.privacy.ledger.meter import Meter, TrainingMeter, check_validation_bound, fits_bound, held_bound, shrunk

ORDERS = np.asarray(TRAINING_RDP_ORDERS)


def _meter(bound, step=3):
    appended = []

    def append(meter, part, event):
        appended.append((meter.run_id, meter.key(part), event))
        return f"id-{len(appended)}"

    return Meter(append, bound, "run", step, "owner"), appended


def test_each_part_is_recorded_once_within_its_bound_and_refusals_record_nothing():
    meter, appended = _meter({"grad": Gaussian(0.5), "norm": PureDP(0.2)})
    with pytest.raises(ValueError, match="part 'scale' is not in this step's bound"):
        meter.record("scale", Gaussian(0.1))
    with pytest.raises(ValueError, match="'grad'.*exceeds the step's bound"):
        meter.record("grad", Gaussian(0.51))
    with pytest.raises(ValueError, match="'norm'.*exceeds"):
        meter.record("norm", Gaussian(0.01))  # a Gaussian never fits a pure bound
    assert appended == []
    assert meter.record("grad", Gaussian(0.5)) == "id-1"
    with pytest.raises(RuntimeError, match="already recorded"):
        meter.record("grad", Gaussian(0.1))
    assert meter.record("norm", PureDP(0.1)) == "id-2"
    meter.close()
    with pytest.raises(RuntimeError, match="charge has ended"):
        meter.record("norm", PureDP(0.1))
    assert appended == [("run", "step-0003/grad", Gaussian(0.5)), ("run", "step-0003/norm", PureDP(0.1))]
    assert meter.recorded == {"grad": Gaussian(0.5), "norm": PureDP(0.1)}


def test_the_gradient_alone_in_its_step_gets_the_bare_key():
    meter, _ = _meter({"grad": Gaussian(0.5), "scale": Gaussian(0.1)}, step=12)
    assert meter.key("grad") == "step-0012" and meter.key("scale") == "step-0012/scale"
    assert _meter({"grad": Gaussian(0.5)}, step=None)[0].key("select") == "select"


def test_a_training_meter_records_each_run_once_at_exactly_its_parameters():
    appended = []
    run = DPSGDRun.checked(1.0, 0.1, 20)
    meter = TrainingMeter(lambda run_id, event: appended.append((run_id, event)) or "id", {7: run}, "owner")
    with pytest.raises(ValueError, match="exceeds its bound"):
        meter.record(7, DPSGDRun.checked(1.0, 0.1, 10))  # a DP-SGD run fits only its own parameters
    with pytest.raises(ValueError, match="run_id 8 is not in this charge's runs"):
        meter.record(8)
    assert appended == []
    meter.record(7)
    with pytest.raises(RuntimeError, match="already recorded"):
        meter.record(7)
    assert appended == [(7, run)] and meter.recorded == {7: run}


def test_fits_bound_compares_like_with_like():
    curve = TrainingMechanism("c", tuple(ORDERS * 0.1))
    assert fits_bound(Gaussian(0.3), Gaussian(0.3)) and not fits_bound(Gaussian(0.31), Gaussian(0.3))
    assert fits_bound(PureDP(0.5), Gaussian(PureDP(0.5).mu)) and not fits_bound(PureDP(0.6), Gaussian(PureDP(0.5).mu))
    assert fits_bound(ApproximateDP("a", 0.1, 1e-7), ApproximateDP("b", 0.2, 1e-6))
    assert not fits_bound(ApproximateDP("a", 0.1, 1e-5), ApproximateDP("b", 0.2, 1e-6))
    assert not fits_bound(ApproximateDP("a", 0.1, 1e-7), curve)
    assert fits_bound(TrainingMechanism("d", tuple(ORDERS * 0.05)), curve)
    assert not fits_bound(TrainingMechanism("d", tuple(ORDERS * 0.2)), curve)
    # A Gaussian against an RDP bound: its curve α μ²/2 must lie under the bound's at every order.
    rdp_bound = ValidationMechanism("v", tuple(ORDERS * 0.5))
    assert fits_bound(Gaussian(1.0), rdp_bound) and not fits_bound(Gaussian(1.01), rdp_bound)


def test_a_charge_holds_the_closed_form_composition_of_its_bound():
    held = held_bound([Gaussian(0.3), Gaussian(0.4), PureDP(0.5)])
    assert isinstance(held, Gaussian)
    assert held.mu == pytest.approx(math.sqrt(0.09 + 0.16 + PureDP(0.5).mu ** 2), rel=1e-12)
    curve = ValidationMechanism("v", tuple(ORDERS * 0.01))
    mixed = held_bound([Gaussian(0.3), curve])
    assert isinstance(mixed, ValidationMechanism)
    np.testing.assert_allclose(mixed.rdp, ORDERS * 0.3**2 / 2 + ORDERS * 0.01, rtol=1e-12)


def test_what_is_left_after_a_release_is_the_rest_of_the_composition():
    left = shrunk(Gaussian(0.5), Gaussian(0.3))
    assert isinstance(left, Gaussian) and left.mu == pytest.approx(0.4, rel=1e-12)
    assert shrunk(Gaussian(0.5), Gaussian(0.5)) is None
    assert shrunk(Gaussian(math.inf), Gaussian(0.5)) == Gaussian(math.inf)
    held = ValidationMechanism("v", tuple(ORDERS * 0.3))
    left = shrunk(held, Gaussian(0.5))
    np.testing.assert_allclose(left.rdp, np.maximum(ORDERS * 0.3 - ORDERS * 0.125, 0.0), rtol=1e-12)
    assert shrunk(held, held) is None


@pytest.mark.parametrize(
    ("bound", "message"),
    [
        ({}, "bound must be a non-empty mapping"),
        ([Gaussian(1.0)], "bound must be"),
        ({"grad": 1.0}, r"bound\['grad'\]"),
    ],
)
def test_a_bad_bound_is_refused_naming_it(bound, message):
    with pytest.raises(ValueError, match=message):
        check_validation_bound(bound)
    with pytest.raises(ValueError, match="part must be a lower-case name"):
        check_validation_bound({"Grad": Gaussian(1.0)})
