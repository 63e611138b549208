"""scripts/bench_distributed.py --quick: every setup runs and reports its timings and memory, and
reports/bench_distributed.{json,md} (here into a temporary directory) hold the provenance and
both speed-ups of each Dask setup: over one Dask worker and over the in-process run."""

import statistics

import pytest

from tests.helpers import loaded_script, markdown_table, read_timing_report


@pytest.mark.timeout(600)
def test_quick_benchmark_runs_every_setup_and_reports_both_speedups(tmp_path, capsys):
    argv = ["--quick", "--out", str(tmp_path)]
    with loaded_script("bench_distributed") as bench:
        rows = bench.main(argv)
    assert [(r["setup"], r["workers"]) for r in rows] == [("in-process", 1), ("dask", 1), ("dask", 2)]
    for row in rows:
        assert len(row["step_s"]) == 2 and all(t > 0 for t in row["step_s"]) and row["points"] == 24
        assert len(row["peak_rss"]) == row["workers"] and all(p > 0 for p in row["peak_rss"])
    out = capsys.readouterr().out
    assert out.count("| 2e+04 |") == 3 and "speed-up vs 1 worker" in out and "speed-up vs in-process" in out

    report, text = read_timing_report(tmp_path, "bench_distributed", argv)
    assert report["rows"] == rows and "in-process" in report["compared_against"]
    median = {(r["setup"], r["workers"]): statistics.median(r["step_s"]) for r in report["rows"]}
    for row, cells in zip(report["rows"], markdown_table(text), strict=True):
        assert row["median_step_s"] == median[row["setup"], row["workers"]]
        if row["setup"] == "in-process":
            assert row["speedup"] is None and row["speedup_vs_in_process"] is None
            assert cells["speed-up vs 1 worker"] == cells["speed-up vs in-process"] == "–"
            continue
        over_one = median["dask", 1] / row["median_step_s"]
        over_in_process = median["in-process", 1] / row["median_step_s"]
        assert row["speedup"] == pytest.approx(over_one, rel=1e-12)
        assert row["speedup_vs_in_process"] == pytest.approx(over_in_process, rel=1e-12)
        assert cells["speed-up vs 1 worker"] == f"{over_one:.2f}×"
        assert cells["speed-up vs in-process"] == f"{over_in_process:.2f}×"
    assert markdown_table(text)[1]["speed-up vs 1 worker"] == "1.00×"  # the 1-worker row against itself


@pytest.mark.timeout(600)
def test_no_in_process_skips_the_setup_that_holds_every_loss(tmp_path, capsys):
    argv = ["--quick", "--no-in-process", "--workers", "1", "--out", str(tmp_path)]
    with loaded_script("bench_distributed") as bench:
        rows = bench.main(argv)
    assert [(r["setup"], r["workers"]) for r in rows] == [("dask", 1)]
    assert capsys.readouterr().out.count("| 2e+04 |") == 1
    report, _ = read_timing_report(tmp_path, "bench_distributed", argv)
    assert report["rows"][0]["speedup"] == 1.0 and report["rows"][0]["speedup_vs_in_process"] is None
