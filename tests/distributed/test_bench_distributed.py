"""scripts/bench_distributed.py --quick: every setup runs and reports its timings and memory."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared helpers
from tests.helpers import loaded_script  # noqa: E402


@pytest.mark.timeout(600)
def test_quick_benchmark_runs_every_setup(capsys):
    with loaded_script("bench_distributed") as bench:
        rows = bench.main(["--quick"])
    assert [(r["setup"], r["workers"]) for r in rows] == [("in-process", 1), ("dask", 1), ("dask", 2)]
    for row in rows:
        assert len(row["step_s"]) == 2 and all(t > 0 for t in row["step_s"]) and row["points"] == 24
        assert len(row["peak_rss"]) == row["workers"] and all(p > 0 for p in row["peak_rss"])
    table = capsys.readouterr().out
    assert table.count("| 2e+04 |") == 3 and "speed-up vs 1 worker" in table


@pytest.mark.timeout(600)
def test_no_in_process_skips_the_setup_that_holds_every_loss(capsys):
    with loaded_script("bench_distributed") as bench:
        rows = bench.main(["--quick", "--no-in-process", "--workers", "1"])
    assert [(r["setup"], r["workers"]) for r in rows] == [("dask", 1)]
    assert capsys.readouterr().out.count("| 2e+04 |") == 1
