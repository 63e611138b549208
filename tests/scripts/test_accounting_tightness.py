r"""``scripts/accounting_tightness.py`` runs and writes its report, and the report's numbers say what
``reports/accounting-tightness.md`` reads from them (issue 41, third pass)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import loaded_script


def test_the_report_settles_both_findings(tmp_path):
    with loaded_script("accounting_tightness") as module:
        module.main(["--out", str(tmp_path)])
    report = json.loads((tmp_path / "accounting-tightness.json").read_text())
    assert (tmp_path / "accounting-tightness.md").read_text().startswith("# Accounting tightness")
    # (a) the library's curve is the definition's; dp-accounting's only at integer orders
    gap = report["plan_gap"]
    for row in gap["rdp"]:
        assert row["library"] == pytest.approx(row["mpmath"], rel=1e-9)
        if float(row["order"]).is_integer():
            assert row["dp_accounting"] == pytest.approx(row["mpmath"], rel=1e-9)
        else:
            assert row["dp_accounting"] > (1 + 1e-3) * row["mpmath"]
    assert gap["library_epsilon"][0] == pytest.approx(gap["plan_final_epsilon"], rel=1e-12)
    assert gap["dp_accounting_epsilon"][0] > gap["library_epsilon"][0]
    assert gap["dp_accounting_epsilon_integer_orders"][0] == pytest.approx(
        gap["library_epsilon_integer_orders"][0], rel=1e-9
    )
    # (b) every bound clears the exact Gaussian selection; at μ = 0.3 the profile is below RDP for every K
    for row in report["gaussian"]:
        assert row["pld_epsilon"] >= row["gaussian_exact_epsilon"]
        assert row["rdp_epsilon"] >= row["gaussian_exact_epsilon"]
        if row["mu"] == 0.3:
            assert row["pld_epsilon"] < row["rdp_epsilon"]
