"""tune(amp_objective, ..., protect="training" | "both") (issue 41, item 2): Papernot-Steinke private selection over
whole AMP training runs. The training ledger is charged ONCE, before the first trial, with the selection's RDP curve
of plan_amp_selection's per-trial reference (recomputed here from the P&S Thm. 2 formula); every AMP trial's own
curve lies below that reference (a spy on fit_amp); K stays hidden in what tune returns; bad inputs are refused by
name before anything is charged."""

import json
import math
import re
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from botorch_dp.methods.selection_charge import AMP_MECHANISM
from botorch_dp.privacy.analysis.objective_perturbation import amp_rdp
from botorch_dp.privacy.analysis.private_selection import sample_num_trials
from botorch_dp.privacy.analysis.rdp import rdp_curve_epsilon
from botorch_dp.privacy.ledger import TRAINING_RDP_ORDERS
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.problems import logistic_regression as lr
from botorch_dp.problems.logistic_regression import AMPTuningObjective, load_logistic_data, plan_amp_runs
from botorch_dp.tuning.one_call import tune
from botorch_dp.utils import child_seeds

EPSILON, DELTA, MEAN = 2.0, 1e-5, 3.0
ORDERS = np.asarray(TRAINING_RDP_ORDERS, dtype=np.float64)


@pytest.fixture(scope="module")
def data():
    return load_logistic_data("synthetic", seed=3, num_examples=120, num_features=3)


@pytest.fixture(scope="module")
def reference():
    r"""plan_amp_selection's per-trial budget at the call's settings (geometric K: tnb with eta = 1)."""
    return lr.plan_amp_selection(EPSILON, DELTA, mean_trials=MEAN, distribution="truncated_negative_binomial")


