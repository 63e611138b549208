"""The methods that protect the training records (issue 41 item 2): proxy_then_train, subsample_tuning and untuned
behind the Method protocol, each simulated on a PUBLIC proxy's data at its own noise (methods.training_proxy), chosen
by the proxy's fitting half and scored on its scoring half."""

import math
import warnings

import pytest

# cheap_tuning binds cheap_plan's functions by name when first imported: import it before any test
# patches them, or a patched function would stay bound there for the rest of the session
import botorch_dp.methods.cheap_tuning  # noqa: F401
from botorch_dp.methods import cheap_plan as cp
from botorch_dp.methods import training_proxy as tp
from botorch_dp.methods.training_choice import training_method
from botorch_dp.methods.training_proxy import TrainingProxy
from botorch_dp.privacy.seeding import PrivacyWarning
from tests.methods.method_helpers import TRAINING_SPACE as SPACE
from tests.methods.method_helpers import training_proxy_data as _proxy_data

EPS, DELTA = 3.0, 1e-5


@pytest.fixture
def objective(training_objective):  # tests/methods/conftest.py
    return training_objective


@pytest.mark.parametrize("name", ["proxy_then_train", "untuned", "subsample_tuning", "training_selection"])
def test_each_method_is_simulated_at_the_noise_its_private_run_would_draw(objective, monkeypatch, name):
    seen = []
    real_copy = tp.TrainingProxy.copy

    def spy(self, sigma, seed, rows=None):
        seen.append((sigma, None if rows is None else len(rows)))
        return real_copy(self, sigma, seed, rows)

    monkeypatch.setattr(tp.TrainingProxy, "copy", spy)
    monkeypatch.setattr(cp, "final_only_noise", lambda **kw: (0.8, kw["epsilon"]))  # the accounting tested elsewhere
    plan = type("Plan", (), {"trial_noise_multiplier": 1.7, "final_noise_multiplier": 0.9, "subsample_fraction": 0.5})
    monkeypatch.setattr(cp, "plan_subsample_tuning", lambda **kw: plan)
    from botorch_dp.methods import training_selection as ts

    monkeypatch.setattr(ts, "_trial_noise", lambda *args: 1.3)
    data = _proxy_data()
    method = training_method(name, SPACE, epsilon=EPS, delta=DELTA, protect="training", proxy_data=data,
                             mean_trials=2.0, num_configurations=2)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        value = method.simulate_training(TrainingProxy(objective, data), seed=0)
    assert math.isfinite(value) and value > 0
    expected = {
        "proxy_then_train": [(0.8, None), (0.8, None)],  # the trials, then the final run: both at sigma_f
        "untuned": [(0.8, None)],
        "subsample_tuning": [(1.7, "subset"), (0.9, None)],  # the trials on a subset at sigma_t, final at sigma_f
        "training_selection": [(1.3, None)],  # the trials at the selection's own sigma; the winner's model is scored
    }[name]
    assert [s for s, _ in seen] == [s for s, _ in expected]
    for (_, rows), (_, kind) in zip(seen, expected, strict=True):
        assert (rows is None) == (kind is None) and (rows is None or 0 < rows < 80)
    assert objective.ledger.training.records() == []  # the private objective was never trained
