"""benchmarks.paper in quick mode: the experiments share budgets, privacy levels and runs
as the paper's protocol says, and the report has every table and plot."""

import math

import pytest

from benchmarks.paper import EXPERIMENTS, Settings
from benchmarks.paper_jobs import experiment_jobs
from benchmarks.paper_runner import Runner
from botorch_dp.privacy.analysis.gdp import gdp_epsilon
from tests.helpers import quick_reproduction

PLOTS = (
    "comparison.png",
    "eps_sweep.png",
    "mu_sweep.png",
    "sigma_sweep.png",
    "normal_location.png",
    "huber.png",
    "svm.png",
)


@pytest.fixture(scope="module")
def quick():
    return quick_reproduction()


def _rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")
    ]


@pytest.mark.timeout(120)
def test_quick_writes_tables_and_plots(quick):
    out = quick["results_md"].parent
    text = quick["results_md"].read_text()
    assert text == quick["text"]
    first = {r[0] for r in _rows(text)}
    for label in (
        "DP-GIBO (μ=1, B=3, paper)",
        "GIBO (non-private)",
        "random search (non-private)",
        "private random search",
        "UCB-BO (non-private)",
        "surrogate σ=0.01",
        "surrogate σ=1",
        "surrogate σ=0.0001",
        "random search (non-private, noisy evaluations)",
        "DP-GIBO μ=0.5",
        "DP-GIBO μ=2",
        "DP-GIBO (μ=1)",
        "noisy GD (μ=1)",
        "GD (non-private, clipped)",
        "0.5",
        "2",
        "0.3",
        "1",
        "∞ (GIBO, no clipping)",
        "DP-GIBO (μ=1, B=1)",
    ):
        assert label in first, label
    assert any(label.startswith("DP-GIBO (μ=1, B=") and "pilot" in label for label in first)
    for heading in ("## 1.", "## 2.", "## 3.", "## 4.", "## 5a.", "## 5b.", "## 6.", "## Findings", "## Timing"):
        assert heading in text
    assert "Quick mode" in text and "NON-PRIVATE" in text and "seeds lower than random search" in text
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
    assert (out / "runs.json").exists()


def test_quick_runs_share_budget_and_privacy(quick):
    runs = quick["runs"]
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
    assert quick["pilot"]["clip_bound"] > 0 and quick["pilot"]["loss_clip"] > 0


def test_quick_sigma_sweep_uses_full_fixed_batches(quick):
    s = Settings.quick()
    sig = [r for r in quick["runs"] if r.experiment == "sigma"]
    assert len(sig) == len(s.sigma_values) + 1
    budget = s.sigma_iterations * (s.gp_dim + 1)  # b = d + 1 every iteration
    for r in sig:
        assert r.num_evaluations == budget
        if r.method.startswith("surrogate"):
            assert r.epsilon == pytest.approx(gdp_epsilon(s.sigma_mu, 1e-5))
    assert s.sigma_mu == 0.1 and s.sigma_clip == 1.0 and Settings().sigma_iterations == 45


def test_quick_svm_methods_share_the_evaluation_count(quick):
    s = Settings.quick()
    svm = {r.method: r for r in quick["runs"] if r.experiment == "svm"}
    assert set(svm) == {"DP-GIBO (μ=1, B=1)", "GIBO (non-private)", "random search (non-private)"}
    d = svm["DP-GIBO (μ=1, B=1)"].extra["dim"]
    assert d == s.svm_num_features + 3
    for r in svm.values():
        assert r.num_evaluations == s.svm_iterations * (d + 1)  # fixed batches b = d + 1
        assert math.isfinite(r.final_loss) and r.final_loss >= 0
    assert svm["DP-GIBO (μ=1, B=1)"].epsilon == pytest.approx(gdp_epsilon(1.0, 1e-5))
    assert svm["GIBO (non-private)"].epsilon is None


def test_experiment_jobs_reuse_identical_dp_gibo_runs_and_chain_budgets(quick):
    s = Settings.quick()
    jobs = experiment_jobs(s, quick["pilot"], EXPERIMENTS)
    assert len(jobs) == len(quick["runs"])
    for i, job in enumerate(jobs):
        assert all(d < i for d in job.deps)
        if job.reuse_of is not None:
            source = jobs[job.reuse_of].kwargs
            assert {k: v for k, v in job.kwargs.items() if k not in ("experiment", "method", "setting")} == {
                k: v for k, v in source.items() if k not in ("experiment", "method", "setting")
            }
    gibo = [job for job in jobs if job.kind == "dp_gibo_gp" and math.isinf(job.kwargs["mu"])]
    assert gibo and all(job.kwargs["clip"] == 1e30 for job in gibo)  # baselines.NO_CLIP
    assert experiment_jobs(s, {}, ("normal",))[0].kwargs["iterations"] == s.normal_location_iterations
    with pytest.raises(ValueError, match="unknown job kind"):
        Runner(s).execute("nope", {})
