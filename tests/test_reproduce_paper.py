"""scripts/reproduce_paper.py --quick runs in-process and writes the tables and plots."""

import json
import math

import pytest
from helpers import loaded_script

from botorch_dp.privacy.analysis.gdp import gdp_epsilon

PLOTS = ("comparison.png", "eps_sweep.png", "mu_sweep.png", "sigma_sweep.png", "normal_location.png", "huber.png",
         "svm.png")


@pytest.fixture(scope="module")
def script():
    with loaded_script("reproduce_paper") as module:
        yield module


@pytest.fixture(scope="module")
def quick(script, tmp_path_factory):
    # one torch thread, like the worker processes of --workers, so that the runs are comparable bit for bit
    out = tmp_path_factory.mktemp("reproduce")
    result = script.main(["--quick", "--out", str(out), "--no-progress", "--threads", "1"])
    return out, result


@pytest.fixture(scope="module")
def quick_parallel(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce_parallel")
    result = script.main(["--quick", "--out", str(out), "--no-progress", "--workers", "2"])
    return out, result


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


@pytest.mark.timeout(120)
def test_quick_writes_tables_and_plots(quick):
    out, result = quick
    text = (out / "results.md").read_text()
    assert result["results_md"] == out / "results.md"
    first = {r[0] for r in _rows(text)}
    for label in (
        "DP-GIBO (μ=1, B=3, paper)", "GIBO (non-private)", "random search (non-private)",
        "private random search", "UCB-BO (non-private)", "surrogate σ=0.01", "surrogate σ=1",
        "surrogate σ=0.0001", "random search (non-private, noisy evaluations)", "DP-GIBO μ=0.5",
        "DP-GIBO μ=2", "DP-GIBO (μ=1)", "noisy GD (μ=1)", "GD (non-private, clipped)",
        "0.5", "2", "0.3", "1", "∞ (GIBO, no clipping)", "DP-GIBO (μ=1, B=1)",
    ):
        assert label in first, label
    assert any(label.startswith("DP-GIBO (μ=1, B=") and "pilot" in label for label in first)
    for heading in ("## 1.", "## 2.", "## 3.", "## 4.", "## 5a.", "## 5b.", "## 6.", "## Findings", "## Timing"):
        assert heading in text
    assert "Quick mode" in text and "NON-PRIVATE" in text
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
    assert (out / "runs.json").exists()


def test_quick_runs_share_budget_and_privacy(quick):
    _, result = quick
    runs = result["runs"]
    comp = [r for r in runs if r.experiment == "comparison"]
    dp = {r.seed: r for r in comp if r.method.startswith("DP-GIBO") and "pilot" in r.method}
    assert len(dp) == 2
    eps = gdp_epsilon(1.0, 1e-5)
    for r in comp:
        if r.method in ("random search (non-private)", "UCB-BO (non-private)"):
            # same evaluation budget as DP-GIBO on the same seed
            assert r.num_evaluations == dp[r.seed].num_evaluations and r.epsilon is None
        elif r.method == "private random search":
            # calibrated to DP-GIBO's (ε, δ) at μ = 1
            assert r.epsilon == pytest.approx(eps, rel=1e-4)
        elif r.method.startswith("DP-GIBO"):
            assert r.epsilon == pytest.approx(eps)
        assert math.isfinite(r.final_loss) and r.final_loss >= 0
    # sweeps reuse the comparison's DP-GIBO run instead of repeating it
    reused = [r for r in runs if r.extra.get("reused")]
    assert {r.experiment for r in reused} == {"eps", "mu"}
    assert result["pilot"]["clip_bound"] > 0 and result["pilot"]["loss_clip"] > 0


def test_render_rewrites_the_report_from_runs_json(script, quick):
    out, result = quick
    before = (out / "results.md").read_text()
    (out / "comparison.png").unlink()
    rendered = script.main(["--render", str(out)])
    after = (out / "results.md").read_text()
    assert "re-rendered from `runs.json`" in after and "nothing was re-run" in after
    assert (out / "comparison.png").exists()
    # the same runs give the same tables
    table = lambda text: [line for line in text.splitlines() if line.startswith("|") and "wall time" not in line]
    assert table(after)[:12] == table(before)[:12]
    assert len(rendered["runs"]) == len(result["runs"])


def test_quick_sigma_sweep_uses_full_fixed_batches(script, quick):
    _, result = quick
    s = script.Settings.quick()
    sig = [r for r in result["runs"] if r.experiment == "sigma"]
    assert len(sig) == len(s.sigma_values) + 1
    budget = s.sigma_iterations * (s.gp_dim + 1)  # b = d + 1 every iteration
    for r in sig:
        assert r.num_evaluations == budget
        if r.method.startswith("surrogate"):
            assert r.epsilon == pytest.approx(gdp_epsilon(s.sigma_mu, 1e-5))
    assert s.sigma_mu == 0.1 and s.sigma_clip == 1.0 and script.Settings().sigma_iterations == 45


def test_quick_svm_methods_share_the_evaluation_count(script, quick):
    out, result = quick
    s = script.Settings.quick()
    svm = {r.method: r for r in result["runs"] if r.experiment == "svm"}
    assert set(svm) == {"DP-GIBO (μ=1, B=1)", "GIBO (non-private)", "random search (non-private)"}
    d = svm["DP-GIBO (μ=1, B=1)"].extra["dim"]
    assert d == s.svm_num_features + 3
    for r in svm.values():
        assert r.num_evaluations == s.svm_iterations * (d + 1)  # fixed batches b = d + 1
        assert math.isfinite(r.final_loss) and r.final_loss >= 0
    assert svm["DP-GIBO (μ=1, B=1)"].epsilon == pytest.approx(gdp_epsilon(1.0, 1e-5))
    assert svm["GIBO (non-private)"].epsilon is None
    assert "seeds lower than random search" in (out / "results.md").read_text()


def _comparable(runs):
    # everything but wall times
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in runs]


