"""The CLIs in scripts/ run in-process with their quick options: reproduce_paper (--quick with
--workers 2, equal to the serial package run; --render; --merge), bench_acquisition and
bench_batch_selection (moved from tests/test_reproduce_paper.py, test_bench_script.py and
test_bench_batch_selection.py)."""

import json

import pytest
from tests.helpers import loaded_script, quick_reproduction


@pytest.fixture(scope="module")
def reproduce_paper():
    with loaded_script("reproduce_paper") as module:
        yield module


@pytest.fixture(scope="module")
def bench_acquisition():
    with loaded_script("bench_acquisition") as module:
        yield module


@pytest.fixture(scope="module")
def bench_batch_selection():
    with loaded_script("bench_batch_selection") as module:
        yield module


# ---------------------------------------------------------------------- reproduce_paper
@pytest.fixture(scope="module")
def quick_parallel(reproduce_paper, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce_parallel")
    result = reproduce_paper.main(["--quick", "--out", str(out), "--no-progress", "--workers", "2"])
    return out, result


def _comparable(runs):
    # everything but wall times
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in runs]


def _without_times(text: str) -> list[str]:
    lines, drop_last = [], False
    for line in text.split("## Timing")[0].splitlines():
        if line.startswith(("Command:", "Total wall time:", "Report re-rendered")):
            continue
        if line.startswith("|"):
            drop_last = drop_last or "wall time" in line
            if drop_last:
                line = line.rsplit("|", 2)[0]
        else:
            drop_last = False
        lines.append(line)
    return lines


@pytest.mark.timeout(300)
def test_reproduce_paper_workers_reproduce_the_serial_runs(quick_parallel, capsys):
    out2, result = quick_parallel
    out1 = quick_reproduction()["results_md"].parent
    assert result["results_md"] == out2 / "results.md"
    serial = json.loads((out1 / "runs.json").read_text())
    parallel = json.loads((out2 / "runs.json").read_text())
    assert parallel["workers"] == 2 and parallel["pilot"] == serial["pilot"]
    assert parallel["execution"] == "2 worker processes with 1 torch thread each"
    key = lambda r: (r["experiment"], r["method"], r["seed"], str(r["setting"]))
    assert [key(r) for r in parallel["runs"]] == [key(r) for r in serial["runs"]]  # same order
    for a, b in zip(serial["runs"], parallel["runs"]):
        assert (a["final_loss"], a["num_evaluations"], a["epsilon"]) == (b["final_loss"], b["num_evaluations"],
                                                                      b["epsilon"]), key(a)
    assert _comparable(parallel["runs"]) == _comparable(serial["runs"])
    # the same report, apart from the command, the wall times and the processes
    assert _without_times((out1 / "results.md").read_text()) == _without_times((out2 / "results.md").read_text())
    for name in ("comparison.png", "svm.png", "huber.png"):
        assert (out2 / name).read_bytes()[:4] == b"\x89PNG"


def test_reproduce_paper_render_rewrites_the_report_from_runs_json(reproduce_paper, quick_parallel, capsys):
    out, result = quick_parallel
    before = (out / "results.md").read_text()
    (out / "comparison.png").unlink()
    rendered = reproduce_paper.main(["--render", str(out)])
    after = (out / "results.md").read_text()
    assert "re-rendered from `runs.json`" in after and "nothing was re-run" in after
    assert after in capsys.readouterr().out
    assert (out / "comparison.png").exists()
    # the same runs give the same tables
    table = lambda text: [line for line in text.splitlines() if line.startswith("|") and "wall time" not in line]
    assert table(after)[:12] == table(before)[:12]
    assert len(rendered["runs"]) == len(result["runs"])


def test_reproduce_paper_merge_errors_exit(reproduce_paper, quick_parallel, tmp_path):
    # a successful merge is tested in tests/benchmarks/test_outputs.py
    out, _ = quick_parallel
    # a run may come from one source only
    with pytest.raises(SystemExit, match="is in both"):
        reproduce_paper.main(["--merge", str(out), str(out), "--out", str(tmp_path / "dup")])
    with pytest.raises(SystemExit):
        reproduce_paper.main(["--quick", "--workers", "0"])


# ---------------------------------------------------------------------- bench_acquisition
def _table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, f"no markdown table in output:\n{text}"
    split = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    header, separator, body = split[0], split[1], split[2:]
    assert all(set(c) <= set("-:") for c in separator)
    return header, body


@pytest.mark.timeout(60)
def test_bench_acquisition_quick_prints_table_and_agrees(bench_acquisition, capsys):
    rows = bench_acquisition.main(["--quick"])
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


def test_bench_acquisition_naive_matches_fast_on_q_batches(bench_acquisition):
    """The naive reference also handles q > 1 and agrees with the package there."""
    import torch

    from botorch_dp.acquisition import qGradientInformation

    gp, theta = bench_acquisition.make_problem(4, 15, seed=3)
    X = bench_acquisition.make_candidates(theta, 6, seed=3).reshape(2, 3, 4)
    with torch.no_grad():
        fast = qGradientInformation(gp, theta)(X)
        naive = bench_acquisition.NaiveGradientInformation(gp, theta)(X)
    assert fast.shape == naive.shape == (2,)
    torch.testing.assert_close(fast, naive, rtol=1e-8, atol=0)


# ---------------------------------------------------------------------- bench_batch_selection
@pytest.mark.timeout(120)
def test_bench_batch_selection_quick_prints_table_and_joint_wins(bench_batch_selection, capsys):
    rows = bench_batch_selection.main(["--quick"])
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| 3 ")]
    assert len(table) == 2 and len(rows) == 2
    by = {r["selection"]: r for r in rows}
    d = 3
    for r in rows:
        assert 0 < r["fixed_trace"] < d  # below the prior trace tr ∇k∇ᵀ(θ, θ) = d
        assert 1 <= r["adaptive1_points"] <= d + 1
    assert by["joint"]["fixed_trace"] < 0.5 * by["greedy"]["fixed_trace"]
    # the adaptive rule stops at bias_tolerance = 0.5 or at b_max = d + 1 points
    for r in rows:
        assert r["adaptive1_trace"] <= 0.5 or r["adaptive1_points"] == d + 1
