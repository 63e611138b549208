"""scripts/measure_default_rule.py --quick: tune's three arms without a proxy on the paired GP task,
each at the target ε, and the report files hold what the table says."""

import json

from tests.helpers import loaded_script


def test_quick_run_writes_every_arm_at_the_target_epsilon(tmp_path):
    with loaded_script("measure_default_rule") as script:
        report = script.main(["--quick", "--out", str(tmp_path)])
    rows = report["rows"]
    assert [r["arm"] for r in rows] == ["dp_gibo", "private_random_search", "dp_hypo"]
    assert all(r["dim"] == 2 and r["seed"] == 0 for r in rows)
    # never above the target; a selection calibrated on the ledger's grid can sit a little below it
    assert all(3.0 * (1 - 2e-3) < r["epsilon"] <= 3.0 + 1e-12 and r["true_loss"] > 0 for r in rows)
    (entry,) = report["summary"]
    losses = {r["arm"]: r["true_loss"] for r in rows}
    assert entry["dp_gibo_vs_private_random_search"]["mean_difference"] == (
        losses["dp_gibo"] - losses["private_random_search"]
    )
    stored = json.loads((tmp_path / "default_rule_tune.json").read_text())
    assert stored["summary"] == report["summary"] and stored["meta"]["task"] == "gp"
    table = (tmp_path / "default_rule_tune.md").read_text()
    assert "| 2 |" in table and "torch thread(s)" in table and "GP length-scales" in table
