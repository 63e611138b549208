"""The CLIs in scripts/ run in-process with their quick options: reproduce_paper (--quick with
--workers 2, equal to the serial package run; --render; --merge) and bench_batch_selection
(moved from tests/test_reproduce_paper.py and test_bench_batch_selection.py; bench_acquisition's
tests are in test_bench_acquisition.py)."""

import json

import pytest

from tests.helpers import loaded_script, quick_reproduction


@pytest.fixture(scope="module")
def reproduce_paper():
    with loaded_script("reproduce_paper") as module:
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
    for a, b in zip(serial["runs"], parallel["runs"], strict=True):
        assert (a["final_loss"], a["num_evaluations"], a["epsilon"]) == (
            b["final_loss"],
            b["num_evaluations"],
            b["epsilon"],
        ), key(a)
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
