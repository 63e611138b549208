"""tune(..., plan_options={"distribution": ...}) (issue 41, item 2): the hidden number of trials K of the private
selection over whole DP-SGD training runs may be geometric (the default), truncated negative binomial (tnb_eta),
Poisson or binomial (binomial_rounds, Koskela-Redberg-Wang); the training ledger is charged exactly the curve
select_training_runs charges for that distribution, K stays hidden in what tune returns, and a bad name or value
is refused by name before anything trains or is charged."""

import json
import re
import warnings

import numpy as np
import pytest

from botorch_dp.methods.training_choice import training_method
from botorch_dp.methods.training_runs import select_training_runs
from botorch_dp.privacy.analysis.private_selection import sample_num_trials
from botorch_dp.privacy.seeding import PrivacyWarning
from botorch_dp.tuning import load_sklearn_classification
from botorch_dp.tuning.one_call import tune
from botorch_dp.tuning.tune_call import selection_distribution
from botorch_dp.utils import child_seeds
from tests.methods.test_training_runs import DELTA, SPACE, objective

MEAN = 3.0
# each distribution as tune's plan_options and as select_training_runs' keywords
DISTRIBUTIONS = {
    "geometric": ({"distribution": "geometric"}, {"distribution": "tnb"}),
    "tnb": (
        {"distribution": "truncated_negative_binomial", "tnb_eta": 0.5},
        {"distribution": "truncated_negative_binomial", "tnb_eta": 0.5},
    ),
    "poisson": ({"distribution": "poisson"}, {"distribution": "poisson"}),
    "binomial": (
        {"distribution": "binomial", "binomial_rounds": 6},
        {"distribution": "binomial", "binomial_rounds": 6},
    ),
}


@pytest.fixture(scope="module")
def small():
    data = load_sklearn_classification("digits", seed=0)
    return (data.X_train[:200], data.y_train[:200], data.X_val[:60], data.y_val[:60])