@pytest.mark.timeout(300)
def test_workers_reproduce_the_serial_runs(quick, quick_parallel):
    out1, _ = quick
    out2, result = quick_parallel
    serial = json.loads((out1 / "runs.json").read_text())
    parallel = json.loads((out2 / "runs.json").read_text())
    assert parallel["workers"] == 2 and parallel["pilot"] == serial["pilot"]
    key = lambda r: (r["experiment"], r["method"], r["seed"], str(r["setting"]))
    assert [key(r) for r in parallel["runs"]] == [key(r) for r in serial["runs"]]  # same order
    for a, b in zip(serial["runs"], parallel["runs"]):
        assert (a["final_loss"], a["num_evaluations"], a["epsilon"]) == (b["final_loss"], b["num_evaluations"],
                                                                      b["epsilon"]), key(a)
    assert _comparable(parallel["runs"]) == _comparable(serial["runs"])
    # the same report, apart from the command, the wall times and the processes
    assert _without_times((out1 / "results.md").read_text()) == _without_times((out2 / "results.md").read_text())


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


def test_merge_combines_runs_json_of_several_commands(script, quick, tmp_path):
    out, _ = quick
    data = json.loads((out / "runs.json").read_text())
    parts = {"a": ("comparison", "eps", "mu"), "b": ("sigma", "normal", "huber", "svm")}
    dirs = []
    for name, exps in parts.items():
        d = tmp_path / name
        d.mkdir()
        part = dict(data, only=list(exps), runs=[r for r in data["runs"] if r["experiment"] in exps])
        (d / "runs.json").write_text(json.dumps(part))
        dirs.append(d)
    merged_dir = tmp_path / "merged"
    result = script.main(["--merge", str(dirs[1]), str(dirs[0]), "--out", str(merged_dir)])
    merged = json.loads((merged_dir / "runs.json").read_text())
    key = lambda r: (r["experiment"], r["method"], r["seed"], str(r["setting"]))
    assert [key(r) for r in merged["runs"]] == [key(r) for r in data["runs"]]  # experiment order restored
    assert len(result["runs"]) == len(data["runs"]) and len(merged["merged_from"]) == 2
    text = (merged_dir / "results.md").read_text()
    assert "Merged from the `runs.json` of" in text
    tables = lambda t: [line for line in t.splitlines() if line.startswith("|")]
    assert tables(text) == tables((out / "results.md").read_text())
    # a run may come from one source only
    with pytest.raises(SystemExit):
        script.main(["--merge", str(dirs[0]), str(dirs[0]), "--out", str(tmp_path / "dup")])


def test_render_reads_runs_json_written_before_the_new_settings(script, quick, tmp_path):
    out, _ = quick
    data = json.loads((out / "runs.json").read_text())
    for k in script.LEGACY_SETTINGS:
        data["settings"].pop(k)
    data["runs"] = [r for r in data["runs"] if r["experiment"] != "svm"]
    (tmp_path / "runs.json").write_text(json.dumps(data))
    script.main(["--render", str(tmp_path)])
    text = (tmp_path / "results.md").read_text()
    assert "chosen greedily" in text and "adaptive batches, ε = 0.5" in text and "pilot B, μ = 1 " in text
