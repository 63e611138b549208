"""``tune(method="auto")`` without a proxy follows the public rule (``methods.default_rule``, issue 41),
and the result, its report and its JSON say which rule picked the method and why."""

import json
import math
import warnings

import pytest
import torch

from botorch_dp import tune
from botorch_dp.methods import picked_method
from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace

N = 200
FAST = dict(raw_samples=16, num_restarts=1, num_iterations=2)
_NOISE = torch.randn(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1

CONTINUOUS = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Hyperparameter("wd", 0.0, 1.0)])
INTEGER = SearchSpace([Hyperparameter("lr", 1e-4, 1e-1, log_scale=True), Integer("width", 16, 128)])
MIXED = SearchSpace(
    [
        Hyperparameter("lr", 1e-4, 1e-1, log_scale=True),
        Integer("width", 16, 128),
        Categorical("optimizer", ("sgd", "adam")),
    ]
)


def objective(configs):
    rows = [
        (math.log10(c["lr"]) + 2.5) ** 2 + c.get("wd", 0.0) + ((c.get("width", 64) - 64) / 64) ** 2
        + (0.0 if c.get("optimizer", "adam") == "adam" else 0.5)
        for c in configs
    ]  # fmt: skip
    return (0.2 * torch.tensor(rows, dtype=torch.float64)[:, None] + _NOISE).clamp(min=0)


def _tune(space, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seeded noise's PrivacyWarning (a reproduction)
        return tune(objective, space, epsilon=3.0, delta=1e-5, seed=3, progress=False, **{**FAST, **kw})


@pytest.mark.parametrize(
    ("space", "method", "words"),
    [
        (CONTINUOUS, "dp_gibo", "DP-GIBO, since all 2 hyperparameter(s) of the space are continuous"),
        (INTEGER, "private_random_search", "private random search, since the space has 1 integer hyperparameter(s)"),
        (MIXED, "private_random_search", "since the space has 1 integer and 1 categorical hyperparameter(s)"),
    ],
    ids=["continuous", "integer", "mixed"],
)
def test_without_a_proxy_the_rule_picks_the_method_and_every_output_says_why(space, method, words):
    result = _tune(space)
    assert result.method == method
    assert result.method_rule is not None and words in result.method_rule and "\n" not in result.method_rule
    assert f"Method: {method} (default rule without a proxy" in result.guarantee_report()
    written = json.loads(result.to_json())
    assert written["method"] == method and written["method_rule"] == result.method_rule
    # the rule's pick runs exactly as the method forced by name (same seed: the same release)
    forced = _tune(space, method=method)
    assert forced.hyperparameters == result.hyperparameters
    assert torch.equal(forced.runs[0].result.release.theta, result.runs[0].result.release.theta)
    assert forced.method_rule == f"method={method!r} given"
    assert 2.99 <= result.guarantee.epsilon <= 3.0 + 1e-9  # the whole (epsilon, delta), never more


def test_a_resumable_call_keeps_dp_gibo_on_a_mixed_space(tmp_path):
    result = _tune(MIXED, checkpoint_dir=tmp_path / "ckpt")
    assert result.method == "dp_gibo" and len(result.runs) == 2  # the enumerate procedure, resumable
    assert "checkpoint_dir= asks for resumable runs" in result.method_rule


@pytest.mark.parametrize(
    ("given", "resolved", "kw", "method", "words"),
    [
        ("auto", "auto", {"proxy": True}, "auto", "method='auto' with a proxy"),
        ("auto", "dp_gibo", {"trains": True}, "dp_gibo", "an objective that charges DP training runs"),
        ("auto", "dp_gibo", {}, "dp_gibo", "strategy='sample'"),
        ("dp_hypo", "dp_hypo", {}, "dp_hypo", "method='dp_hypo' given"),
        ("auto", "training_selection", {"protect": "both"}, "training_selection", "protect='both' without a proxy"),
        ("auto", "auto", {"protect": "training", "proxy": True}, "auto", "the training method the comparison"),
        ("untuned", "untuned", {"protect": "both"}, "untuned", "method='untuned' given"),
        ("auto", "auto", {}, "private_random_search", "default rule without a proxy"),
        ("auto", "auto", {"resumable": True}, "dp_gibo", "checkpoint_dir= asks for resumable runs"),
    ],
)
def test_every_path_names_the_rule_that_picked_the_method(given, resolved, kw, method, words):
    kinds = [h["kind"] for h in MIXED.describe()]
    args = {"proxy": False, "trains": False, "protect": "validation", "resumable": False, **kw}
    picked, line = picked_method(given, resolved, kinds, **args)
    assert picked == method and words in line and "\n" not in line


def test_a_fixed_categorical_is_no_longer_a_kind_to_tune():
    continuous = SearchSpace([*CONTINUOUS.hyperparameters, Categorical("opt", ("sgd", "adam"))], {"opt": "adam"})
    result = _tune(continuous)
    assert result.method == "dp_gibo" and "all 2 hyperparameter(s) of the space are continuous" in result.method_rule
