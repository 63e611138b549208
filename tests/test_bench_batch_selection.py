"""Smoke test of scripts/bench_batch_selection.py: the quick configuration runs in-process,
prints its table, and joint selection leaves less gradient uncertainty than greedy."""

import pytest

from helpers import loaded_script


@pytest.fixture(scope="module")
def bench():
    with loaded_script("bench_batch_selection") as module:
        yield module


@pytest.mark.timeout(120)
def test_quick_run_prints_table_and_joint_wins(bench, capsys):
    rows = bench.main(["--quick"])
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| 3 ")]
    assert len(table) == 2 and len(rows) == 2
    by = {r["selection"]: r for r in rows}
    d = 3
    for r in rows:
        assert 0 < r["fixed_trace"] < d  # below the prior trace tr ∇k∇ᵀ(θ, θ) = d
        assert 1 <= r["adaptive1_points"] <= d + 1
    assert by["joint"]["fixed_trace"] < 0.5 * by["greedy"]["fixed_trace"]
    # the adaptive rule stops at ε = 0.5 or at b_max = d + 1 points
    for r in rows:
        assert r["adaptive1_trace"] <= 0.5 or r["adaptive1_points"] == d + 1
