"""scripts/tune_dpsgd_selection.py --quick: every arm trains, every arm's training ε is within the
total, and the selection arms state the guarantee of each set they protect."""

import pytest

from tests.helpers import loaded_script


@pytest.mark.timeout(300)
def test_quick_run_keeps_every_arm_within_the_total_epsilon():
    with loaded_script("tune_dpsgd_selection") as script:
        out = script.main(["--quick"])
    (row,) = out["rows"]
    for arm in ("untuned", "selection", "selection_both"):
        assert 0.0 <= row[arm] <= 1.0
    assert 0.99 * 3.0 <= row["untuned_epsilon"] <= 3.0
    assert set(row["selection_epsilon"]) == {"training"}
    assert set(row["selection_both_epsilon"]) == {"training", "validation"}
    for arm in ("selection", "selection_both"):
        for epsilon in row[f"{arm}_epsilon"].values():
            assert 0.99 * 3.0 <= epsilon <= 3.0
