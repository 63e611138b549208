"""Smoke test of scripts/bench_acquisition.py: its quick configuration runs in-process,
prints the expected table, and the fast and naive acquisitions agree."""

import pytest

from helpers import loaded_script


@pytest.fixture(scope="module")
def bench():
    with loaded_script("bench_acquisition") as module:
        yield module


def _table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, f"no markdown table in output:\n{text}"
    split = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    header, separator, body = split[0], split[1], split[2:]
    assert all(set(c) <= set("-:") for c in separator)
    return header, body


@pytest.mark.timeout(60)
def test_quick_run_prints_table_and_agrees(bench, capsys):
    rows = bench.main(["--quick"])
    out = capsys.readouterr().out

    assert out.startswith("torch ")
    assert "threads" in out and "CPU:" in out
    header, body = _table_rows(out)
    assert header[:2] == ["d", "N"]
    col = {name: i for i, name in enumerate(header)}
    assert "max rel. diff" in col and "speedup (naive/fast)" in col
    assert any(h.startswith("fast eval 16 cand.") for h in header)
    assert any(h.startswith("naive eval 16 cand.") for h in header)

    # exactly the quick configuration: d = 3, N = |D| = 20
    assert [(r[0], r[1]) for r in body] == [("3", "20")]
    (row,) = body
    assert len(row) == len(header)
    assert float(row[col["max rel. diff"]]) < 1e-6
    assert float(row[col["speedup (naive/fast)"]].rstrip("×")) > 0
    # |D| = 20 is small enough for the naive optimize_acqf to run
    assert "skipped" not in row[col["optimize_acqf naive (s)"]]
    float(row[col["optimize_acqf naive (s)"]])

    # the returned rows match the printed table
    (r,) = rows
    assert (r.d, r.n_train) == (3, 20)
    assert r.max_rel_diff < 1e-6
    assert r.fast_opt_value == pytest.approx(r.naive_opt_value, rel=1e-6)
    assert "not in this run's configurations" in out
    assert "Total runtime" in out


def test_naive_matches_fast_on_q_batches(bench):
    """The naive reference also handles q > 1 and agrees with the package there."""
    import torch

    from botorch_dp.acquisition import qGradientInformation

    gp, theta = bench.make_problem(4, 15, seed=3)
    X = bench.make_candidates(theta, 6, seed=3).reshape(2, 3, 4)
    with torch.no_grad():
        fast = qGradientInformation(gp, theta)(X)
        naive = bench.NaiveGradientInformation(gp, theta)(X)
    assert fast.shape == naive.shape == (2,)
    torch.testing.assert_close(fast, naive, rtol=1e-8, atol=0)
