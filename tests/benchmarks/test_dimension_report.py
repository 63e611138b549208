"""benchmarks.dimension_report on the quick run: a row per method, the cells not run,
the plot and the runs file, and the note on batched DP-HyPO."""

import dataclasses

import pytest

from benchmarks import dimension_report as R
from benchmarks.dimension_task import METHODS


@pytest.fixture
def quick(dimension_quick):
    return dimension_quick


def test_report_has_rows_plot_and_runs(quick):
    text, out = quick["md"].read_text(), quick["out"]
    for label in METHODS.values():
        assert f"| {label} |" in text, label
    assert "not run" in text  # the high-d cells of the methods left out
    not_run = text.split("## Cells not run")[1].split("##")[0]
    assert "- d = 3: " in not_run and "None: every method" not in not_run
    # a report whose runs cover every cell says so instead of an empty section
    s, runs = quick["settings"], [r for r in quick["runs"] if r.extra.get("dim") == 2]
    full = R.write_report(dataclasses.replace(s, dims=(2,)), quick["context"], runs, out / "only_d2", "cmd")
    assert "None: every method ran at every d." in full.read_text()
    assert "Goal" in text and "| 2 | " in text and "quick mode" in text
    assert (out / "dimension.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "dimension_runs.json").stat().st_size > 1000


def test_quick_report_marks_batched_dp_hypo(quick):
    hypo = [r for r in quick["runs"] if r.extra.get("key") == "dp_hypo"]
    assert hypo and all(r.extra["density_update_every"] == r.extra["dim"] + 1 for r in hypo)
    assert "recomputed its sampling density once per d + 1" in quick["md"].read_text()
