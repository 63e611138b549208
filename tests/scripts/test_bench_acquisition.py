"""scripts/bench_acquisition.py --quick: the package's acquisition and the naive one agree, the
table is printed, and reports/bench_acquisition.{json,md} (here into a temporary directory)
hold the provenance, what the speed-up is measured against, and the same rows
(moved from tests/scripts/test_scripts.py)."""

import dataclasses

import pytest
import torch

from botorch_dp.acquisition import qGradientInformation
from tests.helpers import loaded_script, markdown_table, read_timing_report


@pytest.fixture(scope="module")
def bench_acquisition():
    with loaded_script("bench_acquisition") as module:
        yield module


@pytest.mark.timeout(120)
def test_bench_acquisition_quick_prints_table_agrees_and_writes_its_report(bench_acquisition, tmp_path, capsys):
    argv = ["--quick", "--out", str(tmp_path), "--note", "the quick size, in the tests"]
    rows = bench_acquisition.main(argv)
    out = capsys.readouterr().out

    assert out.startswith("torch ")
    assert "threads" in out and "CPU:" in out
    (cells,) = markdown_table(out)  # exactly the quick configuration: d = 3, N = |D| = 20
    assert (cells["d"], cells["N"]) == ("3", "20")
    assert "fast eval 16 cand. (ms)" in cells and "naive eval 16 cand. (ms)" in cells
    assert float(cells["max rel. diff"]) < 1e-6
    assert float(cells["speedup (naive/fast)"].rstrip("×")) > 0
    # |D| = 20 is small enough for the naive optimize_acqf to run
    float(cells["optimize_acqf naive (s)"])

    # the returned rows match the printed table
    (r,) = rows
    assert (r.d, r.n_train) == (3, 20)
    assert r.max_rel_diff < 1e-6
    assert r.fast_opt_value == pytest.approx(r.naive_opt_value, rel=1e-6)
    assert "not in this run's configurations" in out
    assert "Total runtime" in out

    report, text = read_timing_report(tmp_path, "bench_acquisition", argv)
    assert "NaiveGradientInformation" in report["compared_against"]
    assert report["note"] == "the quick size, in the tests" and "Note: the quick size, in the tests" in text
    assert "note" not in report["settings"] and "out" not in report["settings"]
    assert report["settings"]["dims"] == [3] and report["settings"]["num_candidates"] == 16
    assert report["target"]["speedup"] is None  # (100, 1000) was not run
    (stored,) = report["rows"]
    assert stored == {**dataclasses.asdict(r), "speedup": r.naive_eval_s / r.fast_eval_s}
    assert markdown_table(text) == [cells]  # the written table is the printed one


def test_bench_acquisition_naive_matches_fast_on_q_batches(bench_acquisition):
    """The naive reference also handles q > 1 and agrees with the package there."""
    gp, theta = bench_acquisition.make_problem(4, 15, seed=3)
    X = bench_acquisition.make_candidates(theta, 6, seed=3).reshape(2, 3, 4)
    with torch.no_grad():
        fast = qGradientInformation(gp, theta)(X)
        naive = bench_acquisition.NaiveGradientInformation(gp, theta)(X)
    assert fast.shape == naive.shape == (2,)
    torch.testing.assert_close(fast, naive, rtol=1e-8, atol=0)