def _objective(data, **kw):
    budget = plan_amp_runs(5.0 if "lam_range" in kw else 1.0, DELTA, num_runs=1 if "lam_range" in kw else 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return AMPTuningObjective(data, budget, **kw)  # its own budget is not used, its constants are


class _Spy:
    r"""Wraps fit_amp: notes each trial's config and the ledger's record counts when it starts."""

    def __init__(self, obj):
        self.obj, self.calls = obj, []

    def __call__(self, X, y, config, **kw):
        ledger = self.obj.ledger
        self.calls.append((config, len(ledger.training.records()), len(ledger.validation.records())))
        return self.fit(X, y, config, **kw)


def _tune(obj, monkeypatch=None, **kw):
    spy = None
    if monkeypatch is not None:
        spy = _Spy(obj)
        spy.fit = lr.fit_amp
        monkeypatch.setattr(lr, "fit_amp", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        args = {"epsilon": EPSILON, "delta": DELTA, "mean_trials": MEAN, "progress": False, **kw}
        return tune(obj, obj.space, **args), spy


def _independent_selection_curve(reference):
    r"""P&S Thm. 2 with eta = 1 (gamma = 1/E[K]) of the reference AMP curve, the lambda-hat minimum by scipy on
    log lambda-hat (no code of the library's selection)."""
    params = reference.privacy_parameters
    log_inv_gamma = math.log(MEAN)

    def term(log_hat):
        hat = 1.0 + math.exp(log_hat)
        return (1.0 - 1.0 / hat) * float(amp_rdp(hat, **params)) + log_inv_gamma / hat

    grid = np.linspace(-8.0, 8.0, 801)
    start = grid[int(np.argmin([term(g) for g in grid]))]
    hat = minimize_scalar(term, bounds=(start - 0.05, start + 0.05), method="bounded", options={"xatol": 1e-10}).fun
    return np.asarray(amp_rdp(ORDERS, **params)) + 2.0 * hat + math.log(MEAN) / (ORDERS - 1.0)


@pytest.mark.privacy_fast
@pytest.mark.parametrize("protect", ["training", "both"])
def test_charged_once_before_the_first_trial_with_the_selections_curve_and_every_trial_below_the_budget(
    data, reference, monkeypatch, protect
):
    obj = _objective(data)
    result, spy = _tune(obj, monkeypatch, protect=protect, seed=4)
    assert result.method == "training_selection" and spy.calls
    # one record on each protected side, made before the first trial (and none after: K is not counted)
    assert [(t, v) for _, t, v in spy.calls] == [(1, int(protect == "both"))] * len(spy.calls)
    (record,) = obj.ledger.training.records()
    assert len(obj.ledger.validation.records()) == int(protect == "both")
    charged = np.asarray(record.event.rdp)
    np.testing.assert_allclose(charged, _independent_selection_curve(reference), rtol=1e-6)
    stated = rdp_curve_epsilon(charged, ORDERS, DELTA)[0]
    assert 0.99 * EPSILON <= stated <= EPSILON * (1 + 1e-9)
    assert obj.ledger.training.epsilon(DELTA) == pytest.approx(stated, rel=1e-9)
    # every AMP trial's curve lies below plan_amp_selection's reference at every order of the ledger's grid
    ref = reference.rdp_values()
    for config, _, _ in spy.calls:
        assert (config.sigma_out, config.tau, config.clip) == (reference.sigma_out, reference.tau, reference.clip)
        assert np.all(np.asarray(amp_rdp(ORDERS, **config.privacy_parameters)) <= ref * (1 + 1e-9))
    # the release: the winning trial's model and hyperparameters; the guarantee of each protected set
    model, hyperparameters = result.runs[0].result.result.model, result.runs[0].result.result.hyperparameters
    assert any(config.lam == hyperparameters["lam"] for config, _, _ in spy.calls)
    assert model.config.lam == hyperparameters["lam"] and model.theta.shape == (data.num_features + 1,)
    assert result.protected["training"] == pytest.approx((stated, DELTA))
    assert (result.protected["validation"] is None) == (protect == "training")
    details = result.runs[0].result.result.guarantee["training"].details
    assert details["reference_run"] == reference.privacy_parameters
    # what each trial trains with is read from the charge's statement: AMP, and nothing tune returns says DP-SGD
    assert details["mechanism"] == AMP_MECHANISM
    report = result.guarantee_report()
    assert f"(each one {AMP_MECHANISM} training run at hyperparameters drawn at random" in report
    assert result.method_rule.endswith(f"private selection over whole {AMP_MECHANISM} training runs")
    assert not [text for text in (repr(result), result.to_json(), report, result.procedure) if "DP-SGD" in text]


def _tune_K(seed):
    r"""K of tune(seed=seed)'s selection, drawn as it draws it (NON-PRIVATE, for the test)."""
    method_seed = child_seeds([seed], 1)[0]
    rng = np.random.default_rng(child_seeds(int(method_seed), 3)[0])
    return sample_num_trials(distribution="truncated_negative_binomial", mean_trials=MEAN, rng=rng)


def _masked(text):
    text = re.sub(r"[0-9a-f]{32}", "ID", text)
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)


@pytest.mark.privacy_fast
def test_k_stays_hidden_in_the_result_its_report_and_json(data, monkeypatch):
    found: dict[int, int] = {}
    for seed in range(40):
        found.setdefault(_tune_K(seed), seed)
    (k1, seed1), (k2, seed2) = sorted(found.items())[:2]
    outputs = []
    for k, seed in ((k1, seed1), (k2, seed2)):
        with monkeypatch.context() as patch:
            result, spy = _tune(_objective(data), patch, protect="both", seed=seed)
        assert len(spy.calls) == k  # the helper draws tune's K (no padding without max_trials)
        outputs.append(
            [_masked(text) for text in (repr(result), result.to_json(), result.guarantee_report(), result.procedure)]
        )
    assert k1 != k2 and outputs[0] == outputs[1]
    assert not re.search(r"num_trials|num_evaluations|\bK\s*=\s*\d", json.dumps(outputs[0]))


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"accounting": "profile"}, r"accounting='profile' with an AMP objective"),
        ({"plan_options": {"distribution": "binomial", "binomial_rounds": 6}}, r"distribution='binomial' with an AMP"),
        ({"method": "subsample_tuning"}, r"method='subsample_tuning' with an AMP objective"),
        ({"method": "untuned"}, r"method='untuned' with an AMP objective"),
        ({"epsilon": 0.01}, r"epsilon = 0.01"),
        ({"lam_range": (0.6, 50.0)}, r"lam_range lower bound 0.6: .* allows only lambda > 1.74"),
        ({"protect": "trainng"}, r"protect must be .*'trainng'"),
        ({"mean_trials": 1.0}, r"mean_trials"),
    ],
)
def test_a_bad_input_is_refused_by_name_before_anything_is_charged(data, monkeypatch, kw, match):
    kw = dict(kw)
    obj = _objective(data, **({"lam_range": kw.pop("lam_range")} if "lam_range" in kw else {}))

    def trained(*args, **kwargs):
        raise AssertionError("an AMP run trained")

    monkeypatch.setattr(lr, "fit_amp", trained)
    with pytest.raises(ValueError, match=match):
        _tune(obj, **{"protect": "training", "seed": 0, **kw})
    assert obj.ledger.training.records() == [] and obj.ledger.validation.records() == []
