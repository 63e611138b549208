"""``default_method``: the public rule ``tune(method="auto")`` follows without a proxy (issue 41)."""

import pytest

from botorch_dp.methods import DefaultMethod, default_method


@pytest.mark.parametrize(
    ("counts", "method", "words"),
    [
        ({"num_continuous": 1}, "dp_gibo", "all 1 hyperparameter(s) of the space are continuous"),
        ({"num_continuous": 20}, "dp_gibo", "all 20 hyperparameter(s) of the space are continuous"),
        ({"num_continuous": 3, "num_integer": 1}, "private_random_search", "1 integer hyperparameter(s)"),
        ({"num_continuous": 0, "num_integer": 2}, "private_random_search", "2 integer hyperparameter(s)"),
        ({"num_continuous": 2, "num_categorical": 1}, "private_random_search", "1 categorical hyperparameter(s)"),
        (
            {"num_continuous": 3, "num_integer": 1, "num_categorical": 2},
            "private_random_search",
            "1 integer and 2 categorical hyperparameter(s)",
        ),
    ],
)
def test_the_rule_reads_the_kinds_of_hyperparameters(counts, method, words):
    pick = default_method(**counts)
    assert isinstance(pick, DefaultMethod) and pick.method == method
    assert pick.reason.startswith("default rule without a proxy (reports/default_rule.md): ")
    assert words in pick.reason and "\n" not in pick.reason  # one line


@pytest.mark.parametrize("counts", [{"num_continuous": 4}, {"num_continuous": 2, "num_categorical": 3}])
def test_a_resumable_call_keeps_dp_gibo_whatever_the_space(counts):
    pick = default_method(**counts, resumable=True)
    assert pick.method == "dp_gibo" and "checkpoint_dir=" in pick.reason


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ({"num_continuous": -1}, r"num_continuous must be an integer >= 0, got -1"),
        ({"num_continuous": 2.0}, r"num_continuous must be an integer >= 0, got 2.0"),
        ({"num_continuous": 1, "num_integer": True}, r"num_integer must be an integer >= 0, got True"),
        ({"num_continuous": 1, "num_categorical": None}, r"num_categorical must be an integer >= 0, got None"),
        ({"num_continuous": 0, "num_categorical": 2}, r"num_continuous \+ num_integer must be at least 1"),
    ],
)
def test_bad_counts_are_refused_by_name(counts, match):
    with pytest.raises(ValueError, match=match):
        default_method(**counts)
