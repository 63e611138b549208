"""scripts/update_slow_tests.py: the slow list is the functions over the threshold, never a test marked
``privacy_fast``."""

from scripts.update_slow_tests import slow_functions

LOG = """
1.20s call     tests/a/test_x.py::test_slow[one]
0.20s call     tests/a/test_x.py::test_slow[two]
0.10s setup    tests/a/test_x.py::test_quick
2.50s call     tests/a/test_x.py::test_privacy_twin
9.00s call     tests/audit/test_rows.py::test_row
"""


def test_functions_over_the_threshold_are_listed_with_all_their_parameters_summed():
    assert slow_functions(LOG, 0.3) == {
        "tests/a/test_x.py::test_slow": 1.4,
        "tests/a/test_x.py::test_privacy_twin": 2.5,
    }


def test_a_privacy_fast_test_is_never_listed_whatever_it_took():
    found = slow_functions(LOG, 0.3, frozenset({"tests/a/test_x.py::test_privacy_twin"}))
    assert found == {"tests/a/test_x.py::test_slow": 1.4}
