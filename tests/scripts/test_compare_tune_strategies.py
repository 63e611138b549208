"""scripts/compare_tune_strategies.py --quick: both strategies run on the paired synthetic task at
the target ε, and the report files hold what the table says."""

import json

from tests.helpers import loaded_script


def test_quick_run_writes_both_strategies_at_the_target_epsilon(tmp_path):
    with loaded_script("compare_tune_strategies") as script:
        report = script.main(["--quick", "--out", str(tmp_path)])
    rows = report["rows"]
    assert {r["strategy"] for r in rows} == {"enumerate", "sample"} and all(r["choices"] == 3 for r in rows)
    # at the target, never above it beyond float rounding (enumerate's exact GDP composition reads 3 + 4e-15);
    # sample is calibrated on the ledger's grid of orders, so its continuous-order guarantee can sit a little below
    assert all(3.0 * (1 - 2e-3) < r["epsilon"] <= 3.0 + 1e-12 and r["true_loss"] >= r["best_offset"] for r in rows)
    stored = json.loads((tmp_path / "tune_strategies.json").read_text())
    assert stored["summary"] == report["summary"] and stored["meta"]["command"].endswith(
        "--quick --out " + str(tmp_path)
    )
    table = (tmp_path / "tune_strategies.md").read_text()
    assert "| 3 |" in table and "torch thread(s)" in table
