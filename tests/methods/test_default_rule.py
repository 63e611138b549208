"""``default_method``: the public rule ``tune(method="auto")`` follows without a proxy (issue 41)."""

import pytest

from botorch_dp.methods import DefaultMethod, default_method

C, N, K = "continuous", "integer", "categorical"


@pytest.mark.parametrize(
    ("kinds", "method", "words"),
    [
        ([C], "dp_gibo", "all 1 hyperparameter(s) of the space are continuous"),
        ([C] * 20, "dp_gibo", "all 20 hyperparameter(s) of the space are continuous"),
        ([C, N, C, C], "private_random_search", "1 integer hyperparameter(s)"),
        ([N, N], "private_random_search", "2 integer hyperparameter(s)"),
        ([C, K, C], "private_random_search", "1 categorical hyperparameter(s)"),
        ([K, C, N, C, K, C], "private_random_search", "1 integer and 2 categorical hyperparameter(s)"),
    ],
)
def test_the_rule_reads_the_kinds_of_hyperparameters(kinds, method, words):
    pick = default_method(kinds)
    assert isinstance(pick, DefaultMethod) and pick.method == method
    assert pick.reason.startswith("default rule without a proxy (reports/default_rule.md): ")
    assert words in pick.reason and "\n" not in pick.reason  # one line
    assert default_method(tuple(reversed(kinds))) == pick  # the kinds, not their order


@pytest.mark.parametrize("kinds", [[C] * 4, [C, K, K, C]])
def test_a_resumable_call_keeps_dp_gibo_whatever_the_space(kinds):
    pick = default_method(kinds, resumable=True)
    assert pick.method == "dp_gibo" and "checkpoint_dir=" in pick.reason


@pytest.mark.parametrize(
    ("kinds", "match"),
    [
        ([C, "float"], r"kinds must hold only \('continuous', 'integer', 'categorical'\), got 'float'"),
        ([K, K], r"kinds must hold a continuous or integer hyperparameter \(a coordinate\), got \['categorical'"),
        ([], r"kinds must hold a continuous or integer hyperparameter"),
    ],
)
def test_bad_kinds_are_refused_by_name(kinds, match):
    with pytest.raises(ValueError, match=match):
        default_method(kinds)


def test_space_kinds_reads_each_hyperparameter_and_leaves_out_a_fixed_categorical():
    from botorch_dp.methods.default_rule import space_kinds
    from botorch_dp.tuning import Categorical, Hyperparameter, Integer, SearchSpace

    space = SearchSpace(
        [Hyperparameter("lr", 1e-3, 1.0, log_scale=True), Integer("width", 8, 64), Categorical("act", ("relu", "tanh"))]
    )
    assert space_kinds(space) == ["continuous", "integer", "categorical"]
    assert space_kinds(space.with_choice({"act": "tanh"})) == ["continuous", "integer"]
