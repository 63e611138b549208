"""scripts/e1_investigation.py: the centring wrapper, the log parameterisation, the win counts and a quick run."""

import json
import re

import torch

from botorch_dp.gradient_gp import GradientGP
from botorch_dp.problems import GPRegressionLengthscales
from tests.helpers import loaded_script


def _gp(d=3, N=6, seed=0):
    from gpytorch.kernels import RBFKernel

    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(N, d, generator=gen, dtype=torch.float64)
    kernel = RBFKernel(ard_num_dims=d).to(torch.float64)
    kernel.requires_grad_(False)
    return GradientGP(X, kernel, 1e-4), X


def test_centring_removes_the_constant_and_is_restored():
    gp, X = _gp()
    theta = X.mean(0) + 0.3
    original = GradientGP.gradient_weights
    with torch.no_grad():
        A = gp.gradient_weights(theta)
        y = torch.randn(X.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        with loaded_script("e1_investigation") as script:
            with script.centred_gradient_weights():
                Ac = gp.gradient_weights(theta)
            assert GradientGP.gradient_weights is original
            with script.centred_gradient_weights(enabled=False):
                assert GradientGP.gradient_weights is original
    ones = torch.ones(X.shape[0], dtype=torch.float64)
    # a constant loss has no gradient once centred, but a zero-mean GP sees one
    assert torch.allclose(Ac @ ones, torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert (A @ ones).norm() > 1e-3
    # A (y − ȳ 1), computed independently
    torch.testing.assert_close(Ac @ y, A @ (y - y.mean()))


def test_log_lengthscales_evaluates_the_base_problem_at_exp():
    base = GPRegressionLengthscales(dim=2, n_total=60, seed=3)
    with loaded_script("e1_investigation") as script:
        log = script.LogLengthscales(base)
    torch.testing.assert_close(log.bounds, base.bounds.log())
    theta = base.sample_in_bounds(4, seed=0)
    torch.testing.assert_close(log(theta.log()), base(theta))
    assert log.num_users == base.num_users == 30


def test_summarise_reads_random_search_at_each_runs_budget_and_counts_strict_wins():
    runs = [
        dict(variant="eta1", method="GIBO (non-private)", seed=seed, final_loss=loss, num_evaluations=budget)
        for seed, loss, budget in [(0, 1.0, 2), (1, 3.0, 1), (2, 2.0, 3), (3, 0.5, 9)]
    ]
    curves = {"raw/full/0": [5.0, 2.0, 0.1], "raw/full/1": [2.0], "raw/full/2": [4.0, 3.0, 2.0]}
    with loaded_script("e1_investigation") as script:
        rows = script.summarise(runs, ["eta1"], curves, script.Settings())
    (row,) = rows
    # seed 0 at 2 evaluations: 1.0 < 2.0 (win; the curve's later 0.1 is not used); seed 1: loss; seed 2: a tie
    # is no win; seed 3: its budget is beyond the curve, so it is left out
    assert row["wins_vs_rs"] == "1/3" and row["rs_missing"] == 1
    assert abs(row["rs_mean"] - 2.0) < 1e-12
    assert abs(row["mean"] - 1.625) < 1e-12


def test_extended_random_search_curve_matches_random_search():
    from benchmarks.runs import iterate_curve
    from botorch_dp.baselines import random_search

    with loaded_script("e1_investigation") as script:
        settings = script.quick_settings()
        problem, _ = script.make_problem(settings, script.VARIANTS["baseline"], 4)
        direct = iterate_curve(problem, random_search(problem, problem.bounds, num_evaluations=9, seed=4))[1]
        full = script.extend_rs_curve(settings, "baseline", 4, [], 9)
        extended = script.extend_rs_curve(settings, "baseline", 4, full[:5], 9)
    assert full == extended
    torch.testing.assert_close(torch.tensor(full), torch.tensor(direct))


def test_quick_run_writes_json_and_table_and_resumes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "e1"
    argv = ["--quick", "--variants", "centred", "--seeds", "0", "--methods", "DP-GIBO (μ=1)", "--out", str(out)]
    with loaded_script("e1_investigation") as script:
        assert script.main(argv) == 0
        store = json.loads(out.with_suffix(".json").read_text())
        (run,) = store["runs"]
        assert run["method"] == "DP-GIBO (μ=1)" and run["num_evaluations"] > 0
        # DP-GIBO used the variant's pilot B; random search has a curve up to its budget
        assert run["clip"] == store["pilots"]["centred/quick"]["clip_bound"] > 0
        curves = json.loads((tmp_path / "e1_rs.json").read_text())
        assert len(curves["raw/quick/0"]) == run["num_evaluations"]
        table = out.with_suffix(".md").read_text()
        assert "| centred |" in table and "wins vs RS" in table
        # a second call finds everything recorded and runs nothing
        monkeypatch.setattr(script, "run_seed", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-ran")))
        assert script.main(argv) == 0
    assert re.search(r"wins vs RS [01]/1", capsys.readouterr().out)
