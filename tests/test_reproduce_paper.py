"""scripts/reproduce_paper.py --quick runs in-process and writes the tables and plots."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from botorch_dp.privacy.analysis.gdp import gdp_epsilon

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_paper.py"
PLOTS = ("comparison.png", "eps_sweep.png", "mu_sweep.png", "sigma_sweep.png", "normal_location.png", "huber.png")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("reproduce_paper", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def quick(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    result = script.main(["--quick", "--out", str(out), "--no-progress"])
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
        "0.5", "2", "0.3", "1", "∞ (GIBO, no clipping)",
    ):
        assert label in first, label
    assert any(label.startswith("DP-GIBO (μ=1, B=") and "pilot" in label for label in first)
    for heading in ("## 1.", "## 2.", "## 3.", "## 4.", "## 5a.", "## 5b.", "## Findings", "## Timing"):
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
