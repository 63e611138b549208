r"""``scripts/compare_selection_accounting.py`` runs and writes its report (a smoke run, one E[K])."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_script_writes_a_report_where_the_profile_is_not_above_rdp(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "compare_selection_accounting", ROOT / "scripts/compare_selection_accounting.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--means", "10", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "selection-accounting.json").read_text())
    assert (tmp_path / "selection-accounting.md").read_text().startswith("# Private selection")
    for trial in report["trials"]:
        for row in trial["selection"]:
            assert row["pld_epsilon"] >= trial["single_pld_epsilon"]
            if row["rdp_epsilon"] is not None:
                assert row["pld_epsilon"] <= row["rdp_epsilon"]
    # the calibration: the profile needs no more noise than RDP, meets the target, and RDP at its σ says more
    assert report["calibration"]
    for row in report["calibration"]:
        assert row["accounting"] == "profile" and row["sigma"] < row["rdp_sigma"]
        assert row["epsilon"] <= row["target_epsilon"] <= row["rdp_epsilon_at_sigma"]