def _tune(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # an explicit seed
        return tune(obj, SPACE, **{"epsilon": 3.0, "delta": DELTA, "mean_trials": MEAN, "progress": False, **kw})


def _select(obj, seed, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return select_training_runs(obj, epsilon=3.0, delta=DELTA, mean_trials=MEAN, seed=seed, **kw)


def _charge(obj):
    (record,) = obj.ledger.training.records()
    return record.event


def _same_charge(name, small, seed, protect):
    r"""The training ledger's charge of ``tune`` with K's distribution ``name`` and of ``select_training_runs``
    itself with the same distribution (each on a fresh objective, RDP accounting: the curve is the distribution's)."""
    options, keywords = DISTRIBUTIONS[name]
    tuned, direct = objective(small), objective(small)
    result = _tune(tuned, protect=protect, plan_options=options, accounting="rdp", seed=seed)
    selection = _select(direct, seed, protect=protect, accounting="rdp", loss_clip=3.0, **keywords)  # tune's C
    assert result.method == "training_selection" and len(tuned.seen) >= 1
    assert tuned.seen == [(1, int(protect == "both"))] * len(tuned.seen)  # charged once, before the first trial
    charged, own = _charge(tuned), _charge(direct)
    assert type(charged) is type(own) and charged.rdp == own.rdp  # bit for bit, every order
    assert charged.description == own.description
    details = result.runs[0].result.result.guarantee["training"].details
    assert details["noise_multiplier"] == selection.guarantee["training"].details["noise_multiplier"]
    if protect == "both":
        assert tuned.ledger.validation.records()[0].event == direct.ledger.validation.records()[0].event
    return charged


@pytest.fixture(scope="module")
def geometric_curve(small):
    r"""The training charge of the default selection (geometric K) at the same settings."""
    geometric = objective(small)
    _select(geometric, 0, protect="training", accounting="rdp")
    return _charge(geometric).rdp


def test_tune_charges_the_poisson_selections_own_curve_fast(small, geometric_curve):
    r"""The fast version (one distribution): the ledger's charge is select_training_runs' own for Poisson K, and
    not the geometric default's."""
    charged = _same_charge("poisson", small, seed=2, protect="training")
    assert charged.rdp != geometric_curve


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_tune_charges_each_distributions_own_curve(small, geometric_curve, name):
    charged = _same_charge(name, small, seed=3, protect="both")
    assert (charged.rdp == geometric_curve) == (name == "geometric")


def _tune_K(seed, keywords):
    r"""K of ``tune(seed=seed)``'s selection, drawn as it draws it (NON-PRIVATE, for the test): the method's seed is
    tune's child seed, K the first of its three child streams (``methods.training_runs._randomness``)."""
    method_seed = child_seeds([seed], 1)[0]
    rng = np.random.default_rng(child_seeds(int(method_seed), 3)[0])
    args = {k: v for k, v in keywords.items() if k != "distribution"}
    long = {"tnb": "truncated_negative_binomial"}.get(keywords["distribution"], keywords["distribution"])
    return sample_num_trials(distribution=long, mean_trials=MEAN, rng=rng, **args)


def _masked(text):
    text = re.sub(r"[0-9a-f]{32}", "ID", text)
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_k_stays_hidden_in_the_result_its_report_and_json_for_each_distribution(small, name):
    options, keywords = DISTRIBUTIONS[name]
    found: dict[int, int] = {}
    for seed in range(60):
        found.setdefault(_tune_K(seed, keywords), seed)
    found.pop(0, None)  # K = 0 releases no trial (Poisson, binomial): no hyperparameters to return
    (k1, seed1), (k2, seed2) = sorted(found.items())[:2]
    outputs = []
    for k, seed in ((k1, seed1), (k2, seed2)):
        obj = objective(small)
        result = _tune(obj, protect="both", plan_options=options, seed=seed)
        assert len(obj.seen) == k  # the helper draws tune's K (no padding without max_trials)
        outputs.append(
            [
                _masked(text)
                for text in (repr(result), result.to_json(), result.guarantee_report(), str(result.procedure))
            ]
        )
    assert k1 != k2 and outputs[0] == outputs[1]
    assert not re.search(r"num_trials|num_evaluations|\bK\s*=\s*\d", json.dumps(outputs[0]))


def test_the_distribution_reaches_the_method_tune_builds():
    r"""No training: each distribution asked of tune reaches the selection method, and its description says it."""
    for name, (options, _) in DISTRIBUTIONS.items():
        chosen = selection_distribution(options, MEAN)
        method = training_method("training_selection", SPACE, epsilon=3.0, delta=DELTA, protect="both", **chosen)
        assert (method.distribution, method.tnb_eta, method.binomial_rounds) == (
            chosen["distribution"],
            chosen["tnb_eta"],
            chosen["binomial_rounds"],
        )
        words = {"geometric": "K ~ tnb,", "tnb": "eta = 0.5", "poisson": "K ~ poisson", "binomial": "m = 6 rounds"}
        assert words[name] in method.describe()
    assert selection_distribution(None, MEAN) == {"distribution": "tnb", "tnb_eta": 1.0, "binomial_rounds": None}
    assert selection_distribution({"distribution": "tnb", "tnb_eta": 2}, MEAN)["tnb_eta"] == 2.0


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"plan_options": {"distribution": "negative_binomial"}}, r"plan_options\['distribution'\].*'negative_bin"),
        ({"plan_options": {"distribution": "Poisson"}}, r"got 'Poisson'\. Did you mean 'poisson'"),
        ({"plan_options": {"distribution": 3}}, r"plan_options\['distribution'\].*got 3"),
        ({"plan_options": {"distribution": "binomial"}}, r"plan_options\['binomial_rounds'\].*got None"),
        ({"plan_options": {"distribution": "binomial", "binomial_rounds": 2}}, r"mean_trials=3.0 exceeds binomial_r"),
        ({"plan_options": {"distribution": "binomial", "binomial_rounds": 4.5}}, r"binomial_rounds.*got 4\.5"),
        ({"plan_options": {"distribution": "poisson", "binomial_rounds": 6}}, r"'binomial_rounds'\]=6 is the number"),
        ({"plan_options": {"distribution": "geometric", "tnb_eta": 0.5}}, r"'tnb_eta'\]=0.5 with distribution='geom"),
        ({"plan_options": {"tnb_eta": 0.5}}, r"'tnb_eta'\]=0.5 with distribution='geometric'"),
        ({"plan_options": {"distribution": "tnb", "tnb_eta": -1.0}}, r"plan_options\['tnb_eta'\].*exceed -1.*-1\.0"),
        ({"plan_options": {"distribution": "tnb", "tnb_eta": float("nan")}}, r"plan_options\['tnb_eta'\].*nan"),
        ({"plan_options": {"distribution": "tnb", "tnb_eta": True}}, r"tnb_eta"),
        ({"plan_options": {"distributions": "poisson"}}, r"plan_options: give proxy= to plan on"),
        (
            {"plan_options": {"distribution": "poisson"}, "protect": "validation"},
            r"plan_options: \['distribution'\] choose K's distribution.*protect='validation'",
        ),
        (
            {"plan_options": {"distribution": "poisson"}, "method": "subsample_tuning"},
            r"method='subsample_tuning' nothing takes it",
        ),
    ],
)
def test_a_bad_distribution_is_refused_by_name_before_anything(small, kw, match):
    obj = objective(small)
    with pytest.raises(ValueError, match=match):
        _tune(obj, **{"protect": "training", "seed": 0, **kw})
    assert obj.seen == [] and obj.calls == 0
    assert obj.ledger.training.records() == [] and obj.ledger.validation.records() == []


class _Stop(Exception):
    pass


def test_auto_with_a_proxy_compares_the_selection_at_the_distribution_asked_for(small, monkeypatch):
    r"""No training: ``tune(method="auto", proxy=...)`` hands the distribution to the comparison on the proxy, and the
    comparison builds its selection candidate with it."""
    from botorch_dp.methods import training_choice
    from botorch_dp.tuning import method_runs

    handed, built = {}, {}

    def compare(*args, **kw):
        handed.update(kw)
        return real_compare(*args, **kw)

    def build(name, space, **kw):
        built[name] = kw
        raise _Stop

    real_compare = training_choice.choose_training_method
    monkeypatch.setattr(method_runs, "choose_training_method", compare)
    monkeypatch.setattr(training_choice, "training_method", build)
    options, _ = DISTRIBUTIONS["binomial"]
    obj = objective(small)
    with pytest.raises(_Stop):
        _tune(obj, protect="both", proxy=small, plan_options={**options, "num_repeats": 1}, seed=0)
    chosen = {"distribution": "binomial", "tnb_eta": 1.0, "binomial_rounds": 6}
    assert {k: handed[k] for k in chosen} == chosen
    assert {k: built["training_selection"][k] for k in chosen} == chosen
    assert obj.seen == [] and obj.ledger.training.records() == []
