r"""What a release spends, as the ledger records it (botorch_dp/privacy/ledger/events.py): the
release keys and their parser are inverse to each other, every event survives its JSON form
exactly and is refused on the wrong side, the pure-DP charge is the closed form
``μ = 2Φ⁻¹(e^ε/(1 + e^ε))``, a callable curve is evaluated once per order, and bad curves and keys are
refused naming what is wrong."""

import itertools
import json
import math

import pytest
from scipy.special import ndtri

from botorch_dp.privacy.ledger.events import (
    TRAINING_RDP_ORDERS,
    ApproximateDP,
    DPSGDRun,
    Gaussian,
    PureDP,
    TrainingMechanism,
    ValidationApproximateDP,
    ValidationMechanism,
    check_rdp_values,
    evaluate_curve,
    event_from_json,
    event_to_json,
    legacy_release_id,
    parse_release_key,
    release_key,
    training_event,
    validation_event,
)

CURVE = tuple(0.5 * order for order in TRAINING_RDP_ORDERS)
VALIDATION = (
    Gaussian(0.7),
    Gaussian(math.inf),
    PureDP(0.3),
    ValidationMechanism("a curve", CURVE),
    ValidationApproximateDP("scores", 0.4, 1e-6),
)
TRAINING = (
    DPSGDRun.checked(1.1, 0.01, 300),
    TrainingMechanism("a curve", CURVE),
    ApproximateDP("a selection", 0.4, 1e-6),
)


@pytest.mark.parametrize("step", [None, 0, 3, 9999, 10000, 123456])
def test_release_keys_parse_back_to_their_step_and_part(step):
    parts_of_steps = [(), ("grad",), ("grad", "norm"), ("grad", "clip"), ("grad", "scale", "count")]
    for parts, part in itertools.product(parts_of_steps, ["grad", "norm", "clip", "select", "scale"]):
        key = release_key(step, part, parts)
        assert parse_release_key(key) == (step, part)
        if step is not None:
            assert key.startswith(f"step-{step:04d}")
            # The bare key is the gradient's, and only when no norm or clip count shares its step.
            assert (key == f"step-{step:04d}") == (part == "grad" and not {"norm", "clip"} & set(parts))


def test_a_key_that_is_no_step_key_parses_as_itself():
    for key in ("select", "step-12/grad", "step-0001/Grad", "other"):
        assert parse_release_key(key) == (None, key)


@pytest.mark.parametrize(
    ("step", "part", "named"),
    [(0, "Grad", "part"), (0, "", "part"), (0, 3, "part"), (-1, "grad", "step"), (True, "grad", "step")],
)
def test_a_bad_step_or_part_is_refused_naming_it(step, part, named):
    with pytest.raises(ValueError, match=f"^{named} must"):
        release_key(step, part)


@pytest.mark.parametrize(
    ("side", "event"), [("validation", e) for e in VALIDATION] + [("training", e) for e in TRAINING]
)
def test_every_event_survives_its_json_form_exactly_and_only_on_its_side(side, event):
    text = json.dumps(event_to_json(event))
    assert event_from_json(side, json.loads(text)) == event
    other = "training" if side == "validation" else "validation"
    own_kind = {ValidationMechanism: TrainingMechanism, TrainingMechanism: ValidationMechanism}
    own_kind.update({ApproximateDP: ValidationApproximateDP, ValidationApproximateDP: ApproximateDP})
    if type(event) in own_kind:  # a curve or an (epsilon, delta) is read as the side's own kind
        assert type(event_from_json(other, json.loads(text))) is own_kind[type(event)]
    else:
        with pytest.raises(ValueError, match=f"Not a {other} entry"):
            event_from_json(other, json.loads(text))
    assert (validation_event if side == "validation" else training_event)(event) is event
    with pytest.raises(TypeError):
        (training_event if side == "validation" else validation_event)(event)


@pytest.mark.parametrize("epsilon", [1e-4, 0.1, 1.0, 3.0, 10.0])
def test_a_pure_release_is_charged_the_closed_form_mu(epsilon):
    assert PureDP(epsilon).mu == pytest.approx(2.0 * ndtri(math.exp(epsilon) / (1.0 + math.exp(epsilon))), rel=1e-12)


def test_a_stored_pure_release_whose_mu_is_not_its_epsilons_is_refused():
    entry = event_to_json(PureDP(1.0))
    with pytest.raises(ValueError, match="is not the GDP conversion of epsilon=1.0"):
        event_from_json("validation", {**entry, "mu": entry["mu"] * 0.9})


def test_curves_are_checked_order_by_order_and_inf_is_allowed():
    assert check_rdp_values([math.inf] * len(TRAINING_RDP_ORDERS)) == (math.inf,) * len(TRAINING_RDP_ORDERS)
    with pytest.raises(ValueError, match=f"rdp must have {len(TRAINING_RDP_ORDERS)} values"):
        check_rdp_values(CURVE[:-1])
    with pytest.raises(ValueError, match="curve must be a list"):
        check_rdp_values("0.1", name="curve")
    order = TRAINING_RDP_ORDERS[2]
    for bad in (math.nan, -1e-9, "1", True, None):
        values = list(CURVE)
        values[2] = bad
        with pytest.raises(ValueError, match=f"rdp at order {order:g} must be"):
            check_rdp_values(values)
    with pytest.raises(ValueError, match="description must be a non-empty string"):
        ValidationMechanism("  ", CURVE)


def test_a_callable_curve_is_evaluated_once_per_order_and_checked():
    calls = []
    curve = evaluate_curve(lambda alpha: calls.append(alpha) or alpha / 8.0)
    assert calls == list(TRAINING_RDP_ORDERS) and curve == tuple(a / 8.0 for a in TRAINING_RDP_ORDERS)
    assert ValidationMechanism.from_rdp("sigma=2", lambda a: a / 8.0) == ValidationMechanism("sigma=2", curve)
    assert TrainingMechanism.from_rdp("sigma=2", lambda a: a / 8.0) == TrainingMechanism("sigma=2", curve)
    with pytest.raises(ValueError, match="rdp must be a callable"):
        evaluate_curve(0.5)
    with pytest.raises(ValueError, match="rdp at order 1.1 must be >= 0"):
        TrainingMechanism.from_rdp("negative", lambda a: -1.0)


def test_bad_event_parameters_are_refused_naming_them():
    for make, named in [
        (lambda: Gaussian(0.0), "mu"),
        (lambda: PureDP(-1.0), "epsilon"),
        (lambda: ApproximateDP("x", math.inf, 1e-6), "epsilon"),
        (lambda: ApproximateDP("x", 1.0, 1.0), "delta"),
        (lambda: DPSGDRun.checked(1.0, 1.5, 10), "sample_rate"),
        (lambda: DPSGDRun.checked(1.0, 0.1, 0), "steps"),
    ]:
        with pytest.raises(ValueError, match=named):
            make()


def test_legacy_ids_are_a_function_of_side_run_and_key():
    assert legacy_release_id("validation", "r", "step-0001") == legacy_release_id("validation", "r", "step-0001")
    ids = {legacy_release_id(s, r, k) for s in ("validation", "training") for r in ("r", 1, "1") for k in ("", "a")}
    assert len(ids) == 12
